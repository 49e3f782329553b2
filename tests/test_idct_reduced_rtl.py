"""The reduced-size IDCTs (jidctred.c's 4x4, 2x2, 1x1) in the IDCT gateware, per block, in
amaranth.sim: bit-exact to ``sim.idct_reduced_model`` (and ``idct_islow`` for 8x8 blocks),
``s`` rows out per size-``s`` block, full rate, and nothing lost under stalls."""

import random

import numpy as np
import pytest
from amaranth import signed, unsigned
from amaranth.sim import Simulator

from dlforge.rtl.jpeg import idct_constants as K
from dlforge.rtl.jpeg.idct import Idct, block_log_size
from dlforge.rtl.jpeg.idct_1d import Idct1D
from dlforge.sim.models import idct_reduced_model as R
from dlforge.sim.models.idct_model import idct_1d, idct_islow
from dlforge.sim.corpus.idct_vectors import idct_test_blocks


def test_constants_match_the_model():
    for name in dir(R):
        if name.startswith("FIX_"):
            assert getattr(K, name) == getattr(R, name), name
    assert K.DESCALES[2] == (12, 19) and K.DESCALES[1] == (13, 20) and K.DESCALES[0] == (0, 3)
    assert K.REDUCED_WORK_BITS == 30 and max(mod for mod, _ in K.SIZE_PASS1.values()) == 43
    assert Idct.SIZES == (8, 4, 2, 1)
    assert [Idct.rows_out(log) for log in Idct.LOG_SIZES] == [8, 4, 2, 1]


def test_rejects_reduced_below_eight_lanes():
    for lanes in (1, 2, 4):
        with pytest.raises(ValueError):
            Idct(lanes, reduced=True)
    with pytest.raises(ValueError):
        Idct1D(signed(32), 39, 11, reduced={2: (41, 12)})


# --- One pass --------------------------------------------------------------------------------

def _pass_model(x, log, pass_number):
    """Expected lanes of one pass for vectors ``x`` (int64, (n, 8)) of log2 size ``log``,
    before any modular reduction."""
    d1, d2 = K.DESCALES[log]
    shift = d1 if pass_number == 1 else d2
    if log == 3:
        return idct_1d(x, shift)
    if log == 0:
        return ((x[:, :1] + (1 << shift >> 1)) >> shift) if shift else x[:, :1]
    step = R._four if log == 2 else R._two
    return np.stack(step(x, shift), axis=-1)


def _run_pass(dut, vectors, logs, *, valid_prob, ready_prob, seed):
    """Feed (vector, size) pairs with random gaps and stalls; return [(lanes, o_size)]."""
    rng = random.Random(seed)
    got = []

    async def bench(ctx):
        sent, offering, cycle = 0, False, 0
        while len(got) < len(vectors):
            assert cycle < 40 * len(vectors) + 100
            if not offering and sent < len(vectors) and rng.random() < valid_prob:
                offering = True
                ctx.set(dut.i.payload, [int(v) for v in vectors[sent]])
                ctx.set(dut.size, int(logs[sent]))
            ctx.set(dut.i.valid, offering)
            ctx.set(dut.o.ready, rng.random() < ready_prob)
            _, _, i_ready, o_valid, o_ready, payload, o_size = await ctx.tick().sample(
                dut.i.ready, dut.o.valid, dut.o.ready, dut.o.payload, dut.o_size)
            if offering and i_ready:
                sent, offering = sent + 1, False
            if o_valid and o_ready:
                got.append(([int(v) for v in payload], o_size))
            cycle += 1

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return got


@pytest.mark.parametrize("pass_number", [1, 2])
def test_one_pass_every_size(pass_number):
    """Random sizes per vector, full-range inputs: each size's lanes are its model's residues
    (pass 1) or the 10 bits the range limit reads (pass 2); lanes above the size are zero."""
    rng = np.random.default_rng(pass_number)
    n = 400
    x = rng.integers(-2**31, 2**31, (n, 8), dtype=np.int64)
    x[:40] = rng.choice([-2**31, 2**31 - 1, 0, -1, 1], (40, 8))
    x[40:120] = rng.integers(-5000, 5000, (80, 8))
    logs = rng.integers(0, 4, n)
    if pass_number == 1:
        dut = Idct1D(signed(32), *K.SIZE_PASS1[3], reduced=K.SIZE_PASS1)
        inputs = x
    else:
        dut = Idct1D(unsigned(K.REDUCED_WORK_BITS), *K.SIZE_PASS2[3], reduced=K.SIZE_PASS2)
        inputs = x & ((1 << K.REDUCED_WORK_BITS) - 1)     # the residues pass 1 hands on
    assert dut.out_bits == (K.REDUCED_WORK_BITS if pass_number == 1 else K.RANGE_BITS)
    got = _run_pass(dut, inputs, logs, valid_prob=0.8, ready_prob=0.7, seed=pass_number)
    table = K.SIZE_PASS1 if pass_number == 1 else K.SIZE_PASS2
    for log in range(4):
        rows = np.flatnonzero(logs == log)
        s = 1 << log
        mod, shift = table[log]
        expected = _pass_model(x[rows], log, pass_number) & ((1 << (mod - shift)) - 1)
        lanes = np.array([got[r][0] for r in rows])
        assert all(got[r][1] == log for r in rows)
        assert (lanes[:, :s] == expected).all(), log
        assert (lanes[:, s:] == 0).all(), log


# --- The whole IDCT --------------------------------------------------------------------------

def _blocks(n, seed):
    """Edge cases (DC and single-coefficient extremes, full int16 x uint16 blocks), encoder-like,
    sparse and random full-range blocks, and DC-only blocks; shape (n, 8, 8) each."""
    rng = np.random.default_rng(seed)
    edge_c, edge_q = idct_test_blocks(445, seed=seed)       # the 445 edge cases
    more_c, more_q = idct_test_blocks(600, seed=seed + 100)
    pick = rng.choice(445, n // 3, replace=False)
    coefs = [edge_c[pick], more_c[-(n // 3):]]
    quant = [edge_q[pick], more_q[-(n // 3):]]
    k = n - 2 * (n // 3)
    dc = np.zeros((k, 8, 8), dtype=np.int64)
    dc[:, 0, 0] = rng.integers(-2048, 2048, k)
    dc[:2, 0, 0] = (-32768, 32767)
    coefs.append(dc)
    quant.append(rng.integers(1, 256, (k, 8, 8)))
    quant[-1][:2] = 65535
    coefs, quant = np.concatenate(coefs), np.concatenate(quant)
    order = rng.permutation(n)
    return coefs[order], quant[order]


def _expected_rows(coefs, quant, logs):
    """Per block, the rows the reduced Idct emits (lanes 0..s-1 the samples, zeros above)."""
    out = []
    for c, q, log in zip(coefs, quant, logs):
        s = 1 << log
        samples = idct_islow(c, q) if s == 8 else R.idct_reduced(c, q, s)
        rows = np.zeros((s, 8), dtype=np.int64)
        rows[:, :s] = samples
        out.append(rows)
    return out


def run_idct(coefs, quant, sizes, *, valid_prob=1.0, ready_prob=1.0, seed=0, small_ram="lut"):
    """Blocks through ``Idct(8, reduced=True)`` with ``sizes`` (a McuSizesLayout dict): returns
    (output rows, their clocks, clocks at which the input beats were taken)."""
    dut = Idct(8, reduced=True, small_ram=small_ram)
    beats = [[{"coef": int(c[r, k]), "quant": int(q[r, k])} for k in range(8)]
             for c, q in zip(coefs, quant) for r in range(8)]
    logs = [block_log_size(n, **sizes) for n in range(len(coefs))]
    n_out = sum(1 << log for log in logs)
    rng = random.Random(seed)
    got, when, taken = [], [], []

    async def bench(ctx):
        ctx.set(dut.sizes, sizes)
        sent, offering, cycle = 0, False, 0
        while len(got) < n_out:
            assert cycle < 200 + 40 * len(beats), f"{len(got)} of {n_out} rows after {cycle} clocks"
            if not offering and sent < len(beats) and rng.random() < valid_prob:
                offering = True
                ctx.set(dut.i.payload, beats[sent])
            ctx.set(dut.i.valid, offering)
            ctx.set(dut.o.ready, rng.random() < ready_prob)
            _, _, i_ready, o_valid, o_ready, payload = await ctx.tick().sample(
                dut.i.ready, dut.o.valid, dut.o.ready, dut.o.payload)
            if offering and i_ready:
                sent, offering = sent + 1, False
                taken.append(cycle)
            if o_valid and o_ready:
                got.append([int(v) for v in payload])
                when.append(cycle)
            cycle += 1
        for _ in range(30):            # and nothing more comes out
            ctx.set(dut.o.ready, 1)
            _, _, o_valid = await ctx.tick().sample(dut.o.valid)
            assert not o_valid, "a row beyond the blocks' sizes"

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return np.array(got), when, taken, logs


def _check(coefs, quant, sizes, **kw):
    got, when, taken, logs = run_idct(coefs, quant, sizes, **kw)
    expected = _expected_rows(coefs, quant, logs)
    assert len(got) == sum(len(e) for e in expected)
    start = 0
    for n, e in enumerate(expected):
        assert (got[start:start + len(e)] == e).all(), f"block {n} (size {len(e)})"
        start += len(e)
    return got, when, taken, logs


@pytest.mark.parametrize("log", [3, 2, 1, 0])
def test_each_size_alone(log):
    """Every block one size (grayscale-like MCU); the other kind's size must not matter."""
    coefs, quant = _blocks(300, seed=log)
    sizes = {"luma": log, "chroma": (log + 1) % 4, "luma_blocks": 1, "blocks": 1}
    _check(coefs, quant, sizes, valid_prob=0.9, ready_prob=0.8, seed=log)


@pytest.mark.parametrize("luma, chroma, luma_blocks, blocks", [
    (2, 3, 4, 6),      # 4:2:0 at 1/2: chroma stays 8x8
    (0, 1, 4, 6),      # 4:2:0 at 1/8
    (1, 1, 2, 4),      # 4:2:2 at 1/4
    (3, 3, 1, 3),      # 4:4:4 unscaled
    (1, 1, 1, 1),      # grayscale at 1/4
    (3, 2, 1, 3),      # sizes differing the other way round
])
def test_mixed_mcus(luma, chroma, luma_blocks, blocks):
    sizes = {"luma": luma, "chroma": chroma, "luma_blocks": luma_blocks, "blocks": blocks}
    coefs, quant = _blocks(8 * blocks + 3, seed=blocks + 7 * luma + chroma)   # a partial MCU last
    _, _, _, logs = _check(coefs, quant, sizes, valid_prob=0.85, ready_prob=0.75,
                           seed=luma_blocks)
    assert logs[:blocks] == [luma] * luma_blocks + [chroma] * (blocks - luma_blocks)


@pytest.mark.parametrize("ready_prob, valid_prob", [(0.3, 1.0), (1.0, 0.3), (0.5, 0.5)])
def test_back_pressure(ready_prob, valid_prob):
    """Heavy output stalls and input gaps: same rows, none lost or repeated."""
    sizes = {"luma": 1, "chroma": 2, "luma_blocks": 2, "blocks": 4}
    coefs, quant = _blocks(40, seed=int(ready_prob * 10 + valid_prob))
    _check(coefs, quant, sizes, valid_prob=valid_prob, ready_prob=ready_prob,
           seed=int(ready_prob * 100))


@pytest.mark.parametrize("small_ram", ["lut", "block"])
def test_full_rate(small_ram):
    """Output always ready, input always valid: a beat in every clock (one block per 8 clocks,
    whatever the sizes) and row ``r`` of block ``b`` out exactly ``latency + 8 b + r`` clocks
    after the first coefficient, as for 8x8 blocks."""
    sizes = {"luma": 0, "chroma": 3, "luma_blocks": 2, "blocks": 5}
    n = 40
    coefs, quant = _blocks(n, seed=99)
    got, when, taken, logs = _check(coefs, quant, sizes, small_ram=small_ram)
    assert taken == list(range(taken[0], taken[0] + 8 * n))        # no gaps at the input
    latency = Idct.timing(8, small_ram)[0]
    expected = [taken[0] + latency + 8 * b + r for b, log in enumerate(logs)
                for r in range(1 << log)]
    assert when == expected
    assert when[-1] - taken[0] <= 8 * n + latency
