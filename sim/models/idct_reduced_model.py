"""Golden model of libjpeg-turbo's reduced-size inverse DCTs (jidctred.c: ``jpeg_idct_4x4``,
``jpeg_idct_2x2``, ``jpeg_idct_1x1``), the DCT-domain downscale of a scaled decode
(``scale_denom`` 2, 4, 8; Pillow's ``Image.draft``, simplejpeg's ``min_width``).

An 8x8 block of coefficients gives a 4x4, 2x2 or 1x1 block of samples directly: the
transform uses only the low-frequency coefficients it needs (rows and columns 0-3 and 5-7
for 4x4, 0, 1, 3, 5, 7 for 2x2, the DC alone for 1x1) with their own constants, so the
full-size image never exists.  Written from libjpeg-turbo's C (8-bit samples: CONST_BITS 13,
PASS1_BITS 2); its shortcuts for all-zero AC terms give the same values as the full
arithmetic, so the model computes every block the full way.  The x86-64 SIMD versions are
bit-exact to the C, and tests/test_jpeg_scaled.py checks the whole decode against
libjpeg-turbo itself.
"""

import numpy as np

from dlforge.rtl.jpeg import idct_constants as K

from dlforge.sim.models.idct_model import dequantize, range_limit_table

__all__ = ["idct_reduced", "REDUCED_SIZES"]

#: The block sizes this module computes (8 is the ordinary islow IDCT).
REDUCED_SIZES = (4, 2, 1)

CONST_BITS, PASS1_BITS = 13, 2


def _fix(x):
    return int(x * (1 << CONST_BITS) + 0.5)


FIX_0_211164243, FIX_0_509795579, FIX_0_601344887 = _fix(0.211164243), _fix(0.509795579), \
    _fix(0.601344887)
FIX_0_720959822, FIX_0_765366865, FIX_0_850430095 = _fix(0.720959822), _fix(0.765366865), \
    _fix(0.850430095)
FIX_0_899976223, FIX_1_061594337, FIX_1_272758580 = _fix(0.899976223), _fix(1.061594337), \
    _fix(1.272758580)
FIX_1_451774981, FIX_1_847759065, FIX_2_172734803 = _fix(1.451774981), _fix(1.847759065), \
    _fix(2.172734803)
FIX_2_562915447, FIX_3_624509785 = _fix(2.562915447), _fix(3.624509785)

_TABLE = range_limit_table()


def _descale(x, n):
    return (x + (np.int64(1) << (n - 1))) >> n


def _four(x, extra):
    """The 4-point pass over the last axis of ``x`` (8 inputs, 4 outputs before descaling):
    ``extra`` is the pass's added shift (jidctred.c: ``CONST_BITS + 1``)."""
    tmp0 = x[..., 0] << (CONST_BITS + 1)
    tmp2 = x[..., 2] * FIX_1_847759065 + x[..., 6] * -FIX_0_765366865
    tmp10, tmp12 = tmp0 + tmp2, tmp0 - tmp2
    z1, z2, z3, z4 = x[..., 7], x[..., 5], x[..., 3], x[..., 1]
    odd0 = (z1 * -FIX_0_211164243 + z2 * FIX_1_451774981 + z3 * -FIX_2_172734803
            + z4 * FIX_1_061594337)
    odd2 = (z1 * -FIX_0_509795579 + z2 * -FIX_0_601344887 + z3 * FIX_0_899976223
            + z4 * FIX_2_562915447)
    return [_descale(v, extra) for v in (tmp10 + odd2, tmp12 + odd0, tmp12 - odd0,
                                          tmp10 - odd2)]


def _two(x, extra):
    tmp10 = x[..., 0] << (CONST_BITS + 2)
    odd = (x[..., 7] * -FIX_0_720959822 + x[..., 5] * FIX_0_850430095
           + x[..., 3] * -FIX_1_272758580 + x[..., 1] * FIX_3_624509785)
    return [_descale(v, extra) for v in (tmp10 + odd, tmp10 - odd)]


def idct_reduced(coefs, quant, size):
    """Decoded 8-bit samples of shape (..., size, size) from (..., 8, 8) coefficients in
    natural order, exactly as ``jpeg_idct_<size>x<size>`` writes them."""
    d = dequantize(coefs, quant)
    d = np.broadcast_to(d, np.broadcast_shapes(d.shape, np.shape(quant)))
    if size == 1:
        return _TABLE[(_descale(d[..., 0, 0], 3)).astype(np.int32) & K.RANGE_MASK][..., None,
                                                                                   None]
    if size == 4:
        step, pass1, pass2 = _four, CONST_BITS - PASS1_BITS + 1, CONST_BITS + PASS1_BITS + 4
    elif size == 2:
        step, pass1, pass2 = _two, CONST_BITS - PASS1_BITS + 2, CONST_BITS + PASS1_BITS + 5
    else:
        raise ValueError(f"reduced IDCT sizes are {REDUCED_SIZES}, not {size}")
    # Pass 1 on the columns (the workspace is ``int``): rows of the work array are the
    # outputs, its columns the eight input columns.
    cols = np.swapaxes(d, -1, -2)                                   # (..., col, row)
    work = np.stack(step(cols, pass1), axis=-1).astype(np.int32).astype(np.int64)
    work = np.swapaxes(work, -1, -2)                                # (..., out row, col)
    out = np.stack(step(work, pass2), axis=-1).astype(np.int32)     # (..., out row, out col)
    return _TABLE[out & K.RANGE_MASK]
