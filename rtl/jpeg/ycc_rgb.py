"""YCbCr to RGB in gateware, exactly as libjpeg-turbo's jdcolor.c computes it.

libjpeg builds four tables of products with 16-bit fixed-point constants; the gateware forms
the same products with constant multipliers, so no table needs storing and the result is the
same integer for every input (the golden model is ``sim/jpeg_color.py``).
"""

from amaranth import Cat, Mux

__all__ = ["SCALEBITS", "ycc_to_rgb", "chroma_offsets", "clamp_u8"]

SCALEBITS = 16
_ONE_HALF = 1 << (SCALEBITS - 1)


def _fix(x):
    return int(x * (1 << SCALEBITS) + 0.5)


CR_R = _fix(1.40200)
CB_B = _fix(1.77200)
CR_G = _fix(0.71414)
CB_G = _fix(0.34414)


def clamp_u8(value):
    """Saturate a signed value to 0..255 (libjpeg's range-limit table)."""
    return Mux(value < 0, 0, Mux(value > 255, 255, value))[:8]


def chroma_offsets(cb, cr):
    """What libjpeg adds to Y for R, G and B, from 8-bit ``cb``, ``cr`` (each fits 10 bits
    signed: at most 1.772 * 128 in magnitude)."""
    xb = Cat(cb[:7], ~cb[7]).as_signed()        # cb - 128: the top bit flipped
    xr = Cat(cr[:7], ~cr[7]).as_signed()
    r_off = (xr * CR_R + _ONE_HALF) >> SCALEBITS
    b_off = (xb * CB_B + _ONE_HALF) >> SCALEBITS
    g_off = (xb * -CB_G + xr * -CR_G + _ONE_HALF) >> SCALEBITS
    return r_off, g_off, b_off


def ycc_to_rgb(y, cb, cr):
    """(R, G, B) 8-bit values for 8-bit samples ``y``, ``cb``, ``cr`` (combinational)."""
    y = y.as_unsigned()
    return tuple(clamp_u8(y + off) for off in chroma_offsets(cb, cr))
