"""The host's estimate of a core's clocks for a file: larger images, denser sampling and more
bytes cost more, and what has no frame header is judged by its size."""

import io

import numpy as np
import skimage.data
from PIL import Image

from dlforge.host.device.jpeg_work import PER_BYTE, PER_PIXEL, PER_SAMPLE, decode_work
from dlforge.rtl.jpeg.syntax import Marker


def _jpeg(pixels, subsampling, quality=85):
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(pixels)).save(buf, "JPEG", quality=quality,
                                                       subsampling=subsampling)
    return buf.getvalue()


def test_the_estimate_follows_pixels_samples_and_bytes():
    photo = skimage.data.astronaut()
    small, large = photo[:128, :192], photo[:256, :384]
    s420, s444 = _jpeg(small, 2), _jpeg(small, 0)
    # exactly the three terms, read from the frame header: 1.5 samples a pixel at 4:2:0
    pixels = 128 * 192
    assert decode_work(s420) == PER_PIXEL * pixels + PER_SAMPLE * 1.5 * pixels \
        + PER_BYTE * len(s420)
    assert decode_work(s444) == PER_PIXEL * pixels + PER_SAMPLE * 3 * pixels \
        + PER_BYTE * len(s444)
    assert decode_work(_jpeg(large, 2)) > 3 * decode_work(s420)
    grey = _jpeg(small[..., 0], 0)
    assert decode_work(grey) == PER_PIXEL * pixels + PER_SAMPLE * pixels + PER_BYTE * len(grey)


def test_no_frame_header_is_judged_by_size():
    assert decode_work(b"not a jpeg at all") == PER_BYTE * 17
    scan_only = Marker.SOI.bytes + Marker.SOS.bytes + b"\x00\x08"
    assert decode_work(scan_only) == PER_BYTE * 6                      # a scan, no SOF
    assert decode_work(b"") == 0
