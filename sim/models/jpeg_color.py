"""YCbCr to RGB exactly as libjpeg-turbo does it (jdcolor.c, SCALEBITS 16, table-driven)."""

import numpy as np

__all__ = ["ycc_tables", "ycc_to_rgb"]

SCALEBITS = 16
ONE_HALF = 1 << (SCALEBITS - 1)


def _fix(x):
    return int(x * (1 << SCALEBITS) + 0.5)


def ycc_tables():
    """The four 256-entry tables of build_ycc_rgb_table(), indexed by the chroma sample."""
    x = np.arange(256, dtype=np.int64) - 128
    cr_r = (_fix(1.40200) * x + ONE_HALF) >> SCALEBITS
    cb_b = (_fix(1.77200) * x + ONE_HALF) >> SCALEBITS
    cr_g = -_fix(0.71414) * x
    cb_g = -_fix(0.34414) * x + ONE_HALF
    return cr_r, cb_b, cr_g, cb_g


_CR_R, _CB_B, _CR_G, _CB_G = ycc_tables()


def ycc_to_rgb(y, cb, cr):
    """Three equal-shape uint8-valued planes -> (..., 3) uint8 RGB."""
    y = y.astype(np.int64)
    cb = cb.astype(np.int64)
    cr = cr.astype(np.int64)
    r = y + _CR_R[cr]
    g = y + ((_CB_G[cb] + _CR_G[cr]) >> SCALEBITS)
    b = y + _CB_B[cb]
    return np.clip(np.stack([r, g, b], axis=-1), 0, 255).astype(np.uint8)
