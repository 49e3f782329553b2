"""An independent JPEG decode for the tests: libjpeg-turbo 2.1.0's C code as built inside
``jpeglib`` (islow IDCT, no SIMD), the build the golden model's fuzz test compares with.

Not simplejpeg: the ``cpu`` device and the decoder service's fallback decode with simplejpeg
(libjpeg-turbo's SIMD build), so a test that checks them against simplejpeg compares a path
with itself.  On undamaged files the two builds agree pixel for pixel
(docs/architecture.md, "Reference for damaged files")."""

import os
import tempfile
from pathlib import Path

import jpeglib
import numpy as np

__all__ = ["decode"]


def decode(jpeg, upsample="fancy"):
    """(H, W, 3) uint8 RGB of ``jpeg`` (bytes or a path); ``upsample``: "fancy" or "fast"
    (libjpeg's do_fancy_upsampling off).  Raises what jpeglib raises on a file libjpeg
    refuses."""
    flags = [] if upsample == "fancy" else ["-DO_FANCY_UPSAMPLING"]
    if isinstance(jpeg, (bytes, bytearray, memoryview)):
        fd, name = tempfile.mkstemp(suffix=".jpg")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(jpeg)
            return decode(name, upsample)
        finally:
            os.unlink(name)
    with jpeglib.version("turbo210"):
        im = jpeglib.read_spatial(str(Path(jpeg)), out_color_space=jpeglib.Colorspace.JCS_RGB,
                                  dct_method=jpeglib.DCTMethod.JDCT_ISLOW, flags=flags)
        pixels = np.array(im.spatial)
    if pixels.ndim == 2:
        pixels = pixels[..., None]
    if pixels.shape[2] == 1:
        pixels = np.repeat(pixels, 3, axis=2)
    return np.ascontiguousarray(pixels)
