"""The resampler's beats (``rtl/resample/beats.py``): packing for simulators, and images cut
into rows of beats."""

import numpy as np

from dlforge.rtl.resample.beats import LANES, beat_layout, pack_beat, row_beats, unpack_beat


def test_pack_matches_the_layout():
    layout = beat_layout(3)
    value = pack_beat([0x010203, 0x0A0B0C], last=True)
    view = layout.const(value) if hasattr(layout, "const") else None
    assert unpack_beat(value) == ([0x010203, 0x0A0B0C], True)
    assert value < 1 << layout.size
    assert view.count.as_value().value == 2 if view is not None else True


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
