"""torchvision's eval and train pipelines (``host/jpeg/transforms.py``): the size, rounding and
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

from dlforge.host.jpeg import transforms
from dlforge.host.jpeg.transforms import (center_crop_box, eval_transform, flip_draw,
                                          random_resized_crop_box, resize_size, torch_words,
                                          train_draws, train_request, train_transform)
from dlforge.sim.models.resample_model import crop_resize, resize


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


def test_torch_words_are_the_generators_stream():
    """torch's CPU generator, seeded alike (63-bit seeds included: only the low 32 bits
    seed it), draws one of these words for each ``uniform_``, ``rand`` and ``randint`` (of
    a range up to a JPEG's sides; torch 2.13 takes two words for one of 2**28 or more)."""
    for seed in (0, 1, 5489, 2**32 - 1, 2**32 + 3, 2**62 + 12345, 2**63 - 1):
        words = torch_words(seed, 40)
        g = torch.Generator().manual_seed(seed)
        assert torch.randint(0, 1 << 24, (10,), generator=g).tolist() == \
            [w & 0xFFFFFF for w in words[:10]]
        assert [int(torch.randint(0, n, (1,), generator=g)) for n in (7, 500, 65536)] == \
            [words[10] % 7, words[11] % 500, words[12] % 65536]
        assert float(torch.rand(1, generator=g)) == (words[13] & 0xFFFFFF) / 2**24


_SIZES = [(500, 375), (375, 500), (224, 224), (1000, 12), (9, 700), (31, 29), (1, 1),
          (2, 3), (4000, 3000), (640, 427), (333, 500)]


def _torch_draws(width, height, seed):
    g = torch.Generator().manual_seed(seed)
    return random_resized_crop_box(width, height, g), flip_draw(g)


def test_draws_from_a_seed_equal_the_generators(monkeypatch):
    """``train_draws``: the box and the flip of a fresh generator's ``get_params`` and
    ``flip_draw``, on 8000 seeds of many sizes (random ones too, the fallback's extremes
    included); the few too close to a rounding boundary to call are drawn with torch."""
    rng = np.random.default_rng(7)
    torch_made = []
    real = transforms.random_resized_crop_box

    def counted(*args, **kwargs):
        torch_made.append(args[:2])
        return real(*args, **kwargs)
    monkeypatch.setattr(transforms, "random_resized_crop_box", counted)
    for k in range(8000):
        seed = int(rng.integers(0, 2**63))
        width, height = _SIZES[k % len(_SIZES)] if k % 4 else \
            (int(rng.integers(1, 3000)), int(rng.integers(1, 3000)))
        assert train_draws(width, height, seed) == _torch_draws(width, height, seed), \
            (width, height, seed)
    assert 0 < len(torch_made) < 80                     # (some 3 in a thousand)


def test_draws_too_close_to_call_are_torchs(monkeypatch):
    """With a margin too wide to call any draw, every one is torch's own."""
    monkeypatch.setattr(transforms, "_MARGIN", 0.5)
    for seed in range(50):
        assert train_draws(500, 375, seed) == _torch_draws(500, 375, seed)
    assert train_draws(70000, 300, 3) == _torch_draws(70000, 300, 3)    # (beyond a JPEG)


def test_train_requests_from_a_seed_or_a_generator_agree():
    for seed in range(30):
        fast = train_request(500, 375, seed, 96)
        assert fast == train_request(500, 375, torch.Generator().manual_seed(seed), 96)
        torch.manual_seed(seed)
        top, left, h, w = _reference_params(500, 375)
        assert fast[0].box == (left, top, left + w, top + h) and fast[0].size == (96, 96)
        assert fast[1] == bool(torch.rand(1) < 0.5)


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
