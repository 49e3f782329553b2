"""The host's header pre-check agrees with the full marker parser (the golden model of the
device's parser) on every verdict it can give without the entropy-coded data."""

import pytest

from dlforge.host.jpeg.precheck import drop_extraneous_bytes, precheck
from dlforge.rtl.jpeg.status import JpegStatus as S
from dlforge.rtl.jpeg.syntax import Marker, walk_segments
from dlforge.sim.corpus import jpeg_corpus, photos
from dlforge.sim.models.jpeg_parse import JpegDecodeError, parse_headers

# Found only in or after the scan: the pre-check passes these files to the device.
AFTER_SOS = {S.UNSUPPORTED_MULTISCAN, S.BAD_SCAN_HEADER, S.MISSING_HUFFMAN_TABLE,
             S.MISSING_QUANT_TABLE, S.BAD_TABLE}


def _corpus():
    return (jpeg_corpus.baseline_corpus("quick") + jpeg_corpus.unsupported_corpus()
            + jpeg_corpus.malformed_corpus())


@pytest.mark.parametrize("f", _corpus(), ids=lambda f: f.name)
def test_agrees_with_the_marker_parser(f):
    got, width, height = precheck(f.data)
    try:
        h = parse_headers(f.data)
    except JpegDecodeError as exc:
        want = exc.status
    else:
        assert got == S.OK and (width, height) == (h.width, h.height)
        return
    if got == S.OK:
        # Passed on: the device finds it.  Allowed only for what needs more than the headers
        # walked here (tables are checked by the device, not by the host).
        assert want in AFTER_SOS or want.malformed, (want, f.name)
    elif want.unsupported:
        assert got == want, (got, want)
    else:
        assert got.malformed, (got, want)


def test_limits_and_garbage():
    data = photos.shipped_jpegs()[0][1]
    status, width, height = precheck(data)
    assert status == S.OK and width > 0
    assert precheck(data, max_width=width - 1)[0] == S.TOO_LARGE
    assert precheck(b"")[0] == S.NO_SOI
    assert precheck(Marker.SOI.bytes + b"\xff")[0] == S.TRUNCATED
    assert precheck(data[:200])[0] == S.TRUNCATED


def test_extraneous_bytes_are_dropped_as_libjpeg_skips_them():
    """Junk put between a real file's header segments comes out again, giving back the file
    as it was; what Pillow would not open (junk right after SOI) and other damage are not
    repaired."""
    data = jpeg_corpus.photo_corpus()[0].data
    starts = [o for m, o, _ in walk_segments(data)]
    damaged = (data[:starts[1]] + b"\x00\x11" + data[starts[1]:starts[3]]
               + b"\xff\x00\x22" + data[starts[3]:])
    assert precheck(damaged)[0] == S.UNEXPECTED_MARKER
    repaired, what = drop_extraneous_bytes(damaged)
    assert repaired == data and precheck(repaired)[0] == S.OK
    assert what == (f"2 extraneous bytes before marker 0x{data[starts[1] + 1]:02X}; "
                    f"3 extraneous bytes before marker 0x{data[starts[3] + 1]:02X}")
    assert drop_extraneous_bytes(data) is None
    assert drop_extraneous_bytes(data[:2] + b"\x00" + data[2:]) is None
    assert drop_extraneous_bytes(damaged[:starts[3] + 5]) is None        # cut, too
