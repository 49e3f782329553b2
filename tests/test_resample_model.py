"""The resampler's golden model (``sim/models/resample_model.py``) is bit-exact to Pillow's
``Image.resize`` (the outside reference): up and down, one axis or both, either pass order,
RGB and greyscale, bilinear and bicubic, crop then resize on decoded photos."""

import io

import numpy as np
import PIL
import pytest
import skimage.data
from PIL import Image

from dlforge.sim.models.resample_model import (PRECISION_BITS, coefficients, crop_resize, resize,
                                               vertical_first)

FILTERS = {"BILINEAR": Image.Resampling.BILINEAR, "BICUBIC": Image.Resampling.BICUBIC}


def _pillow(image, size, filter="BILINEAR"):
    return np.asarray(Image.fromarray(np.ascontiguousarray(image)).resize(size,
                                                                         FILTERS[filter]))


@pytest.mark.parametrize("filter", sorted(FILTERS))
def test_random_sizes_match_pillow(filter):
    rng = np.random.default_rng(7)
    photo = skimage.data.astronaut()
    for k in range(150):
        h, w = int(rng.integers(1, 260)), int(rng.integers(1, 260))
        y, x = int(rng.integers(0, 512 - h)), int(rng.integers(0, 512 - w))
        image = photo[y:y + h, x:x + w]
        if k % 2:
            image = image[..., k % 3]                  # greyscale ("L")
        out = (int(rng.integers(1, 330)), int(rng.integers(1, 330)))
        if k % 7 == 0:
            out = (w, out[1])                          # one axis only
        elif k % 7 == 1:
            out = (out[0], h)
        want = _pillow(image, out, filter)
        got = resize(image, out, filter=filter)
        assert got.shape == want.shape and np.array_equal(got, want), (image.shape, out)


@pytest.mark.skipif(int(PIL.__version__.split(".")[0]) < 13, reason="Pillow 13's pass order")
def test_both_pass_orders_are_exercised_and_matter():
    """The rule that picks the order is what makes the pixels equal: with the other order,
    the 8-bit intermediate rounds differently."""
    image = np.random.default_rng(3).integers(0, 256, (300, 100, 3), dtype=np.uint8)
    for size, vfirst in (((50, 150), True), ((50, 250), False)):
        assert vertical_first((0, 0, 100, 300), size) == vfirst
        assert np.array_equal(resize(image, size), _pillow(image, size))
    # horizontal first (Pillow 12's order) gives other pixels where Pillow 13 goes vertical
    assert not np.array_equal(resize(image, (50, 150), pillow=12), _pillow(image, (50, 150)))
    # (300 -> 149 rows shrink by 151, more than twice the 50 columns lost: vertical first)
    assert vertical_first((0, 0, 100, 300), (50, 149), pillow=13)
    assert not vertical_first((0, 0, 100, 300), (50, 200), pillow=13)
    assert not vertical_first((0, 0, 100, 300), (50, 149), pillow=12)   # (always horizontal)


def test_coefficients_sum_to_one_in_fixed_point():
    for n_in, n_out in ((500, 224), (375, 256), (224, 500), (7, 3), (1, 9)):
        c = coefficients(n_in, n_out)
        total = c.weights.sum(axis=1)
        assert np.all(np.abs(total - (1 << PRECISION_BITS)) <= c.taps)
        assert np.all(c.first >= 0) and np.all(c.first + c.count <= n_in)


def _jpeg(array, **options):
    buf = io.BytesIO()
    Image.fromarray(array).save(buf, "JPEG", **options)
    return buf.getvalue()


def test_crop_then_resize_of_decoded_photos_matches_pillow():
    """torchvision's PIL path: decode, ``crop(box)``, ``resize(size, BILINEAR)``; here an
    ImageNet-size photo (500x375, 4:2:0, quality 90) through ``Resize(256)`` then
    ``CenterCrop(224)``'s box, and random crops."""
    photo = np.asarray(Image.fromarray(skimage.data.chelsea()).resize((500, 375)))
    data = _jpeg(photo, quality=90, subsampling=2)
    decoded = Image.open(io.BytesIO(data)).convert("RGB")
    pixels = np.asarray(decoded)
    # Resize(256): the shorter side to 256 (375 -> 256, 500 -> int(256 * 500 / 375) = 341)
    resized = resize(pixels, (341, 256))
    assert np.array_equal(resized, np.asarray(decoded.resize((341, 256), Image.BILINEAR)))
    # CenterCrop(224) of 341x256: left round((341 - 224) / 2) = 58, top 16
    box = (58, 16, 58 + 224, 16 + 224)
    assert np.array_equal(resized[16:240, 58:282],
                          np.asarray(Image.fromarray(resized).crop(box)))
    rng = np.random.default_rng(11)
    for _ in range(20):
        w, h = int(rng.integers(8, 500)), int(rng.integers(8, 375))
        x, y = int(rng.integers(0, 500 - w + 1)), int(rng.integers(0, 375 - h + 1))
        box = (x, y, x + w, y + h)
        want = np.asarray(decoded.crop(box).resize((224, 224), Image.BILINEAR))
        assert np.array_equal(crop_resize(pixels, box, (224, 224)), want), box


def test_bad_parameters_are_refused():
    image = np.zeros((10, 12, 3), np.uint8)
    with pytest.raises(ValueError, match="not inside"):
        crop_resize(image, (0, 0, 13, 10), (4, 4))
    with pytest.raises(ValueError, match="not inside"):
        crop_resize(image, (5, 0, 5, 10), (4, 4))
    with pytest.raises(ValueError, match="positive"):
        resize(image, (0, 4))
    with pytest.raises(ValueError, match="8-bit"):
        resize(image.astype(np.uint16), (4, 4))
