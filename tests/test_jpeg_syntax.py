"""The one home of JPEG syntax (rtl/jpeg/syntax.py): the marker codes are T.81's, and the
segment walk agrees with the corpus's independent walker and fails with the decoder's
statuses."""

import pytest

from dlforge.rtl.jpeg.status import JpegDecodeError, JpegStatus as S
from dlforge.rtl.jpeg.syntax import (FRAME_TYPE_STATUS, LUMA_LAYOUTS, Marker as M, has_length,
                                     is_rst, is_sof, segment_body, segment_bytes,
                                     walk_segments)
from dlforge.sim.corpus import jpeg_corpus, jpeg_markers
from dlforge.sim.corpus.jpeg_fuzz import fuzz_corpus


def test_codes_are_t81s():
    """Table B.1, written out here once more on purpose: the values a reader expects."""
    assert (M.SOI, M.EOI, M.SOS, M.DQT, M.DHT, M.DRI, M.COM) == (
        0xD8, 0xD9, 0xDA, 0xDB, 0xC4, 0xDD, 0xFE)
    assert (M.SOF0, M.SOF2, M.SOF15, M.JPG, M.DAC, M.DNL, M.DHP, M.EXP, M.TEM) == (
        0xC0, 0xC2, 0xCF, 0xC8, 0xCC, 0xDC, 0xDE, 0xDF, 0x01)
    assert [M[f"RST{k}"] for k in range(8)] == list(range(0xD0, 0xD8))
    assert [M[f"APP{k}"] for k in range(16)] == list(range(0xE0, 0xF0))
    assert M.SOI.bytes == b"\xff\xd8" and M.EOI.bytes == b"\xff\xd9"


def test_kinds_of_marker():
    assert {c for c in range(256) if is_sof(c)} == jpeg_markers.SOF_MARKERS   # independent
    assert {c for c in range(256) if is_rst(c)} == set(range(M.RST0, M.RST7 + 1))
    assert {c for c in range(256) if not has_length(c)} == {
        M.SOI, M.EOI, M.TEM, *range(M.RST0, M.RST7 + 1)}
    # Every frame-range code but the two sequential frames, DHT and DAC has a status.
    assert set(FRAME_TYPE_STATUS) == set(range(M.SOF0, M.SOF15 + 1)) - {
        M.SOF0, M.SOF1, M.DHT, M.DAC}
    assert all(FRAME_TYPE_STATUS[c].unsupported for c in FRAME_TYPE_STATUS)
    assert set(LUMA_LAYOUTS) == {(1, 1), (2, 1), (1, 2), (2, 2)}


def _independent_header_walk(data):
    """jpeg_markers' segments from after SOI to the first SOS, or None where it fails."""
    out = []
    try:
        for marker, offset, length in jpeg_markers.segments(data):
            if offset:
                out.append((marker, offset, length))
            if marker == M.SOS:
                return out
    except jpeg_markers.JpegSyntaxError:
        return None
    return None


def test_the_walk_agrees_with_the_independent_walker():
    files = (jpeg_corpus.baseline_corpus("quick") + jpeg_corpus.unsupported_corpus()
             + jpeg_corpus.malformed_corpus() + fuzz_corpus(120, seed=7))
    compared = 0
    for f in files:
        want = _independent_header_walk(f.data)
        try:
            got = list(walk_segments(f.data))
        except JpegDecodeError:
            got = None
        if want is not None and got is not None:
            assert got == want, f.name
            compared += 1
    assert compared > len(files) // 2


def test_fill_bytes_stop_skip_and_bodies():
    com = segment_bytes(M.COM, b"hello")
    assert segment_body(com, 0, 7) == b"hello" and com[:4] == M.COM.bytes + b"\x00\x07"
    sos = segment_bytes(M.SOS, b"\x01\x01\x00\x00\x3f\x00")
    data = M.SOI.bytes + b"\xff\xff" + com + sos + b"\x12\x34" + M.EOI.bytes
    assert list(walk_segments(data)) == [(M.COM, 4, 7), (M.SOS, 13, 8)]    # the last FF
    assert list(walk_segments(data, skip={M.COM})) == [(M.SOS, 13, 8)]
    with pytest.raises(ValueError):
        list(walk_segments(data, skip={M.SOS}))
    # After a scan: the walk starts where told, stop markers come before any length.
    after = len(data) - 2
    assert list(walk_segments(data, after, stop={M.EOI})) == [(M.EOI, after, 0)]
    tail = com + M.SOS.bytes
    assert list(walk_segments(tail, 0, stop={M.SOS})) == [(M.COM, 0, 7), (M.SOS, 9, 0)]
    # Without a stop, a marker with no length is given with length 0 and the walk goes on.
    assert list(walk_segments(M.SOI.bytes + M.RST2.bytes + sos)) == [(M.RST2, 2, 0),
                                                                    (M.SOS, 4, 8)]


@pytest.mark.parametrize("data, status, offset", [
    (b"", S.NO_SOI, 0),
    (M.EOI.bytes, S.NO_SOI, 0),
    (M.SOI.bytes, S.TRUNCATED, 2),
    (M.SOI.bytes + b"\xff\xff", S.TRUNCATED, 4),                    # inside a marker
    (M.SOI.bytes + b"\x00", S.UNEXPECTED_MARKER, 2),
    (M.SOI.bytes + M.COM.bytes + b"\x00", S.TRUNCATED, 4),          # its length missing
    (M.SOI.bytes + M.COM.bytes + b"\x00\x01", S.BAD_MARKER_LENGTH, 4),
    (M.SOI.bytes + M.COM.bytes + b"\x00\x05ab", S.TRUNCATED, 4),    # past the end
])
def test_broken_structure_gets_the_decoders_status(data, status, offset):
    with pytest.raises(JpegDecodeError) as info:
        list(walk_segments(data))
    assert (info.value.status, info.value.offset) == (status, offset)


def test_extraneous_bytes_skipped_as_libjpeg_skips_them():
    """With ``extraneous``, junk before a marker (bytes other than FF, FF 00 pairs) is
    stepped over and reported with libjpeg's count and the marker it stands before; without
    it, the same file fails as the decoder fails."""
    data = jpeg_corpus.photo_corpus()[0].data
    dqt = next(o for m, o, _ in walk_segments(data) if m == M.DQT)
    damaged = data[:dqt] + b"\x01\xff\x00\xff\xff\x00\x02" + data[dqt:]
    with pytest.raises(JpegDecodeError) as strict:
        list(walk_segments(damaged))
    assert strict.value.status == S.UNEXPECTED_MARKER
    found = []
    walked = [m for m, _, _ in walk_segments(damaged, extraneous=found)]
    assert walked == [m for m, _, _ in walk_segments(data)]
    assert found == [(dqt, dqt + 7, 6, M.DQT)]      # 01, FF 00, FF FF 00 (two each), 02
    assert list(walk_segments(data, extraneous=found)) == list(walk_segments(data))
    with pytest.raises(JpegDecodeError) as cut:
        list(walk_segments(data[:dqt] + b"\x01\x02", extraneous=[]))
    assert cut.value.status == S.TRUNCATED
