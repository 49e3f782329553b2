"""The host's scaled decode (``host/jpeg/scaled_decode.py``): libjpeg-turbo's 1/2, 1/4, 1/8,
equal to Pillow's ``Image.draft`` and to the golden model on real files and tiny ones; the
scale's parsing and sizes; bad data and bad scales refused clearly."""

import io
import os

import numpy as np
import pytest
import skimage
import skimage.data
from PIL import Image

from dlforge.host.jpeg.scaled_decode import parse_scale, scaled_decode, scaled_size
from dlforge.rtl.jpeg.syntax import Marker
from dlforge.sim.models.jpeg_model import decode


def _shipped(name):
    with open(os.path.join(os.path.dirname(skimage.__file__), "data", name), "rb") as f:
        return f.read()


def _jpeg(pixels, **options):
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, "JPEG", **options)
    return buf.getvalue()


@pytest.mark.parametrize("scale", [1, 2, 4, 8])
def test_real_files_equal_pillows_draft(scale):
    for data in (_shipped("rocket.jpg"), _jpeg(skimage.data.astronaut()[:99, :133],
                                               quality=88, subsampling=0)):
        got = scaled_decode(data, scale)
        with Image.open(io.BytesIO(data)) as image:
            if scale > 1:
                image.draft("RGB", (image.width // scale, image.height // scale))
            want = np.asarray(image.convert("RGB"))
        assert got.shape == want.shape
        assert np.array_equal(got, want)


def test_tiny_images_take_the_exact_scale():
    """A 3x2 image at 1/2: another of libjpeg-turbo's M/8 gives the same size, so simplejpeg
    would not say which it used; the golden model gives 1/2 itself."""
    data = _jpeg(skimage.data.astronaut()[200:202, 200:203], quality=90)
    for fast in (False, True):
        got = scaled_decode(data, 2, fast=fast)
        assert got.shape == (1, 2, 3)
        assert np.array_equal(got, decode(data, "fast" if fast else "fancy", scale=2).pixels)


def test_fast_upsampling_and_sizes():
    data = _jpeg(skimage.data.astronaut()[:77, :61], quality=80, subsampling=2)
    for scale in (2, 4):
        got = scaled_decode(data, scale, fast=True)
        assert got.shape[:2] == scaled_size(61, 77, scale)[::-1]
        assert np.array_equal(got, decode(data, "fast", scale=scale).pixels)


def test_parse_scale_and_refusals():
    assert [parse_scale(t) for t in ("1", "1/2", "1/4", "1/8", "4")] == [1, 2, 4, 8, 4]
    for bad in ("1/3", "2/3", "x", "1/16", "0"):
        with pytest.raises(ValueError, match="scale must be 1, 1/2, 1/4 or 1/8"):
            parse_scale(bad)
    with pytest.raises(ValueError, match="scale must be one of"):
        scaled_decode(_shipped("rocket.jpg"), 3)
    with pytest.raises(ValueError, match="libjpeg-turbo"):
        scaled_decode(Marker.SOI.bytes + b" not a jpeg", 2)
