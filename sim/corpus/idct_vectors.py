"""Coefficient blocks that exercise the IDCT: edge cases first, then realistic and random ones.

Shared by the Amaranth unit tests and the cocotb regression so both see the same kinds of block.
"""

import numpy as np

__all__ = ["STD_LUMA_QUANT", "idct_test_blocks"]

#: ITU T.81 Annex K luminance table (natural order), the base of most encoders' tables.
STD_LUMA_QUANT = np.array([
    16, 11, 10, 16, 24, 40, 51, 61,
    12, 12, 14, 19, 26, 58, 60, 55,
    14, 13, 16, 24, 40, 57, 69, 56,
    14, 17, 22, 29, 51, 87, 80, 62,
    18, 22, 37, 56, 68, 109, 103, 77,
    24, 35, 55, 64, 81, 104, 113, 92,
    49, 64, 78, 87, 103, 121, 120, 101,
    72, 92, 95, 98, 112, 100, 103, 99,
], dtype=np.int64).reshape(8, 8)


def _edge_cases():
    """All-zero, DC-only extremes, single coefficients at every position, extreme values."""
    blocks, quants = [], []

    def add(c, q):
        blocks.append(np.asarray(c, dtype=np.int64).reshape(8, 8))
        quants.append(np.broadcast_to(np.asarray(q, dtype=np.int64), (8, 8)).copy())

    zeros = np.zeros((8, 8), dtype=np.int64)
    add(zeros, 1)
    add(zeros, 65535)
    for dc in (-32768, -2048, -1024, -1, 1, 1023, 1024, 2047, 32767):
        for q in (1, 8, 255, 256, 32767, 65535):
            c = zeros.copy()
            c[0, 0] = dc
            add(c, q)
    for pos in range(64):
        for value, q in ((1, 1), (-1, 1), (2047, 1), (-2048, 1), (32767, 65535), (-32768, 65535)):
            c = zeros.copy()
            c.flat[pos] = value
            add(c, q)
    for value in (-32768, 32767):
        add(np.full((8, 8), value), 65535)
        add(np.full((8, 8), value), 1)
    checker = np.where((np.arange(64).reshape(8, 8) // 8 + np.arange(8)) % 2, 32767, -32768)
    add(checker, 65535)
    return blocks, quants


def idct_test_blocks(n, seed=0):
    """``n`` blocks (coefficients int16, quant values uint16), shape (n, 8, 8), natural order.

    The first ones are edge cases; the rest mix encoder-like blocks (small coefficients,
    standard tables scaled as by a quality setting), sparse ones, and uniformly random
    full-range blocks that no valid file contains but a corrupt one may.
    """
    rng = np.random.default_rng(seed)
    edge_c, edge_q = _edge_cases()
    coefs = np.zeros((n, 8, 8), dtype=np.int64)
    quant = np.ones((n, 8, 8), dtype=np.int64)
    k = min(n, len(edge_c))
    coefs[:k] = edge_c[:k]
    quant[:k] = edge_q[:k]
    for i in range(k, n):
        kind = i % 4
        if kind == 0:      # encoder-like: decaying magnitudes, quality-scaled table
            scale = rng.choice([5, 25, 50, 100, 200, 800, 5000])
            q = np.clip((STD_LUMA_QUANT * scale + 50) // 100, 1, 32767)
            spread = 1024 / (1 + np.add.outer(np.arange(8), np.arange(8)) ** 2)
            c = np.round(rng.normal(0, spread) / q).astype(np.int64)
        elif kind == 1:    # sparse: a few nonzero coefficients with 8-bit quant values
            q = rng.integers(1, 256, (8, 8))
            c = np.zeros((8, 8), dtype=np.int64)
            idx = rng.choice(64, size=rng.integers(1, 6), replace=False)
            c.flat[idx] = rng.integers(-1024, 1024, idx.size)
        elif kind == 2:    # valid-range coefficients with 16-bit quant values
            q = rng.integers(1, 65536, (8, 8))
            c = rng.integers(-2, 3, (8, 8)) * (rng.random((8, 8)) < 0.2)
        else:              # anything a corrupt stream could hold
            q = rng.integers(0, 65536, (8, 8))
            c = rng.integers(-32768, 32768, (8, 8))
        coefs[i], quant[i] = c, q
    return coefs.astype(np.int16), quant.astype(np.uint16)
