"""The host's crop-and-resize (``host/jpeg/resize_request.py``): its checks, and its requests
run through the golden model of the cores' resize path (``apply_request``) give Pillow's
pixels for torchvision's eval and train pipelines, windows and odd sizes included."""

import numpy as np
import pytest
import simplejpeg

from dlforge.host.jpeg import resize_request
from dlforge.host.jpeg.loader import train_generator
from dlforge.host.jpeg.resize_request import Resize, make_tables, table_cache
from dlforge.host.jpeg.transforms import eval_request, train_request
from dlforge.rtl.resample.request import request_bytes
from dlforge.sim.models.resample_model import apply_request
from jpeg_files import encode, photo

TAPS = 7


def _decoded(name, width, height, subsampling=2):
    image = np.ascontiguousarray(photo(name)[:height, :width])
    data = encode(image, quality=90, subsampling=subsampling)
    return simplejpeg.decode_jpeg(data, colorspace="RGB", fastdct=False, fastupsample=False)


@pytest.mark.parametrize("name,width,height", [("astronaut", 500, 375),
                                               ("chelsea", 451, 300),
                                               ("coffee", 300, 400), ("rocket", 257, 255)])
def test_eval_requests_give_pillows_pixels(name, width, height):
    """``Resize(256)`` then ``CenterCrop(224)`` as one request with a window: the window's
    outputs need only the rows and columns under them, which the request crops."""
    pixels = _decoded(name, width, height)
    r = eval_request(width, height)
    request = r.request(TAPS, (1024, 1024))
    assert len(request) == request_bytes(TAPS, 224, 224)
    assert np.array_equal(apply_request(pixels, request, TAPS), r.apply(pixels))


def test_train_requests_give_pillows_pixels():
    """``RandomResizedCrop(224)`` drawn for 40 files: every request the resampler can take
    (shrinks up to 3 with 7 taps) gives Pillow's pixels; the others are refused."""
    pixels = _decoded("astronaut", 500, 375)
    taken = 0
    for k in range(40):
        r, _ = train_request(500, 375, train_generator(3, 0, f"file{k}"))
        try:
            request = r.request(TAPS, (1024, 1024))
        except ValueError as exc:
            assert "taps" in str(exc)
            continue
        taken += 1
        assert np.array_equal(apply_request(pixels, request, TAPS), r.apply(pixels)), k
    assert taken >= 30


def test_crop_requests_are_made_each_time_from_kept_tables():
    """A crop away from the image's corner (train's) is not kept whole, only its tables;
    a request of the whole image (eval's) is; both equal a fresh encoding, and tables made
    ahead (``make_tables``) equal the ones made when asked for."""
    crop = Resize((17, 9, 317, 209), (224, 224))
    kept = resize_request._request.cache_info().currsize
    first = crop.request(TAPS, (1024, 1024))
    assert crop.request(TAPS, (1024, 1024)) == first == crop._encode(TAPS, (1024, 1024), None)
    assert resize_request._request.cache_info().currsize == kept
    whole = eval_request(613, 411)
    assert whole.request(TAPS, (1024, 1024)) == whole._encode(TAPS, (1024, 1024), None)
    assert resize_request._request.cache_info().currsize == kept + 1
    fresh = {n: resize_request._axis.__wrapped__(n, 96, 0, 96, "BILINEAR", TAPS)
             for n in (97, 150, 288)}
    resize_request._axis.cache_clear()
    make_tables([97, 150, 288, 1000], 96, TAPS)         # (1000 -> 96 needs more taps: none)
    info = table_cache()
    assert (info.misses, info.currsize) == (4, 3)
    assert all(resize_request._axis(n, 96, 0, 96, "BILINEAR", TAPS) == t
               for n, t in fresh.items())
    assert table_cache().hits == 3
    r = Resize((3, 4, 153, 292), (96, 96))
    assert r.request(TAPS) == r._encode(TAPS, None, None) and table_cache().hits == 7


@pytest.mark.parametrize("resize", [
    Resize((3, 2, 43, 30), (24, 20)),                     # shrink, both axes
    Resize((0, 0, 48, 32), (30, 12)),                     # vertical first (Pillow 13)
    Resize((5, 5, 25, 15), (61, 33)),                     # stretch
    Resize((0, 0, 48, 32), (48, 32)),                     # the identity
    Resize((1, 1, 2, 31), (1, 10)),                       # one column
    Resize((0, 0, 48, 32), (40, 40), window=(7, 3, 30, 38)),
])
def test_odd_requests_give_pillows_pixels(resize):
    pixels = _decoded("astronaut", 48, 32, subsampling=0)
    request = resize.request(TAPS)
    assert np.array_equal(apply_request(pixels, request, TAPS), resize.apply(pixels))


def test_checks():
    r = Resize((10, 10, 60, 40), (20, 20))
    r.check(60, 40)
    with pytest.raises(ValueError, match="not inside the 59x40 image"):
        r.check(59, 40)
    with pytest.raises(ValueError, match="must be positive"):
        Resize((0, 0, 10, 10), (0, 5)).check(10, 10)
    with pytest.raises(ValueError, match="window .* is not inside"):
        Resize((0, 0, 10, 10), (8, 8), window=(0, 0, 9, 8)).check(10, 10)
    with pytest.raises(ValueError, match="needs 8 taps, the resampler has 7"):
        Resize((0, 0, 400, 100), (100, 100)).request(TAPS)             # a shrink of 4
    with pytest.raises(ValueError, match="larger than the device's resampler"):
        Resize((0, 0, 1100, 100), (1000, 100)).request(TAPS, (1024, 1024))
    assert Resize([1, 2, 3, 4], [5, 6]).box == (1, 2, 3, 4)           # (hashable)
    made = Resize.crop((1, 2, 3, 4), (5, 6))                            # (train's, quicker)
    assert made == Resize((1, 2, 3, 4), (5, 6)) and hash(made) == hash(Resize([1, 2, 3, 4],
                                                                            [5, 6]))


def test_the_model_refuses_what_the_core_refuses():
    pixels = _decoded("astronaut", 48, 32)
    request = bytearray(Resize((0, 0, 48, 32), (20, 10)).request(TAPS))
    with pytest.raises(ValueError, match="other taps"):
        apply_request(pixels, bytes(request), 5)
    with pytest.raises(ValueError, match="not inside"):
        apply_request(pixels[:, :40], bytes(request), TAPS)
    bad = bytearray(request)
    bad[0] ^= 1
    with pytest.raises(ValueError, match="magic"):
        apply_request(pixels, bytes(bad), TAPS)
    backwards = bytearray(request)
    backwards[20:24] = (47).to_bytes(4, "little")          # the first column needs the last
    with pytest.raises(ValueError, match="backwards"):
        apply_request(pixels, bytes(backwards), TAPS)
