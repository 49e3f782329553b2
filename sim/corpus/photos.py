"""The real photos the corpora are made from: scikit-image's PNGs and its three real JPEG files,
read from its data folder (no network, no pooch)."""

import functools
import importlib.util
import io
from pathlib import Path

import numpy as np
from PIL import Image

__all__ = ["COLOUR_PHOTOS", "GREY_PHOTOS", "SHIPPED_JPEGS", "available_photos", "data_file",
           "photo", "photo_source", "shipped_jpegs", "crop", "to_grey"]


# ---------------------------------------------------------------------------------------
# Sources: scikit-image's photos, read from its data folder (no network, no pooch)

COLOUR_PHOTOS = ("astronaut", "coffee", "chelsea", "rocket", "ihc", "motorcycle", "color",
                 "hubble", "retina")
GREY_PHOTOS = ("camera", "moon", "coins", "brick", "grass", "gravel", "page", "text", "cell",
               "microaneurysms")
_FILES = {
    "astronaut": "astronaut.png", "coffee": "coffee.png", "chelsea": "chelsea.png",
    "rocket": "rocket.jpg", "ihc": "ihc.png", "motorcycle": "motorcycle_left.png",
    "color": "color.png", "hubble": "hubble_deep_field.jpg", "retina": "retina.jpg",
    "camera": "camera.png", "moon": "moon.png", "coins": "coins.png", "brick": "brick.png",
    "grass": "grass.png", "gravel": "gravel.png", "page": "page.png", "text": "text.png",
    "cell": "cell.png", "microaneurysms": "microaneurysms.png",
}
#: JPEG files that scikit-image ships as they are (real encoders: rocket.jpg and retina.jpg
#: baseline with one DQT/DHT table per segment, hubble_deep_field.jpg from Photoshop with
#: two DQT tables in one segment and four DHT tables in one segment).
SHIPPED_JPEGS = ("rocket.jpg", "retina.jpg", "hubble_deep_field.jpg")


@functools.lru_cache(maxsize=None)
def _data_dir():
    spec = importlib.util.find_spec("skimage")
    if spec is None or not spec.submodule_search_locations:
        return None
    d = Path(next(iter(spec.submodule_search_locations))) / "data"
    return d if d.is_dir() else None


def data_file(filename):
    d = _data_dir()
    if d is None or not (d / filename).is_file():
        return None
    return (d / filename).read_bytes()


@functools.lru_cache(maxsize=None)
def photo(name):
    """Pixels of a scikit-image photo (uint8, HxW or HxWx3, read-only) or None if absent."""
    raw = data_file(_FILES[name])
    if raw is None:
        return None
    with Image.open(io.BytesIO(raw)) as im:
        a = np.asarray(im.convert("L" if name in GREY_PHOTOS else "RGB"))
    a = np.ascontiguousarray(a)
    a.flags.writeable = False
    return a


def available_photos(names):
    got = tuple(n for n in names if photo(n) is not None)
    if not got:
        raise RuntimeError("scikit-image's data folder (skimage/data/*.png) was not found: "
                           "install scikit-image")
    return got


def photo_source(k, grey, names=None):
    """The k-th available photo of a kind (cycling), as (name, pixels)."""
    pool = available_photos(names or (GREY_PHOTOS if grey else COLOUR_PHOTOS[:6]))
    name = pool[k % len(pool)]
    return name, photo(name)


def shipped_jpegs():
    """[(file name, bytes)] of the real JPEG files scikit-image ships (those installed)."""
    return [(fn, raw) for fn in SHIPPED_JPEGS if (raw := data_file(fn)) is not None]


def crop(img, w, h, k=0):
    """A w x h crop, placed deterministically by k so small crops see different content."""
    H, W = img.shape[:2]
    w, h = min(w, W), min(h, H)
    y0 = (H - h) * ((k * 37 + 41) % 97) // 97
    x0 = (W - w) * ((k * 61 + 29) % 97) // 97
    return np.ascontiguousarray(img[y0:y0 + h, x0:x0 + w])


def to_grey(a):
    return a if a.ndim == 2 else np.asarray(Image.fromarray(a).convert("L"))
