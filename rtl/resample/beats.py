"""The beat every resampler stage passes on: up to ``LANES`` adjacent pixels of one row,
lowest lanes first, as the decoder core's raster stage makes them, so that the resampler
takes a raster beat a clock.

``count`` pixels are real (1 to ``LANES``); ``last`` marks the beat that ends a row.  A beat
never holds pixels of two rows.
"""

from amaranth import unsigned
from amaranth.lib import data

__all__ = ["LANES", "beat_layout", "pack_beat", "unpack_beat", "row_beats"]

LANES = 4


def beat_layout(channels=3):
    return data.StructLayout({
        "pixels": data.ArrayLayout(unsigned(8 * channels), LANES),
        "count": unsigned((LANES).bit_length()),
        "last": 1,
    })


def pack_beat(pixels, last, channels=3):
    """The integer of one beat (for simulators): ``pixels`` a list of packed pixel ints."""
    bits = 8 * channels
    value = 0
    for k, p in enumerate(pixels):
        value |= int(p) << (bits * k)
    value |= len(pixels) << (bits * LANES)
    return value | int(last) << (bits * LANES + LANES.bit_length())


def unpack_beat(value, channels=3):
    """(pixel ints, last) of a beat's integer."""
    bits = 8 * channels
    count = (value >> (bits * LANES)) & ((1 << LANES.bit_length()) - 1)
    last = (value >> (bits * LANES + LANES.bit_length())) & 1
    return [(value >> (bits * k)) & ((1 << bits) - 1) for k in range(count)], bool(last)


def row_beats(image, rng=None):
    """An (H, W, C) uint8 image as (pixel ints, last) beats: rows cut into runs of
    ``LANES`` (the raster's way), or of random lengths 1 to ``LANES`` with ``rng``."""
    import numpy as np
    image = np.asarray(image)
    packed = np.zeros(image.shape[:2], np.int64)
    for c in range(image.shape[2]):
        packed |= image[..., c].astype(np.int64) << (8 * c)
    beats = []
    for row in packed:
        x = 0
        while x < len(row):
            n = LANES if rng is None else int(rng.integers(1, LANES + 1))
            run = [int(v) for v in row[x:x + n]]
            x += len(run)
            beats.append((run, x == len(row)))
    return beats
