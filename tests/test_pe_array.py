"""The PE array: every PE's dot product, drained one column per clock, at the documented
latency, whatever the gaps between elements, for several array shapes and operand widths."""

import random

import pytest
from amaranth.sim import Simulator

from dlforge.rtl.conv.config import EngineConfig
from dlforge.rtl.conv.pe_array import LATENCY, PeArray


def _wrap(value, bits):
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def run_array(cfg, pixels, gap_prob, seed):
    """Feed ``pixels`` (each a list of (x, w) elements); return the result beats as
    (clock, col, accs) and the expected beats."""
    rng = random.Random(seed)
    dut = PeArray(cfg)
    schedule = []               # per clock: (x, w per PE, first, last) or None
    expected = []
    for elements in pixels:
        for k, (x, w) in enumerate(elements):
            while rng.random() < gap_prob:
                schedule.append(None)
            schedule.append((x, w, k == 0, k == len(elements) - 1))
        t_last = len(schedule) - 1
        for c in range(cfg.cols):
            accs = [_wrap(sum(sum(xv * wv for xv, wv in zip(x, w[c][r])) for x, w in elements),
                          cfg.acc_bits) for r in range(cfg.rows)]
            expected.append((t_last + LATENCY + c, c, accs))
    total = len(schedule) + LATENCY + cfg.cols + 2
    got = []

    async def bench(ctx):
        zero_w = [[[0] * cfg.simd for _ in range(cfg.rows)] for _ in range(cfg.cols)]
        for t in range(total):
            entry = schedule[t] if t < len(schedule) else None
            if entry is None:
                ctx.set(dut.i.valid, 0)
            else:
                x, _, first, last = entry
                ctx.set(dut.i.valid, 1)
                ctx.set(dut.i.payload, {"x": x, "first": first, "last": last})
            # Column c works on the element that entered c clocks ago.
            for c in range(cfg.cols):
                old = schedule[t - c] if 0 <= t - c < len(schedule) else None
                ctx.set(dut.w[c], old[1][c] if old is not None else zero_w[c])
            if ctx.get(dut.o.valid):
                beat = ctx.get(dut.o.payload)
                got.append((t, int(beat.col), [int(a) for a in beat.acc]))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return got, expected


def _pixels(cfg, count, rng):
    lo, hi = -(1 << (cfg.operand_bits - 1)), (1 << (cfg.operand_bits - 1)) - 1
    pixels = []
    for n in range(count):
        length = rng.randint(cfg.cols, cfg.cols + 6)
        extreme = n == 0           # all-minimum operands: the largest products
        pixels.append([([lo if extreme else rng.randint(lo, hi) for _ in range(cfg.simd)],
                        [[[lo if extreme else rng.randint(lo, hi) for _ in range(cfg.simd)]
                          for _ in range(cfg.rows)] for _ in range(cfg.cols)])
                       for _ in range(length)])
    return pixels


@pytest.mark.parametrize("shape, bits", [((1, 1, 1), 8), ((2, 3, 2), 8), ((4, 4, 4), 8),
                                         ((2, 2, 4), 16)])
@pytest.mark.parametrize("gap_prob", [0.0, 0.3])
def test_dot_products_drain_in_column_order(shape, bits, gap_prob):
    rows, cols, simd = shape
    cfg = EngineConfig(rows=rows, cols=cols, simd=simd, operand_bits=bits,
                       link_bytes=16)
    rng = random.Random(hash((shape, bits, gap_prob)) & 0xFFFF)
    got, expected = run_array(cfg, _pixels(cfg, 12, rng), gap_prob, seed=rng.random())
    assert got == expected


def test_8bit_sums_wrap_to_the_contract_width():
    # 4608 products of -128 * -128 exceed no int32: the accumulator is 32 bits.
    assert EngineConfig().acc_bits == 32
    assert EngineConfig(operand_bits=16, simd=4, max_reduction=4608).acc_bits == 44
