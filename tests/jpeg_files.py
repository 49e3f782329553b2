"""Small JPEG files written by Pillow from scikit-image's photos, for the model's unit tests."""

import io

import numpy as np
import skimage.data
from PIL import Image

__all__ = ["photo", "encode"]

_PHOTOS = {}


def photo(name="astronaut"):
    if name not in _PHOTOS:
        _PHOTOS[name] = np.ascontiguousarray(getattr(skimage.data, name)())
    return _PHOTOS[name]


def encode(pixels, **options):
    """Pillow's JPEG encoder (libjpeg-turbo) with ``options`` (quality, subsampling, ...)."""
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, "JPEG", **options)
    return buf.getvalue()
