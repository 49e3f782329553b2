"""The decoder core's packet codec: what the host sends and how it reads the answer."""

import numpy as np
import pytest

from dlforge.rtl.jpeg.packets import (DATA_BITS, HeaderLayout, OutputKind, TrailerLayout,
                                      input_beats, input_layout, output_layout, parse_output)
from dlforge.rtl.jpeg.status import JpegStatus


def _beat(kind, data=0, count=0, tag=0, last=0):
    return output_layout().const({"kind": kind, "data": data, "count": count, "tag": tag,
                                  "last": last}).as_value().value


@pytest.mark.parametrize("input_bytes", [1, 4])
def test_input_beats_carry_every_byte_and_the_sideband(input_bytes):
    from amaranth.lib import data
    payload = bytes(range(7))
    layout = input_layout(input_bytes)
    beats = [data.Const(layout, b) for b in input_beats(payload, tag=5, fast=True,
                                                         input_bytes=input_bytes)]
    back = b"".join(int(b.data).to_bytes(input_bytes, "little")[:int(b.keep)] for b in beats)
    assert back == payload
    assert [int(b.last) for b in beats] == [0] * (len(beats) - 1) + [1]
    assert all(int(b.tag) == 5 and int(b.fast) == 1 for b in beats)


def test_parse_output_reassembles_images():
    rgb = np.arange(5 * 3, dtype=np.uint8).reshape(5, 3)
    head = HeaderLayout.const({"width": 5, "height": 1, "components": 3, "h": 2, "v": 2})
    tail = TrailerLayout.const({"status": 0, "cycles": 99, "symbols": 12})
    beats = [_beat(OutputKind.HEADER, head.as_value().value, tag=3),
             _beat(OutputKind.PIXELS, int.from_bytes(rgb[:4].tobytes(), "little"), 4, tag=3),
             _beat(OutputKind.PIXELS, int.from_bytes(rgb[4:].tobytes(), "little"), 1, tag=3),
             _beat(OutputKind.TRAILER, tail.as_value().value, tag=3, last=1),
             _beat(OutputKind.HEADER, 0, tag=4),
             _beat(OutputKind.TRAILER, TrailerLayout.const({"status": 0x21}).as_value().value,
                   tag=4, last=1)]
    first, second = parse_output(beats)
    assert (first.tag, first.width, first.height, first.status, first.cycles, first.symbols) == \
        (3, 5, 1, JpegStatus.OK, 99, 12)
    assert (first.pixels == rgb.reshape(1, 5, 3)).all()
    assert second.tag == 4 and second.status == JpegStatus.TRUNCATED and not second.ok
    assert DATA_BITS >= max(HeaderLayout.size, TrailerLayout.size)


def test_parse_output_rejects_broken_sequences():
    with pytest.raises(ValueError):
        parse_output([_beat(OutputKind.PIXELS)])
    with pytest.raises(ValueError):
        parse_output([_beat(OutputKind.HEADER)])
