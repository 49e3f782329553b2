"""A crop-and-resize for the device: torchvision's ``resized_crop`` on a Pillow image
(``Image.crop(box).resize(size, BILINEAR)``), checked on the host before the file goes out
and encoded as the request a core with a resampler reads (``rtl/resample/request.py``).

The host computes Pillow's coefficients per image (they depend on the sizes alone) with the
golden model (``sim/resample_model.py``, bit-exact to the installed Pillow); the device
multiplies and adds.  :meth:`Resize.apply` does the same on the CPU, for files the device
cannot take.
"""

from dataclasses import dataclass

import numpy as np

from ..rtl.resample.column_resampler import column_table
from ..rtl.resample.request import pack_request, request_bytes
from ..rtl.resample.row_resampler import row_table
from ..sim.resample_model import coefficients, crop_resize, vertical_first

__all__ = ["Resize"]


@dataclass(frozen=True)
class Resize:
    """Cut ``box`` (left, top, right, bottom) out of the decoded image, resize it to ``size``
    (width, height) with Pillow's ``filter``."""
    box: tuple
    size: tuple
    filter: str = "BILINEAR"

    def check(self, width, height, limits=None):
        """Raise ValueError unless the box lies inside a ``width`` x ``height`` image and the
        sizes are positive (and within ``limits``: (max crop and output width, height))."""
        left, top, right, bottom = self.box
        out_w, out_h = self.size
        if not (0 <= left < right <= width and 0 <= top < bottom <= height):
            raise ValueError(f"crop box {tuple(self.box)} is not inside the "
                             f"{width}x{height} image")
        if out_w < 1 or out_h < 1:
            raise ValueError(f"output size {out_w}x{out_h} must be positive")
        if limits:
            most_w, most_h = limits
            for what, (w, h) in (("crop", (right - left, bottom - top)),
                                 ("output", (out_w, out_h))):
                if w > most_w or h > most_h:
                    raise ValueError(f"{what} {w}x{h} is larger than the device's resampler "
                                     f"takes ({most_w}x{most_h})")

    def encode(self, taps, pillow=None):
        """The request's bytes for a resampler of ``taps`` taps per pass; ValueError when an
        output needs more (a shrink the device cannot do in one step)."""
        left, top, right, bottom = self.box
        crop_w, crop_h = right - left, bottom - top
        out_w, out_h = self.size
        rows = row_table(coefficients(crop_w, out_w, filter=self.filter), taps)
        columns = column_table(coefficients(crop_h, out_h, filter=self.filter), taps)
        order = vertical_first((0, 0, crop_w, crop_h), self.size, pillow)
        return pack_request(taps=taps, box=self.box, size=self.size, vertical_first=order,
                            row_entries=rows, column_entries=columns)

    def request_bytes(self, taps):
        return request_bytes(taps, *self.size)

    def apply(self, pixels, pillow=None):
        """The same crop and resize on the CPU: (H, W, 3) uint8 -> (h, w, 3) uint8."""
        return crop_resize(np.asarray(pixels), tuple(self.box), tuple(self.size),
                           filter=self.filter, pillow=pillow)
