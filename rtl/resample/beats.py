"""The beat every resampler stage passes on: up to ``lanes`` adjacent pixels of one row,
lowest lanes first.  ``LANES`` (4) is the decoder core's raster beat, so a resampler of 4
lanes takes a raster beat a clock; 1 or 2 lanes cost a quarter or half the multipliers
(an ECP5 build).

``count`` pixels are real (1 to ``lanes``); ``last`` marks the beat that ends a row.  A beat
never holds pixels of two rows.
"""

from amaranth import unsigned
from amaranth.lib import data

__all__ = ["LANES", "LANE_CHOICES", "check_lanes", "beat_layout", "pack_beat", "unpack_beat",
           "row_beats"]

LANES = 4


#: The lane counts a resampler may have (powers of two: its line buffers are banked by them).
LANE_CHOICES = (1, 2, 4)


def check_lanes(lanes):
    if lanes not in LANE_CHOICES:
        raise ValueError(f"lanes must be one of {LANE_CHOICES}, not {lanes!r}")
    return lanes


def beat_layout(channels=3, lanes=LANES):
    return data.StructLayout({
        "pixels": data.ArrayLayout(unsigned(8 * channels), lanes),
        "count": unsigned(lanes.bit_length()),
        "last": 1,
    })


def pack_beat(pixels, last, channels=3, lanes=LANES):
    """The integer of one beat (for simulators): ``pixels`` a list of packed pixel ints."""
    bits = 8 * channels
    value = 0
    for k, p in enumerate(pixels):
        value |= int(p) << (bits * k)
    value |= len(pixels) << (bits * lanes)
    return value | int(last) << (bits * lanes + lanes.bit_length())


def unpack_beat(value, channels=3, lanes=LANES):
    """(pixel ints, last) of a beat's integer."""
    bits = 8 * channels
    count = (value >> (bits * lanes)) & ((1 << lanes.bit_length()) - 1)
    last = (value >> (bits * lanes + lanes.bit_length())) & 1
    return [(value >> (bits * k)) & ((1 << bits) - 1) for k in range(count)], bool(last)


def row_beats(image, rng=None, lanes=LANES):
    """An (H, W, C) uint8 image as (pixel ints, last) beats: rows cut into runs of
    ``lanes`` (the raster's way), or of random lengths 1 to ``lanes`` with ``rng``."""
    import numpy as np
    image = np.asarray(image)
    packed = np.zeros(image.shape[:2], np.int64)
    for c in range(image.shape[2]):
        packed |= image[..., c].astype(np.int64) << (8 * c)
    beats = []
    for row in packed:
        x = 0
        while x < len(row):
            n = lanes if rng is None else int(rng.integers(1, lanes + 1))
            run = [int(v) for v in row[x:x + n]]
            x += len(run)
            beats.append((run, x == len(row)))
    return beats
