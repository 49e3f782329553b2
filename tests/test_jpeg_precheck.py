"""The host's header pre-check agrees with the full marker parser (the golden model of the
device's parser) on every verdict it can give without the entropy-coded data."""

import pytest

from dlforge.host.jpeg.precheck import precheck
from dlforge.rtl.jpeg.status import JpegStatus as S
from dlforge.rtl.jpeg.syntax import Marker
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
