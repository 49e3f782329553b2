"""cocotb regression of the generated IDCT Verilog against the golden model.

Parameters arrive as JSON in DLFORGE_TB_PARAMS: samples_per_clock, latency (the generator's
figure, checked here), blocks (how many blocks under random back-pressure), seed.
"""

import json
import os
import random
from pathlib import Path

import cocotb
import numpy as np

from dlforge.sim.tb.streams import start as start_streams, stream_through
from dlforge.sim.models.idct_model import idct_islow
from dlforge.sim.corpus.idct_vectors import idct_test_blocks

PARAMS = json.loads(os.environ.get("DLFORGE_TB_PARAMS", "{}"))
LANES = int(PARAMS.get("samples_per_clock", 1))
LATENCY = PARAMS.get("latency")
BLOCKS = int(PARAMS.get("blocks", 2000))
SEED = int(PARAMS.get("seed", 1))


def pack_inputs(coefs, quant):
    """One int per beat: lane k holds (coef | quant << 16) at bits [32k, 32k + 32)."""
    words = (coefs.reshape(-1).astype(np.int64) & 0xFFFF) | (quant.reshape(-1).astype(np.int64) << 16)
    words = words.reshape(-1, LANES)
    beats = []
    for row in words.tolist():
        value = 0
        for k, w in enumerate(row):
            value |= w << (32 * k)
        beats.append(value)
    return beats


def unpack_outputs(beats):
    flat = [(b >> (8 * k)) & 0xFF for b in beats for k in range(LANES)]
    return np.array(flat, dtype=np.uint8).reshape(-1, 8, 8)


def record(**metrics):
    path = Path("metrics.json")
    data = json.loads(path.read_text()) if path.exists() else {}
    data.update(metrics)
    path.write_text(json.dumps(data, indent=1))


def check(got, coefs, quant):
    expected = idct_islow(coefs, quant)
    bad = np.nonzero((got != expected).reshape(len(got), -1).any(axis=1))[0]
    assert bad.size == 0, (
        f"{bad.size} of {len(got)} blocks differ; first is #{bad[0]}: coefs "
        f"{coefs[bad[0]].tolist()} quant {quant[bad[0]].tolist()} got {got[bad[0]].tolist()} "
        f"expected {expected[bad[0]].tolist()}")


async def start(dut):
    await start_streams(dut, sources=("i",), sinks=("o",))


@cocotb.test()
async def full_rate(dut):
    """Back-to-back blocks with no back-pressure: one block per 64/lanes clocks, no bubbles."""
    await start(dut)
    coefs, quant = idct_test_blocks(256, seed=SEED + 1)
    beats = pack_inputs(coefs, quant)
    got, stats = await stream_through(dut, beats, len(beats), record_cycles=True)
    check(unpack_outputs(got), coefs, quant)
    gaps = np.diff(stats.out_cycles)
    assert (gaps == 1).all(), f"output has {(gaps != 1).sum()} bubbles at full rate"
    assert stats.in_stalls == 0, f"the input was refused {stats.in_stalls} times at full rate"
    if LATENCY is not None:
        assert stats.first_out == LATENCY, f"latency {stats.first_out}, generator says {LATENCY}"
    span = stats.last_out - stats.first_out + 1
    record(full_rate_blocks=len(coefs), latency_cycles=stats.first_out,
           cycles_per_block=span / len(coefs), samples_per_clock=64 * len(coefs) / span)


@cocotb.test()
async def random_backpressure(dut):
    """Edge cases and random blocks with random gaps on the input and random stalls on the output."""
    await start(dut)
    coefs, quant = idct_test_blocks(BLOCKS, seed=SEED)
    beats = pack_inputs(coefs, quant)
    got, _ = await stream_through(dut, beats, len(beats), valid_prob=0.8, ready_prob=0.6,
                                  rng=random.Random(SEED))
    check(unpack_outputs(got), coefs, quant)
    record(random_blocks=len(coefs))


@cocotb.test()
async def long_stall(dut):
    """The output stops for a long time while input keeps coming: the core must fill up and
    refuse input, then resume without losing or repeating a sample."""
    await start(dut)
    coefs, quant = idct_test_blocks(64, seed=SEED + 2)
    beats = pack_inputs(coefs, quant)
    got, stats = await stream_through(dut, beats, len(beats),
                                      ready_prob=lambda c: 0.0 if 100 <= c < 1100 else 1.0)
    check(unpack_outputs(got), coefs, quant)
    assert stats.in_stalls > 0, "the input was never refused during the stall"
    record(stall_blocks=len(coefs))
