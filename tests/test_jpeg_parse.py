"""Marker parsing: what is accepted, and the status each kind of bad or unsupported file gets."""


import pytest
from PIL import Image
import io

from dlforge.rtl.jpeg.status import JpegStatus as S
from dlforge.rtl.jpeg.syntax import Marker, segment_bytes, walk_segments
from dlforge.sim.models.jpeg_parse import JpegDecodeError, parse_headers
from jpeg_files import encode, photo


def offset_of(data, marker):
    return next(p for m, p, _ in walk_segments(data) if m == marker)


def status_of(data, **limits):
    with pytest.raises(JpegDecodeError) as info:
        parse_headers(data, **limits)
    return info.value.status


@pytest.fixture(scope="module")
def baseline():
    return encode(photo("astronaut")[:40, :56], quality=85, subsampling=2)


def test_headers_of_a_baseline_file(baseline):
    h = parse_headers(baseline)
    assert (h.width, h.height, h.sof, h.colorspace) == (56, 40, Marker.SOF0, "ycbcr")
    assert [(c.h, c.v) for c in h.components] == [(2, 2), (1, 1), (1, 1)]
    assert h.restart_interval == 0 and set(h.dc_tables) == {0, 1}


def test_restart_interval_and_fill_bytes(baseline):
    data = encode(photo("astronaut")[:40, :56], quality=85, restart_marker_blocks=3)
    assert parse_headers(data).restart_interval > 0
    sof = offset_of(baseline, Marker.SOF0)
    padded = baseline[:sof] + b"\xff\xff\xff" + baseline[sof:]     # fill bytes before a marker
    assert parse_headers(padded).width == 56


def edit(data, offset, new):
    return data[:offset] + new + data[offset + len(new):]


def test_unsupported_kinds(baseline):
    sof = offset_of(baseline, Marker.SOF0)
    assert status_of(edit(baseline, sof + 1, bytes([Marker.SOF2]))) == S.UNSUPPORTED_PROGRESSIVE
    assert status_of(edit(baseline, sof + 1, bytes([Marker.SOF3]))) == S.UNSUPPORTED_LOSSLESS
    assert status_of(edit(baseline, sof + 1, bytes([Marker.SOF9]))) == S.UNSUPPORTED_ARITHMETIC
    assert status_of(edit(baseline, sof + 1, bytes([Marker.SOF5]))) == S.UNSUPPORTED_HIERARCHICAL
    assert status_of(edit(baseline, sof + 4, b"\x0c")) == S.UNSUPPORTED_PRECISION
    assert status_of(edit(baseline, sof + 5, b"\x00\x00")) == S.UNSUPPORTED_DNL
    assert status_of(edit(baseline, sof + 11, b"\x41")) == S.UNSUPPORTED_SAMPLING   # luma 4x1
    assert status_of(edit(baseline, sof + 14, b"\x21")) == S.UNSUPPORTED_SAMPLING   # chroma 2x1
    assert status_of(baseline, max_width=55) == S.TOO_LARGE
    assert status_of(baseline, max_height=39) == S.TOO_LARGE
    cmyk = io.BytesIO()
    Image.fromarray(photo("astronaut")[:16, :16]).convert("CMYK").save(cmyk, "JPEG")
    assert status_of(cmyk.getvalue()) == S.UNSUPPORTED_COMPONENTS
    jfif_end = offset_of(baseline, Marker.APP0) + 2 + int.from_bytes(baseline[4:6], "big")
    no_jfif = baseline[:2] + baseline[jfif_end:]
    adobe = segment_bytes(Marker.APP14, b"Adobe\x00\x64\x00\x00\x00\x00\x00")   # transform 0
    adobe_rgb = no_jfif[:2] + adobe + no_jfif[2:]
    assert status_of(adobe_rgb) == S.UNSUPPORTED_COLORSPACE
    assert parse_headers(no_jfif).colorspace == "ycbcr"      # ids 1, 2, 3: YCbCr by default


def test_malformed_kinds(baseline):
    assert status_of(b"\x00" + baseline[1:]) == S.NO_SOI
    assert status_of(baseline[:1]) == S.NO_SOI
    assert status_of(baseline[:3]) == S.TRUNCATED
    dqt = offset_of(baseline, Marker.DQT)
    assert status_of(edit(baseline, dqt + 2, b"\x00\x01")) == S.BAD_MARKER_LENGTH
    assert status_of(edit(baseline, dqt + 2, b"\xff\xff")) == S.TRUNCATED     # past the end
    assert status_of(edit(baseline, dqt + 4, b"\x25")) == S.BAD_TABLE          # precision 2
    sof = offset_of(baseline, Marker.SOF0)
    assert status_of(edit(baseline, sof + 7, b"\x00\x00")) == S.BAD_FRAME_HEADER   # width 0
    dht = offset_of(baseline, Marker.DHT)
    assert status_of(edit(baseline, dht + 5, b"\xff")) == S.BAD_TABLE        # 255 one-bit codes
    no_dht = baseline
    while True:
        try:
            p = offset_of(no_dht, Marker.DHT)
        except StopIteration:
            break
        no_dht = no_dht[:p] + no_dht[p + 2 + int.from_bytes(no_dht[p + 2:p + 4], "big"):]
    assert status_of(no_dht) == S.MISSING_HUFFMAN_TABLE
    p = offset_of(baseline, Marker.DQT)
    no_dqt = baseline[:p] + baseline[p + 2 + int.from_bytes(baseline[p + 2:p + 4], "big"):]
    while any(m == Marker.DQT for m, _, _ in walk_segments(no_dqt)):
        p = offset_of(no_dqt, Marker.DQT)
        no_dqt = no_dqt[:p] + no_dqt[p + 2 + int.from_bytes(no_dqt[p + 2:p + 4], "big"):]
    assert status_of(no_dqt) == S.MISSING_QUANT_TABLE
    sos = offset_of(baseline, Marker.SOS)
    sos_len = int.from_bytes(baseline[sos + 2:sos + 4], "big")
    luma_only = (baseline[:sos]
                 + segment_bytes(Marker.SOS, b"\x01" + baseline[sos + 5:sos + 7] + b"\x00\x3f\x00")
                 + baseline[sos + 2 + sos_len:])
    assert status_of(luma_only) == S.UNSUPPORTED_MULTISCAN        # a scan of 1 of 3 components
    assert status_of(edit(baseline, sos + 4, b"\x01")) == S.BAD_SCAN_HEADER   # count vs length
    assert status_of(baseline[:sos] + Marker.EOI.bytes + baseline[sos:]) == S.UNEXPECTED_MARKER


def test_status_codes_are_stable():
    assert S.OK == 0 and S.UNSUPPORTED_PROGRESSIVE == 0x10 and S.NO_SOI == 0x20
    assert S.UNSUPPORTED_DNL.unsupported and not S.UNSUPPORTED_DNL.malformed
    assert S.TRUNCATED.malformed and not S.OK.unsupported
    assert len({int(s) for s in S}) == len(S)


def test_layout_agrees_with_the_independent_marker_walker():
    """Headers.layout (what benches group files by) against sim/corpus's own reading of the
    same bytes, on every layout of the quick corpus."""
    from dlforge.sim.corpus import jpeg_corpus
    seen = set()
    for f in jpeg_corpus.baseline_corpus("quick"):
        want = f.features.get("layout")
        if want in ("gray", "4:4:4", "4:2:2", "4:4:0", "4:2:0"):
            assert parse_headers(f.data).layout == want.replace(":", ""), f.name
            seen.add(want)
    assert len(seen) == 5
