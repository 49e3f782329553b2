"""Chroma upsampling exactly as libjpeg-turbo does it (jdsample.c), both modes.

``fancy`` is the triangle filter of h2v1/h1v2/h2v2_fancy_upsample with libjpeg's edge rule:
the row above the first and below the last real row, and the column after the last real one,
repeat the nearest real sample (jdmainct.c's context rows; the SIMD code's "dummy sample").
``fast`` is pixel replication (int_upsample / the merged upsamplers, which give the same
pixels).  libjpeg-turbo itself falls back to replication for horizontal doubling when the
component is at most 2 samples wide (jinit_upsampler: ``downsampled_width > 2``).
"""

import numpy as np

__all__ = ["upsample", "MODES"]

MODES = ("fancy", "fast")


def _edge(x, axis, before, after):
    """Pad ``x`` by repeating its first/last element along ``axis``."""
    pad = [(0, 0)] * x.ndim
    pad[axis] = (before, after)
    return np.pad(x, pad, mode="edge")


def _h2_fancy(x, bias_left, bias_right, shift):
    """Horizontal doubling: 3/4 nearer + 1/4 further (weights and rounding per libjpeg)."""
    p = _edge(x, 1, 1, 1)
    near = 3 * p[:, 1:-1]
    out = np.empty((x.shape[0], 2 * x.shape[1]), dtype=np.int64)
    out[:, 0::2] = (near + p[:, :-2] + bias_left) >> shift
    out[:, 1::2] = (near + p[:, 2:] + bias_right) >> shift
    return out


def upsample(plane, factor_h, factor_v, mode):
    """Upsample a chroma ``plane`` (its real samples only, int64) by (factor_h, factor_v)."""
    if mode not in MODES:
        raise ValueError(f"upsampling mode must be one of {MODES}, not {mode!r}")
    x = plane.astype(np.int64)
    if (factor_h, factor_v) == (1, 1):
        return x
    if mode == "fast" or (factor_h == 2 and x.shape[1] <= 2):
        return np.repeat(np.repeat(x, factor_v, axis=0), factor_h, axis=1)
    if (factor_h, factor_v) == (2, 1):
        return _h2_fancy(x, 1, 2, 2)
    p = _edge(x, 0, 1, 1)
    above = 3 * p[1:-1] + p[:-2]           # output row 2r: nearer row r, further row r-1
    below = 3 * p[1:-1] + p[2:]            # output row 2r+1: nearer row r, further row r+1
    if (factor_h, factor_v) == (1, 2):
        out = np.empty((2 * x.shape[0], x.shape[1]), dtype=np.int64)
        out[0::2] = (above + 1) >> 2
        out[1::2] = (below + 2) >> 2
        return out
    if (factor_h, factor_v) == (2, 2):
        out = np.empty((2 * x.shape[0], 2 * x.shape[1]), dtype=np.int64)
        out[0::2] = _h2_fancy(above, 8, 7, 4)
        out[1::2] = _h2_fancy(below, 8, 7, 4)
        return out
    raise ValueError(f"no upsampling for factors {factor_h}x{factor_v}")
