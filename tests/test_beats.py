"""The resampler's beats (``rtl/resample/beats.py``): packing for simulators, and images cut
into rows of beats."""

import numpy as np
import pytest

from dlforge.rtl.resample.beats import (LANE_CHOICES, LANES, beat_layout, check_lanes,
                                        pack_beat, row_beats, unpack_beat)


@pytest.mark.parametrize("lanes", LANE_CHOICES)
def test_pack_matches_the_layout(lanes):
    layout = beat_layout(3, lanes)
    pixels = [0x010203, 0x0A0B0C, 0x111213, 0x212223][:lanes]
    value = pack_beat(pixels, last=True, lanes=lanes)
    assert unpack_beat(value, lanes=lanes) == (pixels, True)
    assert value < 1 << layout.size
    count, last = layout["count"], layout["last"]
    assert (value >> count.offset) & ((1 << count.shape.width) - 1) == lanes
    assert (value >> last.offset) & 1 == 1
    with pytest.raises(ValueError, match="lanes must be one of"):
        check_lanes(3)


def test_rows_never_share_a_beat():
    image = np.arange(7 * 10 * 3, dtype=np.uint8).reshape(7, 10, 3)
    for rng in (None, np.random.default_rng(3)):
        beats = row_beats(image, rng)
        assert all(1 <= len(run) <= LANES for run, _ in beats)
        assert sum(last for _, last in beats) == 7
        flat = [p for run, _ in beats for p in run]
        assert flat[11] == int(image[1, 1, 0]) | int(image[1, 1, 1]) << 8 | \
            int(image[1, 1, 2]) << 16
        if rng is None:
            assert [len(run) for run, _ in beats[:3]] == [4, 4, 2]
