"""The whole IDCT component in amaranth.sim: a quick bit-exactness check at every width."""

import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from dlforge.rtl.jpeg.idct import Idct
from dlforge.sim.models.idct_model import idct_islow
from dlforge.sim.corpus.idct_vectors import idct_test_blocks
from amaranth_streams import run_stream, send_beats, collect_beats


@pytest.mark.parametrize("small_ram", ["lut", "block"])
@pytest.mark.parametrize("lanes", [1, 2, 4, 8])
def test_blocks_bit_exact(lanes, small_ram):
    coefs, quant = idct_test_blocks(40, seed=lanes)
    # Mix in the edge cases' extremes and random blocks from the end of a longer list.
    more_c, more_q = idct_test_blocks(600, seed=lanes)
    coefs = np.concatenate([coefs, more_c[-20:]])
    quant = np.concatenate([quant, more_q[-20:]])
    flat = [{"coef": int(c), "quant": int(q)} for c, q in zip(coefs.reshape(-1), quant.reshape(-1))]
    beats = [flat[i:i + lanes] for i in range(0, len(flat), lanes)]
    got, when = run_stream(Idct(lanes, small_ram=small_ram), beats, len(beats), valid_prob=0.9,
                           ready_prob=0.8, seed=lanes)
    samples = np.array([int(v) for g in got for v in g]).reshape(-1, 8, 8)
    assert (samples == idct_islow(coefs, quant)).all()


def test_latency_and_interval_figures():
    assert Idct.timing(8) == (32, 8) and Idct.timing(1) == (89, 64)
    assert Idct.timing(2) == (57, 32) and Idct.timing(4) == (41, 16)
    # each corner turn in block RAM reads through its output register: a clock more each
    assert Idct.timing(8, "block") == (34, 8)


@pytest.mark.parametrize("small_ram", ["lut", "block"])
def test_measured_latency_is_the_stated_one(small_ram):
    coefs, quant = idct_test_blocks(4, seed=1)
    flat = [{"coef": int(c), "quant": int(q)} for c, q in zip(coefs.reshape(-1), quant.reshape(-1))]
    beats = [flat[i:i + 8] for i in range(0, len(flat), 8)]
    dut = Idct(8, small_ram=small_ram)
    _, when = run_stream(dut, beats, len(beats))
    # the first beat enters at clock 0 (run_stream's count) and the rows follow without gaps
    assert when == list(range(dut.latency, dut.latency + len(beats)))


def test_rejects_unsupported_width():
    with pytest.raises(ValueError):
        Idct(3)
    with pytest.raises(ValueError, match="small_ram must be one of"):
        Idct(8, small_ram="distributed")


@pytest.mark.parametrize("small_ram", ["lut", "block"])
def test_the_credits_leave_room_for_every_vector(small_ram):
    """The passes run free and charge a credit per vector: under a slow, bursty consumer no
    vector may reach the rows gather or the output FIFO without room there, and every block
    still comes out exact."""
    coefs, quant = idct_test_blocks(24, seed=5)
    flat = [{"coef": int(c), "quant": int(q)} for c, q in zip(coefs.reshape(-1), quant.reshape(-1))]
    beats = [flat[i:i + 8] for i in range(0, len(flat), 8)]
    dut = Idct(8, small_ram=small_ram)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    got, refused, rng = [], [], random.Random(5)

    async def watch(ctx):
        pairs = dut.credited_writes
        async for _, _, *values in ctx.tick().sample(*[s for pair in pairs for s in pair]):
            for (write, _), wrote, room in zip(pairs, values[::2], values[1::2]):
                if wrote and not room:
                    refused.append(write.name)

    async def feed(ctx):
        await send_beats(ctx, dut.i, beats)

    async def drain(ctx):
        # long stalls and short bursts, so both buffers fill
        await collect_beats(ctx, dut.o, got, rng, ready_prob=0.15)

    async def bench(ctx):
        await ctx.tick().repeat(20 * len(beats))

    sim.add_testbench(watch, background=True)
    sim.add_testbench(feed, background=True)
    sim.add_testbench(drain, background=True)
    sim.add_testbench(bench)
    sim.run()
    assert refused == []
    samples = np.array([int(v) for g in got for v in g]).reshape(-1, 8, 8)
    assert len(samples) == len(coefs) and (samples == idct_islow(coefs, quant)).all()
