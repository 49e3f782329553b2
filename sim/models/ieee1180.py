"""IEEE Std 1180-1990 accuracy test for 8x8 inverse DCTs, vectorised with numpy.

The procedure follows the standard (and Tom Lane's public-domain ``ieeetest.c``, which is the
usual executable form of it) step by step:

1. Draw 64 pixel values per block from the standard's linear congruential generator, in the
   range [-L, +H], row by row, and multiply them by ``sign`` (+1 or -1).  The generator is
   re-seeded with 1 for every run, as each run of ``ieeetest`` is a separate process.
2. Reference forward DCT in double precision, rounded to the nearest integer (halves away
   from zero) and clipped to [-2048, 2047]: these are the test coefficients.
3. Reference inverse DCT of those coefficients in double precision, rounded the same way
   and clipped to [-256, 255].
4. The IDCT under test on the same coefficients, its output clipped to [-256, 255].
5. Error statistics over all blocks: peak absolute error (limit 1), per-pixel mean square
   error (0.06), overall mean square error (0.02), per-pixel mean error (|.| <= 0.015) and
   overall mean error (|.| <= 0.0015); finally an all-zero block must give all-zero output.

The DCT normalisation is F(u,v) = 1/4 C(u) C(v) sum f(x,y) cos((2x+1)u pi/16)
cos((2y+1)v pi/16) with C(0) = 1/sqrt(2), the same as JPEG's (ITU-T T.81 A.3.3).

The floating-point sums are accumulated in the same order as ``ieeetest.c`` does, so the
reference coefficients (including the rounding of exact-looking halves such as DC = n + 1/2)
come out bit-identical to the C program's on an IEEE double machine.
"""

import math

import numpy as np

__all__ = [
    "LIMITS",
    "STANDARD_CASES",
    "ieee_rand",
    "random_blocks",
    "reference_fdct",
    "reference_idct",
    "model_idct",
    "ieee1180_test",
    "ieee1180_all",
    "format_report",
]

#: The six runs the standard requires: (L, H, sign).
STANDARD_CASES = tuple((L, H, s) for (L, H) in ((256, 255), (5, 5), (300, 300)) for s in (1, -1))

#: Pass limits of IEEE 1180-1990, section 3.
LIMITS = {
    "peak_error": 1,        # max |error| at any pixel, any block
    "pmse": 0.06,           # worst per-pixel mean square error
    "omse": 0.02,           # overall mean square error
    "pme": 0.015,           # worst per-pixel |mean error|
    "ome": 0.0015,          # overall |mean error|
}

_A = 1103515245
_C = 12345
_M32 = 0xFFFFFFFF


def _lcg_states(n, seed=1):
    """The first ``n`` values of ``randx = randx * 1103515245 + 12345`` mod 2**32 (uint64).

    Built by doubling: if x[k] = A_k x[0] + C_k, the next k states are A_k * (first k) + C_k.
    All operands stay below 2**32, so the uint64 products never wrap.
    """
    out = np.empty(n, dtype=np.uint64)
    if n == 0:
        return out
    out[0] = (seed * _A + _C) & _M32
    k, a_k, c_k = 1, _A, _C                    # map from x[i] to x[i + k]
    while k < n:
        m = min(k, n - k)
        out[k:k + m] = (np.uint64(a_k) * out[:m] + np.uint64(c_k)) & np.uint64(_M32)
        a_k, c_k = (a_k * a_k) & _M32, (a_k * c_k + c_k) & _M32
        k += m
    return out


def ieee_rand(L, H, n, seed=1):
    """``n`` successive values of the standard's ``rand(L, H)`` (int64), uniform on [-L, H].

    ``randx`` is a 32-bit long that wraps; ``i = randx & 0x7ffffffe`` only reads its low
    31 bits, so a 64-bit long gives the same numbers.  The double arithmetic and the
    truncating ``(long)`` cast are done as in C.
    """
    i = (_lcg_states(n, seed) & np.uint64(0x7FFFFFFE)).astype(np.float64)
    x = i / float(0x7FFFFFFF)
    x = x * float(L + H + 1)
    return x.astype(np.int64) - L


def random_blocks(L, H, sign=1, blocks=10000, seed=1):
    """The standard's input blocks, shape (blocks, 8, 8) int64, values in sign * [-L, H]."""
    return ieee_rand(L, H, 64 * blocks, seed).reshape(blocks, 8, 8) * int(sign)


def _coslu():
    """``coslu[a][b] = C(b)/2 * cos((2a+1) b pi/16)``, computed as ieeetest.c does."""
    t = np.empty((8, 8), dtype=np.float64)
    for a in range(8):
        for b in range(8):
            v = math.cos(float((a + a + 1) * b) * (3.14159265358979323846 / 16.0))
            if b == 0:
                v /= math.sqrt(2.0)
            t[a, b] = v * 0.5
    return t


_COSLU = _coslu()


def _round_half_away(x):
    """``(int)(x + 0.5)`` for x >= 0, ``-(int)(0.5 - x)`` otherwise: halves go away from zero."""
    return np.where(x < 0.0, -np.floor(0.5 - x), np.floor(x + 0.5)).astype(np.int64)


def _separable(block, first, second):
    """res[..., p, q] = sum_r second[r, p] * (sum_s block[..., r, s] * first[s, q]).

    Both sums run sequentially from 0.0 in index order, like the C loops.
    """
    b = np.asarray(block, dtype=np.float64)
    inner = np.zeros(b.shape, dtype=np.float64)          # [..., r, q]
    for s in range(8):
        inner = inner + b[..., :, s, None] * first[s][None, :]
    res = np.zeros(b.shape, dtype=np.float64)            # [..., p, q]
    for r in range(8):
        res = res + second[r][:, None] * inner[..., r, None, :]
    return res


def reference_fdct(block):
    """Double-precision FDCT of (..., 8, 8) pixels, rounded (not clipped): ref_fdct()."""
    return _round_half_away(_separable(block, _COSLU, _COSLU))


def reference_idct(coefs):
    """Double-precision IDCT of (..., 8, 8) coefficients, rounded (not clipped): ref_idct()."""
    return _round_half_away(_separable(coefs, _COSLU.T, _COSLU.T))


def model_idct(coefs):
    """The golden model's IDCT proper: ``idct_islow_raw`` with every quant value 1."""
    from dlforge.sim.models.idct_model import idct_islow_raw

    return idct_islow_raw(np.asarray(coefs, dtype=np.int16), np.ones((8, 8), dtype=np.uint16))


def ieee1180_test(idct=None, L=256, H=255, sign=1, blocks=10000, seed=1):
    """Run one IEEE 1180 case; return its figures and verdicts as a dict.

    ``idct`` maps int16 coefficients (N, 8, 8) to integer outputs (N, 8, 8) (all blocks in
    one call); it defaults to the golden model.  Keys of the result: ``L, H, sign, blocks``;
    ``peak_error`` (int) and ``peak_error_map`` (8x8); ``pmse``, ``omse``, ``pme``, ``ome``
    (floats, ``pme``/``ome`` as magnitudes) with ``pmse_map``/``pme_map`` (8x8, signed mean
    errors) and ``mean_error`` (the signed overall mean error); ``zero_ok`` (all-zero in
    gives all-zero out); ``checks`` (name -> bool, limits from ``LIMITS``) and ``passed``.
    """
    if idct is None:
        idct = model_idct
    pixels = random_blocks(L, H, sign, blocks, seed)
    coefs = np.clip(reference_fdct(pixels), -2048, 2047)
    ref = np.clip(reference_idct(coefs), -256, 255)
    test = np.asarray(idct(coefs.astype(np.int16)))
    if test.shape != coefs.shape:
        raise ValueError(f"IDCT returned shape {test.shape}, expected {coefs.shape}")
    test = np.clip(test.astype(np.int64), -256, 255)

    err = test - ref
    sum_err = err.sum(axis=0)
    sum_sq = (err * err).sum(axis=0)
    peak_map = np.abs(err).max(axis=0)
    pmse_map = sum_sq / blocks
    pme_map = sum_err / blocks
    res = {
        "L": L, "H": H, "sign": sign, "blocks": blocks,
        "peak_error": int(peak_map.max()),
        "peak_error_map": peak_map,
        "pmse": float(pmse_map.max()),
        "pmse_map": pmse_map,
        "omse": float(sum_sq.sum() / (64 * blocks)),
        "pme": float(np.abs(pme_map).max()),
        "pme_map": pme_map,
        "ome": float(abs(sum_err.sum() / (64 * blocks))),
        "mean_error": float(sum_err.sum() / (64 * blocks)),
    }
    zero = np.asarray(idct(np.zeros((1, 8, 8), dtype=np.int16)))
    res["zero_ok"] = bool(np.all(zero == 0))
    res["checks"] = {name: res[name] <= limit for name, limit in LIMITS.items()}
    res["checks"]["zero"] = res["zero_ok"]
    res["passed"] = all(res["checks"].values())
    return res


def ieee1180_all(idct=None, blocks=10000):
    """All six standard runs; a list of ``ieee1180_test`` results in STANDARD_CASES order."""
    return [ieee1180_test(idct, L, H, s, blocks) for (L, H, s) in STANDARD_CASES]


def format_report(results):
    """A plain-text table of the figures, one line per case."""
    lines = [f"{'L':>4} {'H':>4} {'sign':>4}  {'peak':>4} {'pmse':>8} {'omse':>8} "
             f"{'pme':>8} {'ome':>8}  zero  result"]
    for r in results:
        lines.append(f"{r['L']:>4} {r['H']:>4} {r['sign']:>+4}  {r['peak_error']:>4} "
                     f"{r['pmse']:>8.6f} {r['omse']:>8.6f} {r['pme']:>8.6f} {r['ome']:>8.6f}  "
                     f"{'ok' if r['zero_ok'] else 'FAIL':>4}  "
                     f"{'pass' if r['passed'] else 'FAIL'}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(format_report(ieee1180_all()))
