"""The weight banks: a link word writes its vectors into their PEs' banks; column c reads the
address column 0 was given c clocks earlier, one clock after it."""

import random

import pytest
from amaranth.sim import Simulator

from dlforge.rtl.conv.config import EngineConfig
from dlforge.rtl.conv.weight_banks import WeightBanks


def _signed(v, bits):
    return v - (1 << bits) if v >> (bits - 1) else v


@pytest.mark.parametrize("shape, bits, link", [((2, 2, 1), 8, 16), ((4, 4, 4), 8, 16),
                                                ((2, 3, 4), 16, 32), ((8, 8, 8), 8, 32)])
def test_writes_land_in_their_pe_and_reads_follow_the_skew(shape, bits, link):
    rows, cols, simd = shape
    cfg = EngineConfig(rows=rows, cols=cols, simd=simd, operand_bits=bits, weight_depth=16,
                       link_bytes=link)
    dut = WeightBanks(cfg)
    rng = random.Random(str(shape))
    per_word = link // cfg.vector_bytes
    vbits = 8 * cfg.vector_bytes
    model = {}          # (half, k, channel) -> vector (list of operands)

    async def bench(ctx):
        for half in (0, 1):
            for k in range(cfg.weight_depth):
                for first in range(0, cfg.channels, per_word):
                    word = rng.getrandbits(8 * link)
                    ctx.set(dut.w_en, 1)
                    ctx.set(dut.w_half, half)
                    ctx.set(dut.w_k, k)
                    ctx.set(dut.w_channel, first)
                    ctx.set(dut.w_data, word)
                    for j in range(per_word):
                        ch = first + j
                        if ch < cfg.channels:
                            vec = (word >> (j * vbits)) & ((1 << vbits) - 1)
                            model[half, k, ch] = [_signed((vec >> (s * bits)) & ((1 << bits) - 1),
                                                          bits) for s in range(simd)]
                    await ctx.tick()
        ctx.set(dut.w_en, 0)
        reads = [(rng.randrange(2), rng.randrange(cfg.weight_depth)) for _ in range(40)]
        for t in range(len(reads) + cols + 1):
            if t < len(reads):
                ctx.set(dut.r_half, reads[t][0])
                ctx.set(dut.r_k, reads[t][1])
            await ctx.tick()
            # After the tick: column c shows the address given at t - c.
            for c in range(cols):
                if 0 <= t - c < len(reads):
                    half, k = reads[t - c]
                    for r in range(rows):
                        got = [int(v) for v in ctx.get(dut.w[c][r])]
                        assert got == model[half, k, c * rows + r], (t, c, r)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
