"""The host's decode: libjpeg-turbo strictly, Pillow for what it decodes only leniently and
for four-component colour, Pillow's refusal for the rest; each checked against Pillow and
simplejpeg directly."""

import io

import numpy as np
import pytest
import simplejpeg
from PIL import Image

from dlforge.host.jpeg.host_decode import DamagedFile, host_decode, pillow_decode
from dlforge.sim.corpus.jpeg_corpus import damaged_corpus


@pytest.fixture(scope="module")
def files():
    return {f.name: f.data for f in damaged_corpus()}


def test_a_clean_file_is_libjpeg_turbos_and_pillows(files):
    data = files["grey-pillow"]
    pixels, damage = host_decode(data)
    assert damage is None
    assert (pixels == simplejpeg.decode_jpeg(data, colorspace="RGB")).all()
    assert (pixels == np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))).all()


@pytest.mark.parametrize("scale", [2, 4, 8])
def test_pillows_draft_is_libjpeg_turbos_scaled_decode(files, scale):
    data = files["after_eoi-garbage"]
    pixels, _ = host_decode(data, scale)
    assert (pillow_decode(data, scale) == pixels).all()


def test_a_damaged_file_by_policy(files):
    data = files["corrupt_scan-early-eoi"]
    with pytest.raises(ValueError):
        simplejpeg.decode_jpeg(data, colorspace="RGB")
    pixels, damage = host_decode(data)
    assert damage == "corrupt data tolerated: premature end of data segment"
    assert (pixels == np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))).all()
    _, fast = host_decode(data, fast=True)
    assert fast.endswith("(Pillow's decode: fancy upsampling)")
    with pytest.raises(DamagedFile) as refused:
        host_decode(data, on_damage="error")
    assert refused.value.damage == "corrupt data: premature end of data segment"
    with pytest.raises(ValueError, match="on_damage"):
        host_decode(data, on_damage="skip")


def test_four_components_take_pillows_colour(files):
    data = files["cmyk-adobe"]
    pixels, damage = host_decode(data, pillow_colour=True)
    assert damage is None
    assert (pixels == np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))).all()
    assert not (pixels == simplejpeg.decode_jpeg(data, colorspace="RGB")).all()


def test_what_pillow_refuses_is_refused_with_both_reasons(files):
    with pytest.raises(ValueError, match="libjpeg-turbo: Premature end.*; Pillow: "):
        host_decode(files["truncated-half"])
    png = io.BytesIO()
    Image.new("RGB", (4, 4)).save(png, "PNG")
    with pytest.raises(ValueError, match="not a JPEG file"):
        pillow_decode(png.getvalue())
