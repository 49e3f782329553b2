"""Small JPEG files written by Pillow from scikit-image's photos, for the model's unit tests."""

import io

import numpy as np
import skimage.data
from PIL import Image

__all__ = ["photo", "encode"]

_PHOTOS = {}


def photo(name="astronaut"):
    if name not in _PHOTOS:
        _PHOTOS[name] = np.ascontiguousarray(getattr(skimage.data, name)())
    return _PHOTOS[name]


def encode(pixels, **options):
    """Pillow's JPEG encoder (libjpeg-turbo) with ``options`` (quality, subsampling, ...)."""
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, "JPEG", **options)
    return buf.getvalue()


# ---- Huffman tables with more than 16 codes of one length ------------------------------------
# The decoder's fast tables hold at most 16 codes per length; longer lengths take the slow
# path.  Real encoders put those only at 16 bits; these tables make them common.

def huffman_table(counts, symbols):
    counts = [counts.get(length, 0) for length in range(1, 17)]
    assert sum(counts) == len(symbols)
    return counts, list(symbols)


_AC_SYMBOLS = [0x00, 0x01, 0x02, 0x11, 0xF0] + [(r << 4) | s for r in range(16) for s in range(1, 11)
                                                  if (r << 4) | s not in (0x01, 0x02, 0x11)]
WIDE_TABLES = {   # (class, id): (counts, symbols)
    (0, 0): huffman_table({6: 24}, list(range(12)) * 2),               # 24 codes of 6 bits
    (1, 0): huffman_table({3: 4, 8: 40, 10: 60, 12: 58}, _AC_SYMBOLS),  # 40, 60, 58 codes: slow
    (0, 1): huffman_table({3: 4, 4: 6, 5: 2}, list(range(12))),
    (1, 1): huffman_table({3: 2, 5: 8, 7: 20, 9: 60, 11: 72}, _AC_SYMBOLS),
}
