"""Golden model of Pillow's 8-bit resampling (``Image.resize``, what torchvision's PIL path
runs for ``Resize``, ``CenterCrop`` + ``Resize`` and ``RandomResizedCrop``), bit-exact.

Pillow resamples in two separable passes of integer arithmetic once its coefficients exist:
a horizontal pass into an 8-bit intermediate image (only over the rows the vertical pass
will read), then a vertical pass.  Each output sample is ``clip8((2**21 + sum(p * k)) >>
22)``, with coefficients ``k`` rounded to 22 fraction bits (half away from zero) from
doubles that depend on the sizes alone.  So the host can compute the coefficients for each
image, and gateware only multiplies and accumulates: this model is the reference both are
checked against, and it is itself checked against Pillow (tests/test_resample_model.py).

Written from Pillow's ``src/libImaging/Resample.c`` (``precompute_coeffs``,
``normalize_coeffs_8bpc``, ``ImagingResampleInner``); the details that matter for exactness:
the box's corners are C ``float`` (single precision), the filter's support widens by the
downscale factor (antialiasing), bounds round by truncating ``x + 0.5`` toward zero, and a
pass is skipped when its axis keeps its size and the box covers it.
"""

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["FILTERS", "PRECISION_BITS", "Coefficients", "coefficients", "resize", "crop_resize",
           "apply_request"]

#: Fraction bits of the integer coefficients (Pillow: 32 - 8 - 2).
PRECISION_BITS = 22


def _bilinear(x):
    x = np.abs(x)
    return np.where(x < 1.0, 1.0 - x, 0.0)


def _bicubic(x, a=-0.5):
    x = np.abs(x)
    near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1
    far = (((x - 5) * x + 8) * x - 4) * a
    return np.where(x < 1.0, near, np.where(x < 2.0, far, 0.0))


#: Pillow's filter name -> (function, support); the names of ``PIL.Image.Resampling``.
FILTERS = {"BILINEAR": (_bilinear, 1.0), "BICUBIC": (_bicubic, 2.0)}


@dataclass(frozen=True)
class Coefficients:
    """One axis of a resize: output sample ``i`` reads ``count[i]`` inputs from ``first[i]``
    on, weighted by ``weights[i, :count[i]]`` (integers of 22 fraction bits; the rest 0)."""
    first: np.ndarray          # (out,) int
    count: np.ndarray          # (out,) int
    weights: np.ndarray        # (out, taps) int64

    @property
    def taps(self):
        return self.weights.shape[1]


def coefficients(in_size, out_size, start=0.0, stop=None, filter="BILINEAR"):
    """The integer coefficients of one axis: ``in_size`` samples, the box ``[start, stop)``
    of them (default: all) resampled to ``out_size``.  Every output at once in numpy, with
    C's operations in C's order (the weights of an output summed one after another, not
    pairwise), so the doubles are Pillow's."""
    if in_size < 1 or out_size < 1:
        raise ValueError(f"sizes must be positive, not {in_size} -> {out_size}")
    function, base_support = FILTERS[filter]
    stop = in_size if stop is None else stop
    start32, stop32 = np.float32(start), np.float32(stop)
    scale = float(np.float32(stop32 - start32)) / out_size     # (float in C, then double)
    filterscale = max(scale, 1.0)
    support = base_support * filterscale
    taps = int(math.ceil(support)) * 2 + 1
    ss = 1.0 / filterscale
    one = float(1 << PRECISION_BITS)
    center = float(start32) + (np.arange(out_size) + 0.5) * scale
    lo = np.maximum(np.trunc(center - support + 0.5), 0).astype(np.int64)  # (C casts: to 0)
    count = np.minimum(np.trunc(center + support + 0.5), in_size).astype(np.int64) - lo
    x = np.arange(taps)
    inside = x[None, :] < count[:, None]
    w = np.where(inside, function((x[None, :] + lo[:, None] - center[:, None] + 0.5) * ss),
                 0.0)
    total = np.zeros(out_size)
    for k in range(taps):                           # (in order, as C adds them)
        total = total + w[:, k]
    w = np.where(total[:, None] != 0.0, w / np.where(total == 0.0, 1.0, total)[:, None], w)
    weights = np.where(w < 0, np.trunc(-0.5 + w * one), np.trunc(0.5 + w * one))
    weights = np.where(inside, weights, 0).astype(np.int64)
    return Coefficients(lo, count, weights)


def _pass(image, axis, coeffs, offset=0):
    """One pass along ``axis`` (0 rows, 1 columns) of a uint8 array (H, W[, C])."""
    taps = coeffs.taps
    index = coeffs.first[:, None] - offset + np.arange(taps)[None, :]
    limit = image.shape[axis] - 1
    index = np.minimum(index, limit)                # (taps past ``count`` weigh 0)
    weights = np.where(np.arange(taps)[None, :] < coeffs.count[:, None], coeffs.weights, 0)
    src = image.astype(np.int64)
    if axis == 1:
        gathered = src[:, index]                    # (H, out, taps[, C])
        w = weights[None, :, :] if src.ndim == 2 else weights[None, :, :, None]
        acc = (gathered * w).sum(axis=2)
    else:
        gathered = src[index]                       # (out, taps, W[, C])
        w = weights[:, :, None] if src.ndim == 2 else weights[:, :, None, None]
        acc = (gathered * w).sum(axis=1)
    acc += 1 << (PRECISION_BITS - 1)
    return np.clip(acc >> PRECISION_BITS, 0, 255).astype(np.uint8)


def resize(image, size, box=None, filter="BILINEAR", pillow=None):
    """``Image.fromarray(image).resize(size, filter, box)`` as an array: ``image`` uint8
    (H, W) or (H, W, C), ``size`` (width, height) as Pillow takes it, ``box`` (left, upper,
    right, lower) in input pixels (default: the whole image); ``pillow``: the Pillow major
    version to follow (default: the installed one)."""
    image = np.asarray(image)
    if image.dtype != np.uint8:
        raise ValueError(f"8-bit images only, not {image.dtype}")
    height, width = image.shape[:2]
    out_w, out_h = size
    box = (0.0, 0.0, float(width), float(height)) if box is None else tuple(map(float, box))
    need_h = out_w != width or box[0] != 0 or box[2] != out_w
    need_v = out_h != height or box[1] != 0 or box[3] != out_h
    vertical = coefficients(height, out_h, box[1], box[3], filter)
    horizontal = coefficients(width, out_w, box[0], box[2], filter)
    out = image
    if vertical_first(box, size, pillow):
        if need_v:
            out = _pass(out, 0, vertical)
        if need_h:
            out = _pass(out, 1, horizontal)
        return np.ascontiguousarray(out)
    offset = 0
    if need_h:
        # (only the rows the vertical pass reads)
        rows_first = int(vertical.first[0])
        rows_last = int(vertical.first[-1] + vertical.count[-1])
        out = _pass(image[rows_first:rows_last], 1, horizontal)
        offset = rows_first
    if need_v:
        out = _pass(out, 0, vertical, offset)
    return np.ascontiguousarray(out)


def _pillow_major():
    import PIL
    return int(PIL.__version__.split(".")[0])


def vertical_first(box, size, pillow=None):
    """Whether Pillow runs the vertical pass first.  Before Pillow 13 (``pillow``: its major
    version, default the installed one) never; since, when the height shrinks by more than
    twice as many pixels as the width (Pillow's pull request 9549; the rule was found by
    experiment against Pillow 13.0.0, whose final source was not at hand, and the boundary
    is exact on every size tried).  The order matters: the intermediate image is rounded to
    8 bits."""
    if (_pillow_major() if pillow is None else pillow) < 13:
        return False
    box_w, box_h = box[2] - box[0], box[3] - box[1]
    out_w, out_h = size
    return out_h < box_h and box_h - out_h > 2 * (box_w - out_w)


def crop_resize(image, box, size, filter="BILINEAR", pillow=None):
    """``Image.crop(box).resize(size, filter)``: torchvision's ``resized_crop`` on a PIL
    image.  ``box`` (left, upper, right, lower) in whole pixels, inside the image."""
    left, upper, right, lower = box
    height, width = np.asarray(image).shape[:2]
    if not (0 <= left < right <= width and 0 <= upper < lower <= height):
        raise ValueError(f"crop box {box} is not inside the {width}x{height} image")
    return resize(np.asarray(image)[upper:lower, left:right], size, filter=filter,
                  pillow=pillow)


def apply_request(image, request, taps):
    """What a core with a resampler makes of ``image`` (the decoded (H, W, 3) uint8) and the
    resize request ``request`` (bytes, ``rtl/resample/request.py``): the crop, the two
    passes with the request's own tables in its order.  ValueError for a request the core
    refuses (as ``BAD_RESIZE``).  The golden model of the gateware's resize path."""
    from dlforge.rtl.resample.request import HEADER_WORDS, MAGIC, TAPS_SHIFT, VERTICAL_FIRST
    if len(request) % 4:
        raise ValueError("a request is whole words")
    words = np.frombuffer(request, "<u4").astype(np.int64)
    if len(words) < HEADER_WORDS or words[0] != MAGIC:
        raise ValueError("no request magic")
    if (words[1] >> TAPS_SHIFT) & 0xFF != taps:
        raise ValueError("tables for other taps")
    left, top = words[2] & 0xFFFF, words[2] >> 16
    crop_w, crop_h = words[3] & 0xFFFF, words[3] >> 16
    out_w, out_h = words[4] & 0xFFFF, words[4] >> 16
    per = 1 + taps
    if len(words) != HEADER_WORDS + per * (out_w + out_h):
        raise ValueError("the tables' length does not match the sizes")
    height, width = image.shape[:2]
    if min(crop_w, crop_h, out_w, out_h) < 1 or left + crop_w > width \
            or top + crop_h > height:
        raise ValueError("the box is not inside the image, or a size is 0")
    body = words[HEADER_WORDS:].reshape(-1, per)
    signed = np.where(body[:, 1:] >= 1 << 31, body[:, 1:] - (1 << 32), body[:, 1:])
    rows, columns = (body[:out_w, 0], signed[:out_w]), (body[out_w:, 0], signed[out_w:])
    for needs, limit in ((rows[0], crop_w), (columns[0], crop_h)):
        if np.any(np.diff(needs) < 0) or needs.max() >= limit:
            raise ValueError("a table's needs go backwards or past the crop")
    crop = image[top:top + crop_h, left:left + crop_w].astype(np.int64)

    def horizontal(src):
        # weight j of output x multiplies input need - j
        index = rows[0][:, None] - np.arange(taps)[None, :]
        gathered = src[:, np.clip(index, 0, None)]              # (H, out, taps, C)
        weights = np.where(index >= 0, rows[1], 0)
        acc = (gathered * weights[None, :, :, None]).sum(axis=2)
        return np.clip((acc + (1 << (PRECISION_BITS - 1))) >> PRECISION_BITS, 0, 255)

    def vertical(src):
        # weight j of output row y multiplies input row need - j
        index = columns[0][:, None] - np.arange(taps)[None, :]
        gathered = src[np.clip(index, 0, None)]                 # (out, taps, W, C)
        weights = np.where(index >= 0, columns[1], 0)
        acc = (gathered * weights[:, :, None, None]).sum(axis=1)
        return np.clip((acc + (1 << (PRECISION_BITS - 1))) >> PRECISION_BITS, 0, 255)

    if words[1] & VERTICAL_FIRST:
        out = horizontal(vertical(crop))
    else:
        out = vertical(horizontal(crop))
    return out.astype(np.uint8)
