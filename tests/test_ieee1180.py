"""IEEE 1180-1990 accuracy of the golden islow IDCT, and checks that the checker can fail."""

import math

import numpy as np
import pytest

from dlforge.rtl.jpeg import idct_constants as K
from dlforge.sim.models import ieee1180 as ieee
from dlforge.sim.models.idct_model import dequantize, idct_1d


CASE_IDS = [f"L{L}-H{H}-{'pos' if s > 0 else 'neg'}" for L, H, s in ieee.STANDARD_CASES]


@pytest.mark.parametrize("L, H, sign", ieee.STANDARD_CASES, ids=CASE_IDS)
def test_model_meets_ieee1180(L, H, sign):
    """The six standard runs of 10,000 blocks: every limit holds for jpeg_idct_islow."""
    r = ieee.ieee1180_test(L=L, H=H, sign=sign, blocks=10000)
    assert r["peak_error"] <= 1
    assert r["pmse"] <= 0.06
    assert r["omse"] <= 0.02
    assert r["pme"] <= 0.015
    assert r["ome"] <= 0.0015
    assert r["zero_ok"]
    assert r["passed"] and all(r["checks"].values())
    assert r["peak_error_map"].shape == r["pmse_map"].shape == r["pme_map"].shape == (8, 8)


def test_generator_matches_the_c_code():
    """The vectorised generator equals a literal loop over the standard's C routine."""
    def c_rand(L, H, n):
        randx, z, out = 1, float(0x7FFFFFFF), []
        for _ in range(n):
            randx = (randx * 1103515245 + 12345) & 0xFFFFFFFF   # 32-bit long wraps
            x = (randx & 0x7FFFFFFE) / z
            x *= L + H + 1
            out.append(int(x) - L)                               # (long)x truncates
        return out

    for L, H in ((256, 255), (5, 5), (300, 300)):
        got = ieee.ieee_rand(L, H, 3000)
        assert got.tolist() == c_rand(L, H, 3000)
        assert got.min() >= -L and got.max() <= H
    blocks = ieee.random_blocks(5, 5, -1, blocks=4)
    assert np.array_equal(blocks, -ieee.ieee_rand(5, 5, 256).reshape(4, 8, 8))


def test_reference_transforms_use_the_jpeg_normalisation():
    """ref FDCT = 1/4 C(u)C(v) sum f cos cos, C(0) = 1/sqrt 2; ref IDCT inverts it."""
    rng = np.random.default_rng(7)
    f = rng.integers(-256, 256, size=(20, 8, 8))
    c = np.array([[(1 / math.sqrt(2) if u == 0 else 1.0) * math.cos((2 * x + 1) * u * math.pi / 16)
                   for x in range(8)] for u in range(8)]) / 2          # c[u, x]
    F = c @ f @ c.T                                                    # F[v, u]
    got = ieee.reference_fdct(f)
    assert np.all(np.abs(got - F) <= 0.5 + 1e-9)
    assert np.all(np.abs(ieee.reference_idct(got) - f) <= 1)
    # Halves are rounded away from zero, as the C code's (int)(x + 0.5) / -(int)(0.5 - x).
    x = np.array([0.5, -0.5, 1.5, -1.5, 2.4999, -2.5, 0.0])
    assert ieee._round_half_away(x).tolist() == [1, -1, 2, -2, 2, -3, 0]


def _model_without_final_rounding(coefs):
    """jpeg_idct_islow with the pass-2 rounding constant removed (a classic hardware slip).

    x0 enters every pass-2 output as x0 << CONST_BITS, so lowering the work array's first
    column by 2**17 >> 13 = 16 subtracts exactly the 1 << 17 that DESCALE adds: the result
    is floor instead of round-to-nearest.
    """
    d = dequantize(coefs, np.ones((8, 8), dtype=np.uint16))
    ws = np.swapaxes(idct_1d(np.swapaxes(d, -1, -2), K.PASS1_DESCALE), -1, -2)
    ws = ws.astype(np.int32).astype(np.int64)
    ws[..., 0] -= 1 << (K.PASS2_DESCALE - 1 - K.CONST_BITS)
    return idct_1d(ws, K.PASS2_DESCALE)


def _float_idct_truncating(coefs):
    """Exact float IDCT, then C's truncation toward zero instead of rounding."""
    f = ieee._separable(np.asarray(coefs, dtype=np.float64), ieee._COSLU.T, ieee._COSLU.T)
    return np.trunc(f).astype(np.int64)


def test_checker_rejects_truncating_idcts():
    """Truncation instead of rounding must fail, or the checker proves nothing."""
    r = ieee.ieee1180_test(_model_without_final_rounding, 256, 255, 1, blocks=10000)
    assert not r["passed"]
    assert not r["checks"]["ome"] and not r["checks"]["pme"] and not r["checks"]["omse"]
    assert r["mean_error"] < -0.3               # about half a unit low on average
    r = ieee.ieee1180_test(_float_idct_truncating, 300, 300, -1, blocks=10000)
    assert not r["passed"]
    assert not r["checks"]["pmse"] and not r["checks"]["omse"]


def test_checker_catches_small_biases_and_nonzero_idct0():
    """One pixel one too high in 2% of the blocks: the overall figures still pass, the
    per-pixel mean error does not.  A non-zero IDCT(0) fails the zero check alone."""
    def biased(coefs):
        out = ieee.model_idct(coefs).astype(np.int64)
        out[1::50, 3, 5] += 1
        return out

    r = ieee.ieee1180_test(biased, 5, 5, 1, blocks=10000)
    assert not r["passed"]
    failed = {k for k, ok in r["checks"].items() if not ok}
    assert "pme" in failed and failed <= {"pme", "peak_error"}   # +1 on a +1 error makes 2
    assert r["pme_map"][3, 5] > 0.015 and r["ome"] <= 0.0015 and r["omse"] <= 0.02

    def zero_leak(coefs):
        out = ieee.model_idct(coefs).astype(np.int64)
        out[np.all(coefs == 0, axis=(1, 2)), 0, 0] = 1
        return out

    r = ieee.ieee1180_test(zero_leak, 256, 255, 1, blocks=2000)
    assert not r["zero_ok"] and not r["passed"]
    assert [k for k, ok in r["checks"].items() if not ok] == ["zero"]


def test_report_format():
    """format_report prints one line per case plus a header."""
    rs = [ieee.ieee1180_test(L=5, H=5, sign=1)]
    text = ieee.format_report(rs)
    assert len(text.splitlines()) == 2 and "pass" in text
