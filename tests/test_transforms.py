"""torchvision's eval and train pipelines (``host/transforms.py``): the size, rounding and
random-parameter rules against an independent re-implementation of torchvision's (drawing
from torch's global generator, as torchvision does; torchvision itself cannot be installed
beside the CPU torch), and the pixels against Pillow and the resampler's golden model."""

import io
import math

import numpy as np
import pytest
import skimage.data
import torch
from PIL import Image

from dlforge.host.transforms import (center_crop_box, eval_transform, flip_draw,
                                     random_resized_crop_box, resize_size, train_transform)
from dlforge.sim.resample_model import crop_resize, resize


def _reference_params(width, height, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    """torchvision's documented rule, written again here: (top, left, h, w), global RNG."""
    area = width * height
    lo, hi = (math.log(r) for r in ratio)
    lo, hi = float(torch.tensor(lo, dtype=torch.float32)), \
        float(torch.tensor(hi, dtype=torch.float32))
    for _ in range(10):
        target = area * float(torch.empty(1).uniform_(*scale))
        aspect = float(torch.exp(torch.empty(1).uniform_(lo, hi)))
        w, h = round(math.sqrt(target * aspect)), round(math.sqrt(target / aspect))
        if 0 < w <= width and 0 < h <= height:
            top = int(torch.randint(0, height - h + 1, (1,)))
            left = int(torch.randint(0, width - w + 1, (1,)))
            return top, left, h, w
    if width / height < ratio[0]:
        w, h = width, round(width / ratio[0])
    elif width / height > ratio[1]:
        w, h = round(height * ratio[1]), height
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


def test_resize_and_centre_crop_rules():
    assert resize_size(500, 375, 256) == (341, 256)         # int(256 * 500 / 375) = 341
    assert resize_size(375, 500, 256) == (256, 341)
    assert resize_size(300, 300, 256) == (256, 256)
    assert center_crop_box(341, 256, 224) == (58, 16, 282, 240)   # round(58.5) = 58
    assert center_crop_box(256, 341, 224) == (16, 58, 240, 282)
    with pytest.raises(ValueError, match="does not fit"):
        center_crop_box(200, 300, 224)
    with pytest.raises(ValueError, match="positive"):
        resize_size(10, 10, 0)


@pytest.mark.parametrize("size", [(500, 375), (375, 500), (224, 224), (1000, 12), (9, 700),
                                  (31, 29)])
def test_random_resized_crop_draws_as_torchvision(size):
    """The same boxes as torchvision's rule with the global generator seeded alike, the
    fallback for extreme aspects included (1000x12: no try fits)."""
    width, height = size
    for seed in range(40):
        torch.manual_seed(seed)
        top, left, h, w = _reference_params(width, height)
        flip = bool(torch.rand(1) < 0.5)
        g = torch.Generator().manual_seed(seed)
        assert random_resized_crop_box(width, height, g) == (left, top, left + w, top + h)
        assert flip_draw(g) == flip


def _photo(width=500, height=375, subsampling=2):
    big = Image.fromarray(skimage.data.chelsea()).resize((width, height))
    buf = io.BytesIO()
    big.save(buf, "JPEG", quality=90, subsampling=subsampling)
    return np.asarray(Image.open(io.BytesIO(buf.getvalue())).convert("RGB"))


def test_eval_pipeline_pixels():
    for width, height in ((500, 375), (375, 500), (256, 300)):
        pixels = _photo(width, height)
        out = eval_transform(pixels)
        assert out.shape == (224, 224, 3)
        new = resize_size(width, height, 256)
        left, top, right, bottom = center_crop_box(*new, 224)
        assert np.array_equal(out, resize(pixels, new)[top:bottom, left:right])


def test_train_pipeline_pixels_follow_the_draws():
    pixels = _photo()
    for seed in range(12):
        torch.manual_seed(seed)
        top, left, h, w = _reference_params(500, 375)
        flip = bool(torch.rand(1) < 0.5)
        want = crop_resize(pixels, (left, top, left + w, top + h), (224, 224))
        if flip:
            want = want[:, ::-1]
        got = train_transform(pixels, torch.Generator().manual_seed(seed))
        assert got.shape == (224, 224, 3) and np.array_equal(got, want), seed


def test_greyscale_images_come_out_rgb():
    grey = np.asarray(Image.fromarray(skimage.data.camera()).resize((300, 260)))
    out = eval_transform(grey)
    assert out.shape == (224, 224, 3)
    assert np.array_equal(out[..., 0], out[..., 2])
    assert np.array_equal(out[..., 0], eval_transform(grey[..., None])[..., 0])
