"""One IDCT pass in gateware equals the model's pass modulo the widths the hardware keeps."""

import numpy as np
from amaranth import signed, unsigned

from dlforge.rtl.jpeg import idct_constants as K
from dlforge.rtl.jpeg.idct_1d import Idct1D
from dlforge.sim.models.idct_model import idct_1d
from amaranth_streams import run_stream


def vectors(n, lo, hi, seed):
    rng = np.random.default_rng(seed)
    v = rng.integers(lo, hi, (n, 8), dtype=np.int64)
    v[0] = 0
    v[1] = hi - 1
    v[2] = lo
    return v


def test_pass1_full_range_inputs():
    """Dequantised inputs span the full int32 range: outputs are the model's bits [11, 39)."""
    x = vectors(300, -2**31, 2**31, 1)
    got, when = run_stream(Idct1D(signed(32), K.PASS1_MOD_BITS, K.PASS1_DESCALE),
                           [list(map(int, row)) for row in x], len(x), ready_prob=0.7, seed=2)
    expected = idct_1d(x, K.PASS1_DESCALE) & ((1 << K.PASS2_BITS) - 1)
    assert (np.array([[int(v) for v in g] for g in got]) == expected).all()


def test_pass2_modular_inputs():
    """Pass 2 takes 28-bit residues; its 10 output bits match the model on the full int32 value."""
    ws = vectors(300, -2**31, 2**31, 3)
    residues = ws & ((1 << K.PASS2_BITS) - 1)
    got, _ = run_stream(Idct1D(unsigned(K.PASS2_BITS), K.PASS2_BITS, K.PASS2_DESCALE),
                        [list(map(int, row)) for row in residues], len(ws), valid_prob=0.8, seed=4)
    expected = idct_1d(ws, K.PASS2_DESCALE) & K.RANGE_MASK
    assert (np.array([[int(v) for v in g] for g in got]) == expected).all()


def test_full_rate_latency():
    x = vectors(40, -1000, 1000, 5)
    _, when = run_stream(Idct1D(signed(32), K.PASS1_MOD_BITS, K.PASS1_DESCALE),
                         [list(map(int, row)) for row in x], len(x))
    assert when == list(range(Idct1D.latency, Idct1D.latency + 40))   # input taken at clock 0
