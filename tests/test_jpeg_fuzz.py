"""Fuzzing the golden model: thousands of truncated, bit-flipped and spliced real files.

Each must give a JpegDecodeError or an image equal to libjpeg-turbo's C decoder (jpeglib's
turbo 2.1.0 build, islow, both upsampling modes).  simplejpeg's libjpeg-turbo runs the SIMD
IDCT, which saturates where jidctint.c wraps: on damaged data with huge coefficients the two
libjpeg-turbo builds disagree with each other, and the model follows jidctint.c (the brief's
target); the test counts those cases instead of failing on them.
"""

import collections

import numpy as np
import pytest

from dlforge.sim.corpus.jpeg_fuzz import MUTATIONS, fuzz_corpus
from dlforge.sim.models.jpeg_model import JpegDecodeError, decode

jpeglib = pytest.importorskip("jpeglib")


def _libjpeg_c(path, mode):
    flags = [] if mode == "fancy" else ["-DO_FANCY_UPSAMPLING"]
    with jpeglib.version("turbo210"):
        im = jpeglib.read_spatial(str(path), out_color_space=jpeglib.Colorspace.JCS_RGB,
                                  dct_method=jpeglib.DCTMethod.JDCT_ISLOW, flags=flags)
        return np.array(im.spatial)


def test_corpus_is_deterministic_and_mixed():
    a, b = fuzz_corpus(30, seed=4), fuzz_corpus(30, seed=4)
    assert [f.data for f in a] == [f.data for f in b]
    assert {f.features["mutation"] for f in a} == set(MUTATIONS)


def test_model_errors_or_equals_libjpeg(tmp_path):
    import simplejpeg
    outcomes = collections.Counter()
    for f in fuzz_corpus(3000, seed=1):
        try:
            pixels = decode(f.data).pixels
        except JpegDecodeError as exc:
            outcomes[exc.status.name] += 1
            continue
        except Exception as exc:                  # anything else is a bug in the model
            raise AssertionError(f"{f.name} ({f.features['edit']}): {exc!r}") from exc
        path = tmp_path / "f.jpg"
        path.write_bytes(f.data)
        for mode in ("fancy", "fast"):
            got = pixels if mode == "fancy" else decode(f.data, "fast").pixels
            want = _libjpeg_c(path, mode)
            assert got.shape == want.shape and (got == want).all(), (f.name, mode,
                                                                     f.features["edit"])
        outcomes["image"] += 1
        try:
            simd = simplejpeg.decode_jpeg(f.data, colorspace="RGB", fastdct=False,
                                          fastupsample=False)
            outcomes["simd differs"] += int(not (simd == pixels).all())
        except ValueError:
            outcomes["simd warns"] += 1
    assert sum(outcomes.values()) - outcomes["simd differs"] - outcomes["simd warns"] == 3000
    assert outcomes["image"] > 300 and outcomes["TRUNCATED"] > 500
    assert outcomes["simd differs"] < 0.05 * outcomes["image"]
