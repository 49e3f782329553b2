"""YCbCr to RGB in gateware, exactly as libjpeg-turbo's jdcolor.c computes it.

libjpeg builds four tables of products with 16-bit fixed-point constants; the gateware forms
the same integers.  Each product of a constant with an 8-bit chroma value is split into the
products with its two 4-bit halves, each read from a 16-entry constant table (one LUT4 per
bit on an FPGA, no multiplier, no long carry chain), and the halves are added in the next
pipeline stage: ``chroma_partials`` then ``chroma_offsets``.  The golden model is
``sim/models/jpeg_color.py``.
"""

from amaranth import Array, Cat, Const, Mux, signed

__all__ = ["SCALEBITS", "ycc_to_rgb", "chroma_partials", "chroma_offsets", "clamp_u8",
           "PARTIAL_SHAPE"]

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


#: Every partial product fits: |constant| < 2^17 times a 4-bit half, shifted by at most 4.
PARTIAL_SHAPE = signed(26)


def _times(half, constant, high):
    """``constant`` times a 4-bit half of (sample - 128): the high half is signed and
    weighs 16, the low half unsigned."""
    values = [((i - 16 if high and i >= 8 else i) * (16 if high else 1)) * constant
              for i in range(16)]
    return Array(Const(v, PARTIAL_SHAPE) for v in values)[half]


def chroma_partials(cb, cr):
    """Eight partial products (high and low halves for R, B, G-from-Cb, G-from-Cr)."""
    xb = Cat(cb[:7], ~cb[7])                    # cb - 128 in two's complement: top bit flipped
    xr = Cat(cr[:7], ~cr[7])
    return [_times(xr[4:8], CR_R, True), _times(xr[0:4], CR_R, False),
            _times(xb[4:8], CB_B, True), _times(xb[0:4], CB_B, False),
            _times(xb[4:8], -CB_G, True), _times(xb[0:4], -CB_G, False),
            _times(xr[4:8], -CR_G, True), _times(xr[0:4], -CR_G, False)]


def chroma_offsets(parts):
    """What libjpeg adds to Y for R, G and B, from :func:`chroma_partials` (each fits 10 bits
    signed: at most 1.772 * 128 in magnitude)."""
    rh, rl, bh, bl, gbh, gbl, grh, grl = parts
    r_off = (rh + rl + _ONE_HALF) >> SCALEBITS
    b_off = (bh + bl + _ONE_HALF) >> SCALEBITS
    g_off = (gbh + gbl + grh + grl + _ONE_HALF) >> SCALEBITS
    return r_off, g_off, b_off


def ycc_to_rgb(y, cb, cr):
    """(R, G, B) 8-bit values for 8-bit samples ``y``, ``cb``, ``cr`` (combinational)."""
    y = y.as_unsigned()
    return tuple(clamp_u8(y + off) for off in chroma_offsets(chroma_partials(cb, cr)))
