"""What the marker parser tells the rest of the decoder core about one image.

``FrameLayout`` is the geometry of the frame, known once its scan header is accepted; the raster
stage (line buffers, upsampling, colour) and the output header are built from it.
``ResultLayout`` is the parser's last word on a file: its status, given after the whole
packet has been consumed.
"""

from amaranth.lib import data

__all__ = ["FrameLayout", "ResultLayout", "mcu_grid"]

FrameLayout = data.StructLayout({
    "width": 16,
    "height": 16,
    "components": 2,        # 1 (grayscale) or 3 (YCbCr)
    "h": 2,                 # luma blocks per MCU across: 1 or 2 (1 for grayscale)
    "v": 2,                 # luma blocks per MCU down: 1 or 2 (1 for grayscale)
    "mcux": 10,             # MCUs across (a grayscale MCU is one block)
    "mcuy": 14,             # MCUs down
})

ResultLayout = data.StructLayout({
    "status": 8,            # a JpegStatus
})


def mcu_grid(width, height, components, h, v):
    """(MCUs across, MCUs down) as T.81 A.2 defines them; the model of FrameLayout's fields."""
    if components == 1:
        return -(-width // 8), -(-height // 8)
    return -(-width // (8 * h)), -(-height // (8 * v))
