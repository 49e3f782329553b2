"""``dlforge bench loader``'s own check: every image of every batch is compared with
libjpeg-turbo's decode, and one wrong pixel or a result that is not ``ok`` counts (the command
then exits 1; its run on the CPU device is in test_runtime_commands.py)."""

import io
from types import SimpleNamespace

import numpy as np
import simplejpeg
import skimage.data
from PIL import Image

from dlforge.gen.bench.loader import _mismatches


def _jpeg(array, **options):
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(array)).save(buf, "JPEG", **options)
    return buf.getvalue()


def test_every_result_is_checked_against_libjpeg_turbo():
    datas = [_jpeg(skimage.data.astronaut()[:40, :56], quality=85),
             _jpeg(skimage.data.coffee()[:33, :47], quality=92, subsampling=0)]

    def result(k, status="ok"):
        pixels = simplejpeg.decode_jpeg(datas[k % 2], colorspace="RGB", fastdct=False,
                                        fastupsample=False)
        return SimpleNamespace(status=status, pixels=pixels)

    results = [result(k) for k in range(6)]             # three rounds of the two files
    assert _mismatches(datas, results) == 0
    results[3].pixels = results[3].pixels.copy()
    results[3].pixels[5, 7, 1] ^= 1                      # one bit of one pixel
    results[4] = result(4, status="fallback")            # right pixels, not from the device
    results[5].pixels = results[5].pixels[:-1]           # a row short
    assert _mismatches(datas, results) == 3
