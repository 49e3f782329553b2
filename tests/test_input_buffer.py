"""The input buffer: whole link words written to either half, single vectors read back one
clock after their address (zeros when padding), equal to a Python model, for several vector
and link widths, including a depth that is not a multiple of the vectors per word."""

import random

import pytest
from amaranth.sim import Simulator

from dlforge.rtl.conv.config import EngineConfig
from dlforge.rtl.conv.input_buffer import InputBuffer


def _operands(word, cfg, vector):
    """Vector ``vector`` of a link word as signed operands (little-endian two's complement)."""
    bits = cfg.operand_bits
    base = vector * cfg.vector_bytes * 8
    values = []
    for s in range(cfg.simd):
        raw = (word >> (base + s * bits)) & ((1 << bits) - 1)
        values.append(raw - (1 << bits) if raw >> (bits - 1) else raw)
    return values


def run_buffer(cfg, seed, reads=300):
    rng = random.Random(seed)
    dut = InputBuffer(cfg)
    per_word = dut.vectors_per_word
    words = -(-cfg.input_depth // per_word)
    model = [[None] * (words * per_word) for _ in range(2)]

    async def bench(ctx):
        # Fill both halves in a random order, some words twice, writing between halves.
        order = [(h, a) for h in range(2) for a in range(words)]
        order += rng.sample(order, len(order) // 4)
        rng.shuffle(order)
        for half, addr in order:
            word = rng.getrandbits(8 * cfg.link_bytes)
            ctx.set(dut.w_en, 1)
            ctx.set(dut.w_half, half)
            ctx.set(dut.w_addr, addr)
            ctx.set(dut.w_data, word)
            for j in range(per_word):
                model[half][addr * per_word + j] = _operands(word, cfg, j)
            if rng.random() < 0.2:
                await ctx.tick()
                ctx.set(dut.w_en, 0)
            await ctx.tick()
        ctx.set(dut.w_en, 0)

        # Random reads, one per clock when enabled; a disabled clock keeps the last vector.
        expected = None
        for _ in range(reads):
            enable = rng.random() < 0.8
            half, addr = rng.randrange(2), rng.randrange(cfg.input_depth)
            pad = rng.random() < 0.2
            ctx.set(dut.r_en, enable)
            ctx.set(dut.r_half, half)
            ctx.set(dut.r_addr, addr)
            ctx.set(dut.r_pad, pad)
            await ctx.tick()
            if enable:
                expected = [0] * cfg.simd if pad else model[half][addr]
            if expected is not None:
                assert [int(x) for x in ctx.get(dut.r_data)] == expected

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("cfg", [
    EngineConfig(simd=1, input_depth=100, link_bytes=16),                    # 1-byte vectors, V = 16
    EngineConfig(simd=4, input_depth=100, link_bytes=32),                    # V = 8, 13 rows a bank
    EngineConfig(simd=8, input_depth=256, link_bytes=32),                    # V = 4, power of two
    EngineConfig(simd=4, operand_bits=16, input_depth=90, link_bytes=32),    # 16-bit operands
    EngineConfig(simd=8, operand_bits=16, input_depth=40, link_bytes=16),    # V = 1
], ids=["vb1", "vb4-odd-depth", "vb8", "16bit", "one-bank"])
@pytest.mark.parametrize("seed", range(2))
def test_reads_return_written_vectors(cfg, seed):
    run_buffer(cfg, seed)
