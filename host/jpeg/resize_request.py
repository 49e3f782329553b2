"""A crop-and-resize for the device: torchvision's ``resized_crop`` on a Pillow image
(``Image.crop(box).resize(size, BILINEAR)``), checked on the host before the file goes out
and encoded as the request a core with a resampler reads (``rtl/resample/request.py``).

The host computes Pillow's coefficients per image (they depend on the sizes alone) with the
golden model (``sim/models/resample_model.py``, bit-exact to the installed Pillow); the device
multiplies and adds.  :meth:`Resize.apply` is Pillow itself, for files the device cannot
take.
"""

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from PIL import Image

from dlforge.rtl.resample.request import pack_request, table_bytes
from dlforge.rtl.resample.table import table_arrays
from dlforge.sim.models.resample_model import (Coefficients, _pillow_major, coefficients,
                                               vertical_first)

__all__ = ["Resize", "make_tables", "table_cache"]

_set, _new = object.__setattr__, object.__new__
_PILLOW = _pillow_major()           # (the installed Pillow's, once: its rules decide the order)


@dataclass(frozen=True)
class Resize:
    """Cut ``box`` (left, top, right, bottom) out of the decoded image, resize it to ``size``
    (width, height) with Pillow's ``filter``, then keep ``window`` (left, top, right,
    bottom) of the result (None: all of it).

    ``Resize(box, size)`` is torchvision's ``RandomResizedCrop`` (crop, then resize);
    ``Resize(whole image, size, window)`` its ``Resize`` then ``CenterCrop``.  A window of a
    resized image is exact from a table cut down to its outputs: each output sample depends
    only on its own coefficients and the same intermediate samples."""
    box: tuple
    size: tuple
    window: tuple = None
    filter: str = "BILINEAR"

    def __post_init__(self):
        # (tuples of ints: a Resize is a key of the request cache)
        _set(self, "box", tuple(map(int, self.box)))
        _set(self, "size", tuple(map(int, self.size)))
        if self.window is not None:
            _set(self, "window", tuple(map(int, self.window)))

    @classmethod
    def crop(cls, box, size):
        """``Resize(box, size)`` of a ``box`` and ``size`` already tuples of ints (the train
        pipeline's, made per file: without the conversions)."""
        self = _new(cls)
        _set(self, "box", box)
        _set(self, "size", size)
        _set(self, "window", None)
        _set(self, "filter", "BILINEAR")
        return self

    @property
    def out_size(self):
        """(width, height) of the result."""
        if self.window is None:
            return tuple(self.size)
        left, top, right, bottom = self.window
        return right - left, bottom - top

    def check(self, width, height):
        """Raise ValueError unless the box lies inside a ``width`` x ``height`` image, the
        sizes are positive and the window lies inside the resized image."""
        left, top, right, bottom = self.box
        out_w, out_h = self.size
        if not (0 <= left < right <= width and 0 <= top < bottom <= height):
            raise ValueError(f"crop box {tuple(self.box)} is not inside the "
                             f"{width}x{height} image")
        if out_w < 1 or out_h < 1:
            raise ValueError(f"output size {out_w}x{out_h} must be positive")
        if self.window is not None:
            wl, wt, wr, wb = self.window
            if not (0 <= wl < wr <= out_w and 0 <= wt < wb <= out_h):
                raise ValueError(f"window {tuple(self.window)} is not inside the "
                                 f"{out_w}x{out_h} resized image")

    def request(self, taps, limits=None, pillow=None):
        """The request's bytes for a resampler of ``taps`` taps per pass whose crop and
        output may be up to ``limits`` (width, height).  ValueError when the device cannot
        do it (an output needs more taps, or sizes beyond its limits).  Requests of a box at
        the image's corner are kept (the eval pipeline asks the same of every photo of a
        size); a crop elsewhere (the train pipeline's random ones, seldom the same twice) is
        made each time from the kept tables: keeping it would hold 14 KiB a file for
        nothing, and push the host's own data out of the CPU's caches."""
        limits = None if limits is None else tuple(limits)
        if self.box[0] or self.box[1]:
            return self._encode(taps, limits, pillow)
        return _request(self, taps, limits, pillow)

    def _encode(self, taps, limits, pillow):
        left, top, right, bottom = self.box
        crop_w, crop_h = right - left, bottom - top
        out_w, out_h = self.size
        if out_w < 1 or out_h < 1 or crop_w < 1 or crop_h < 1:
            raise ValueError(f"empty crop or output ({crop_w}x{crop_h} -> {out_w}x{out_h})")
        order = vertical_first((0, 0, crop_w, crop_h), self.size,
                               _PILLOW if pillow is None else pillow)
        wl, wt, wr, wb = self.window or (0, 0, out_w, out_h)
        x0, x1, across = _axis(crop_w, out_w, wl, wr, self.filter, taps)
        y0, y1, down = _axis(crop_h, out_h, wt, wb, self.filter, taps)
        out = (wr - wl, wb - wt)
        if limits:
            most_w, most_h = limits
            for what, (w, h) in (("crop", (x1 - x0, y1 - y0)), ("output", out)):
                if w > most_w or h > most_h:
                    raise ValueError(f"{what} {w}x{h} is larger than the device's resampler "
                                     f"takes ({most_w}x{most_h})")
        return pack_request(taps=taps, box=(left + x0, top + y0, left + x1, top + y1),
                            size=out, vertical_first=order, rows=across, columns=down)

    def apply(self, pixels):
        """The same on the CPU with Pillow itself: (H, W, 3) uint8 -> (h, w, 3) uint8.
        ValueError as :meth:`check` (Pillow would pad a box outside the image)."""
        self.check(pixels.shape[1], pixels.shape[0])
        image = Image.fromarray(np.ascontiguousarray(pixels))
        image = image.crop(tuple(self.box))
        if image.size != tuple(self.size):
            image = image.resize(tuple(self.size), getattr(Image.Resampling, self.filter))
        if self.window is not None:
            image = image.crop(tuple(self.window))
        return np.array(image)


@lru_cache(maxsize=1024)
def _request(resize, taps, limits, pillow):
    return resize._encode(taps, limits, pillow)


@lru_cache(maxsize=4096)
def _axis(in_size, out_size, start, stop, filter, taps):
    """One axis's table for outputs ``[start, stop)`` of an ``in_size`` -> ``out_size``
    resize: (first input read, one past the last, (needs, weights) from that input on).
    Kept per sizes: a training run's random crops come in a few hundred sizes per axis."""
    c = coefficients(in_size, out_size, filter=filter)
    first, count = c.first[start:stop], c.count[start:stop]
    lo, hi = int(first.min()), int((first + count).max())
    table = table_arrays(Coefficients(first - lo, count, c.weights[start:stop]), taps)
    return lo, hi, table_bytes(*table)


def make_tables(in_sizes, out_size, taps, filter="BILINEAR"):
    """Make (and keep) the tables that resize each of ``in_sizes`` to ``out_size`` whole,
    as a crop's request asks for them; sizes beyond ``taps`` are skipped."""
    for in_size in in_sizes:
        try:
            _axis(in_size, out_size, 0, out_size, filter, taps)
        except ValueError:
            pass


def table_cache():
    """The per-size table cache's counts (``functools`` ``CacheInfo``: hits, misses, ...)."""
    return _axis.cache_info()
