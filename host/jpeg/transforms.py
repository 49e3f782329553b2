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
import threading
from functools import lru_cache

import numpy as np
import torch
from PIL import Image

__all__ = ["TRANSFORMS", "resize_size", "center_crop_box", "random_resized_crop_box",
           "flip_draw", "train_draws", "torch_words", "eval_transform", "train_transform",
           "eval_request", "train_request"]

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
    return _fallback_box(width, height, ratio)


def _fallback_box(width, height, ratio):
    """None of the ten tries fitted: the whole image, cut to the nearest allowed aspect."""
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


# ---- the same draws without torch ------------------------------------------------------------
# Each torch call above costs microseconds of dispatch for one number (some 20 us an image
# warm, 50-70 us in the loader's thread between the device's replies).  A generator seeded
# once and used for one file's draws can be replaced by its stream of words: torch's CPU
# generator is the standard MT19937 seeded with the seed's low 32 bits (``init_genrand``), the
# same as numpy's legacy seeding, and each draw of get_params and the flip takes one 32-bit
# word: ``uniform_`` (float32) and ``rand`` map its low 24 bits to ``x = k / 2**24`` and
# return ``x * (to - from) + from`` in float32; ``randint(0, n)`` is ``word % n`` (for n below
# 2**28: torch 2.13 takes two words above; a JPEG's sides are below 2**16).

_MT = np.random.MT19937()
# init_genrand: RandomState's legacy ``seed`` (the bit generator's own is a little quicker)
_MT_SEED = getattr(_MT, "_legacy_seeding", None) or np.random.RandomState(_MT).seed
_MT_LOCK = threading.Lock()
#: words one file's draws take at most: ten tries of two, top and left, the flip
_WORDS = 23
_LOW24 = (1 << 24) - 1
_MARGIN = 2.0 ** -20                        # relative: 8 float32 ulps and more
_BELOW, _ABOVE = 1 - _MARGIN, 1 + _MARGIN   # (torch's float32 exp: within 2 ulps)


def torch_words(seed, count=_WORDS):
    """The first ``count`` 32-bit words that ``torch.Generator().manual_seed(seed)`` draws."""
    with _MT_LOCK:
        _MT_SEED(seed & 0xFFFFFFFF)
        return _MT.random_raw(count).tolist()


@lru_cache(maxsize=16)
def _draw_constants(scale, ratio):
    """The two ``uniform_`` draws' float32 ``from`` and ``(to - from) / 2**24`` (exact): the
    area's, then the log-aspect's."""
    out = []
    for low, high in (scale, _log_ratio(ratio)):
        low32, high32 = np.float32(low), np.float32(high)
        out += [float(low32), float(high32 - low32) / (1 << 24)]
    return tuple(out)


def train_draws(width, height, seed, scale=SCALE, ratio=RATIO):
    """``RandomResizedCrop.get_params`` and ``RandomHorizontalFlip()``'s draw from a fresh
    ``torch.Generator().manual_seed(seed)``, as :func:`random_resized_crop_box` then
    :func:`flip_draw` draw them: ``(box, flip)``, computed from the generator's words.

    The float32 steps are bounded instead of reproduced (torch's ``exp`` may differ between
    builds and CPUs by an ulp; ``uniform_`` may or may not fuse its multiply-add): each try's
    width and height are rounded at both ends of an interval some 8 ulps wider than those
    steps can stray, every later step (Python's float multiply, division, ``sqrt`` and
    ``round``) being monotonic.  Where the ends disagree (a side within ~1e-3 pixels of a
    rounding boundary: some 3 files in a thousand) the draws are made again with torch."""
    if width >= 1 << 16 or height >= 1 << 16:               # (larger than a JPEG's)
        generator = torch.Generator().manual_seed(seed)
        return random_resized_crop_box(width, height, generator, scale, ratio), \
            flip_draw(generator)
    with _MT_LOCK:                                          # (torch_words, inline)
        _MT_SEED(seed & 0xFFFFFFFF)
        words = _MT.random_raw(_WORDS).tolist()
    low_s, step_s, low_r, step_r = _draw_constants(tuple(scale), tuple(ratio))
    area = height * width
    sqrt, exp = math.sqrt, math.exp
    for k in range(0, 20, 2):
        # the area's share and the log-aspect, each within its margin: torch's float32
        # result strays from the exact one by less than 2**-23 (|x * span| + |result|)
        product = (words[k] & _LOW24) * step_s
        value = product + low_s
        margin = (abs(product) + abs(value)) * _MARGIN
        lo_t, hi_t = area * (value - margin), area * (value + margin)
        product = (words[k + 1] & _LOW24) * step_r
        value = product + low_r
        margin = (abs(product) + abs(value)) * _MARGIN
        lo_a, hi_a = exp(value - margin) * _BELOW, exp(value + margin) * _ABOVE
        w = round(sqrt(lo_t * lo_a))
        h = round(sqrt(lo_t / hi_a))
        if w != round(sqrt(hi_t * hi_a)) or h != round(sqrt(hi_t / lo_a)):
            generator = torch.Generator().manual_seed(seed)       # too close to call
            box = random_resized_crop_box(width, height, generator, scale, ratio)
            return box, flip_draw(generator)
        if 0 < w <= width and 0 < h <= height:
            top = words[k + 2] % (height - h + 1)
            left = words[k + 3] % (width - w + 1)
            return (left, top, left + w, top + h), (words[k + 4] & _LOW24) < 1 << 23
    return _fallback_box(width, height, ratio), (words[20] & _LOW24) < 1 << 23


@lru_cache(maxsize=1)
def _resize_class():
    from dlforge.host.jpeg.resize_request import Resize
    return Resize


@lru_cache(maxsize=1024)
def eval_request(width, height, resize=256, crop=224):
    """``Resize(resize)`` then ``CenterCrop(crop)`` of a ``width`` x ``height`` image as one
    crop-and-resize (a :class:`~dlforge.host.jpeg.resize_request.Resize` with a window), what a
    device's resampler does."""
    from dlforge.host.jpeg.resize_request import Resize
    size = resize_size(width, height, resize)
    return Resize((0, 0, width, height), size, center_crop_box(*size, crop))


def train_request(width, height, generator, size=224):
    """``RandomResizedCrop(size)`` and ``RandomHorizontalFlip()``'s draws, in torchvision's
    order: (the crop-and-resize, whether to flip the result).  ``generator``: a
    ``torch.Generator``, or the seed of a fresh one (an int: the same draws, made from its
    words without torch, :func:`train_draws`; what the loader does, a generator per file)."""
    if isinstance(generator, int):
        box, flip = train_draws(width, height, generator)
    else:
        box = random_resized_crop_box(width, height, generator)
        flip = flip_draw(generator)
    return _resize_class().crop(box, (int(size), int(size))), flip


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
