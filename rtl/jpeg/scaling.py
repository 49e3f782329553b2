"""libjpeg-turbo's DCT-domain downscale in the core: the scale a file asks for, and each block's
IDCT size.

A scaled decode (1/2, 1/4, 1/8: ``scale_denom`` 2, 4, 8) gives every component a reduced IDCT
(jidctred.c): luma blocks of ``8 / scale`` samples a side, and chroma blocks doubled while the
doubling divides the luma block evenly both ways (jdmaster.c).  For the samplings the core
takes (chroma 1x1, luma 1x1, 2x1, 1x2 or 2x2) that is: 4:2:0's chroma one size up (8x8 at
1/2, so nothing is left to upsample), every other component the luma's size.  The golden
model is ``sim.jpeg_model.component_sizes``.

Sizes travel as log2 (3: 8x8, 2: 4x4, 1: 2x2, 0: 1x1).  ``McuSizesLayout`` describes one
file's MCU for the stages that count blocks (IDCT, raster): which blocks of an MCU are luma,
and each kind's size.
"""

from amaranth import Const, Mux
from amaranth.lib import data

__all__ = ["SCALES", "LOG_SCALES", "McuSizesLayout", "mcu_sizes", "log_sizes", "scaled_extent",
           "SCALE_MAGIC", "scale_word"]

#: The scale denominators a core takes (1: no scaling).
SCALES = (1, 2, 4, 8)
#: ... as log2, the form the core's scale word carries.
LOG_SCALES = (0, 1, 2, 3)

#: A file that asks for a scaled decode begins with one 4-byte word: these three bytes, then
#: log2 of the denominator (0 to 3).  The core checks both: anything else ends the file with
#: ``BAD_SCALE`` and no pixels, and the next file is decoded as usual.
SCALE_MAGIC = b"SCL"


def scale_word(scale):
    """The scale word of a file decoded at 1/``scale``."""
    if scale not in SCALES:
        raise ValueError(f"the scales are 1/{', 1/'.join(map(str, SCALES))}, not 1/{scale}")
    return SCALE_MAGIC + bytes([scale.bit_length() - 1])


McuSizesLayout = data.StructLayout({
    "luma": 2,              # log2 of a luma block's size
    "chroma": 2,            # log2 of a chroma block's size
    "luma_blocks": 3,       # blocks of an MCU that are luma (1, 2 or 4); the rest are chroma
    "blocks": 3,            # blocks of an MCU (1 for grayscale, luma_blocks + 2 for YCbCr)
})


def log_sizes(components, h, v, log_scale):
    """(luma, chroma) log2 IDCT sizes; works on ints (the model) and on Amaranth values."""
    luma = 3 - log_scale
    if isinstance(luma, int):
        doubled = components == 3 and h == 2 and v == 2 and luma < 3
        return luma, luma + 1 if doubled else luma
    doubled = (components == 3) & (h == 2) & (v == 2) & (log_scale != 0)
    return luma[:2], Mux(doubled, luma + 1, luma)[:2]


def mcu_sizes(m, target, frame, log_scale):
    """Drive ``target`` (a McuSizesLayout view) from a FrameLayout view and the log2 scale."""
    gray = frame.components == 1
    luma, chroma = log_sizes(frame.components, frame.h, frame.v, log_scale)
    luma_blocks = Mux(gray, 1, frame.h * frame.v)
    m.d.comb += [target.luma.eq(luma), target.chroma.eq(chroma),
                 target.luma_blocks.eq(luma_blocks),
                 target.blocks.eq(Mux(gray, 1, luma_blocks + 2))]


def scaled_extent(size, log_scale):
    """A width or height after the scale: ceil(size / 2**log_scale) (jdmaster.c's
    ``jdiv_round_up``); ints or Amaranth values."""
    if isinstance(size, int) and isinstance(log_scale, int):
        return -(-size >> log_scale)
    return (size + ((Const(1, 4) << log_scale) - 1)[:3]) >> log_scale
