"""torchvision's two standard ImageNet pipelines on a decoded image, with torchvision's size,
rounding and random-parameter rules and Pillow's resampling, so the pixels are those of
``torchvision.transforms`` applied to a Pillow-decoded image:

* ``eval``: ``Resize(256)`` (the shorter side to 256, the longer ``int(256 * long /
  short)``), then ``CenterCrop(224)`` (offsets ``int(round((size - crop) / 2))``);
* ``train``: ``RandomResizedCrop(224)`` (area 8-100 %, aspect 3/4-4/3, log-uniform; ten
  tries, then a centre crop clamped to the aspect range) as crop then resize, then
  ``RandomHorizontalFlip()``.

The random draws come from a ``torch.Generator`` in torchvision's order (area, aspect, top,
left, then the flip), so a generator seeded like torchvision's global one gives its crops.
torchvision itself is not a dependency: its PyPI wheels need a CUDA build of torch
(checked 2026-12-02: torchvision 0.28 for torch 2.13 links ``libtorch_cuda``), so these
rules are written from its documentation and source, and tests/test_transforms.py checks
them against an independent re-implementation and the pixels against Pillow and the
resampler's golden model.  The resampling runs here on the host with Pillow; the device's
resampler (issue 18) is to take it over.
"""

import math
from functools import lru_cache

import numpy as np
import torch
from PIL import Image

__all__ = ["TRANSFORMS", "resize_size", "center_crop_box", "random_resized_crop_box",
           "flip_draw", "eval_transform", "train_transform", "eval_request", "train_request"]

#: The pipelines by name (``dlforge stream --transform``, ``JpegBatches(transform=)``).
TRANSFORMS = ("eval", "train")

SCALE = (0.08, 1.0)
RATIO = (3.0 / 4.0, 4.0 / 3.0)


def resize_size(width, height, size):
    """``Resize(size)`` with an int: (new width, new height), the shorter side to ``size``."""
    if size < 1:
        raise ValueError(f"resize size must be positive, not {size}")
    short, long = (width, height) if width <= height else (height, width)
    new_short, new_long = size, int(size * long / short)
    return (new_short, new_long) if width <= height else (new_long, new_short)


def center_crop_box(width, height, crop):
    """``CenterCrop(crop)``: the box (left, top, right, bottom).  A crop larger than the image
    (torchvision pads with zeros) is refused."""
    if not 1 <= crop <= min(width, height):
        raise ValueError(f"centre crop {crop} does not fit a {width}x{height} image")
    top = int(round((height - crop) / 2.0))
    left = int(round((width - crop) / 2.0))
    return left, top, left + crop, top + crop


@lru_cache(maxsize=16)
def _log_ratio(ratio):
    """torchvision's ``torch.log(torch.tensor(ratio))``, once (the same float32 values)."""
    return tuple(float(v) for v in torch.log(torch.tensor(ratio)))


def random_resized_crop_box(width, height, generator, scale=SCALE, ratio=RATIO):
    """``RandomResizedCrop.get_params``: the box (left, top, right, bottom), drawn from
    ``generator`` as torchvision draws from its global one."""
    area = height * width
    log_ratio = _log_ratio(tuple(ratio))
    for _ in range(10):
        target_area = area * torch.empty(1).uniform_(scale[0], scale[1],
                                                     generator=generator).item()
        aspect = torch.exp(torch.empty(1).uniform_(log_ratio[0], log_ratio[1],
                                                   generator=generator)).item()
        w = int(round(math.sqrt(target_area * aspect)))
        h = int(round(math.sqrt(target_area / aspect)))
        if 0 < w <= width and 0 < h <= height:
            top = torch.randint(0, height - h + 1, size=(1,), generator=generator).item()
            left = torch.randint(0, width - w + 1, size=(1,), generator=generator).item()
            return left, top, left + w, top + h
    # none fitted: the whole image, cut to the nearest allowed aspect
    in_ratio = float(width) / float(height)
    if in_ratio < min(ratio):
        w, h = width, int(round(width / min(ratio)))
    elif in_ratio > max(ratio):
        w, h = int(round(height * max(ratio))), height
    else:
        w, h = width, height
    top, left = (height - h) // 2, (width - w) // 2
    return left, top, left + w, top + h


def flip_draw(generator, p=0.5):
    """``RandomHorizontalFlip(p)``'s draw: whether to flip."""
    return bool(torch.rand(1, generator=generator) < p)


@lru_cache(maxsize=1024)
def eval_request(width, height, resize=256, crop=224):
    """``Resize(resize)`` then ``CenterCrop(crop)`` of a ``width`` x ``height`` image as one
    crop-and-resize (a :class:`~dlforge.host.resize_request.Resize` with a window), what a
    device's resampler does."""
    from .resize_request import Resize
    size = resize_size(width, height, resize)
    return Resize((0, 0, width, height), size, center_crop_box(*size, crop))


def train_request(width, height, generator, size=224):
    """``RandomResizedCrop(size)`` and ``RandomHorizontalFlip()``'s draws, in torchvision's
    order: (the crop-and-resize, whether to flip the result)."""
    from .resize_request import Resize
    box = random_resized_crop_box(width, height, generator)
    return Resize(box, (size, size)), flip_draw(generator)


def _pillow(pixels):
    pixels = np.asarray(pixels)
    if pixels.ndim == 3 and pixels.shape[2] == 1:
        pixels = pixels[..., 0]
    return Image.fromarray(np.ascontiguousarray(pixels))


def eval_transform(pixels, resize=256, crop=224):
    """(H, W[, 3]) uint8 -> (crop, crop, 3) uint8: ``Resize(resize)``, ``CenterCrop(crop)``."""
    image = _pillow(pixels)
    size = resize_size(image.width, image.height, resize)
    if size != image.size:
        image = image.resize(size, Image.Resampling.BILINEAR)
    return np.array(image.crop(center_crop_box(*size, crop)).convert("RGB"))  # (writable)


def train_transform(pixels, generator, size=224, flip=True):
    """(H, W[, 3]) uint8 -> (size, size, 3) uint8: ``RandomResizedCrop(size)`` then
    ``RandomHorizontalFlip()`` (``flip=False``: without it), drawing from ``generator``."""
    image = _pillow(pixels)
    box = random_resized_crop_box(image.width, image.height, generator)
    image = image.crop(box).resize((size, size), Image.Resampling.BILINEAR)
    out = np.array(image.convert("RGB"))                                      # (writable)
    if flip and flip_draw(generator):
        out = np.ascontiguousarray(out[:, ::-1])
    return out
