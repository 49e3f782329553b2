"""Upsampling against a loop-by-loop transcription of libjpeg-turbo's jdsample.c."""

import numpy as np
import pytest

from dlforge.sim.models.jpeg_upsample import upsample


def h2v1_fancy_c(row):
    """h2v1_fancy_upsample for one row, with the SIMD path's dummy sample after the last."""
    x = list(row) + [row[-1]]
    out = [x[0], (x[0] * 3 + x[1] + 2) >> 2]
    for i in range(1, len(row) - 1):
        out += [(3 * x[i] + x[i - 1] + 1) >> 2, (3 * x[i] + x[i + 1] + 2) >> 2]
    i = len(row) - 1
    out += [(3 * x[i] + x[i - 1] + 1) >> 2, x[i]]
    return out


def h2v2_fancy_c(plane):
    rows, cols = plane.shape
    out = np.zeros((2 * rows, 2 * cols), dtype=np.int64)
    for r in range(rows):
        for v, other in ((0, max(r - 1, 0)), (1, min(r + 1, rows - 1))):
            colsum = [3 * int(plane[r, c]) + int(plane[other, c]) for c in range(cols)]
            colsum.append(colsum[-1])
            line = [(colsum[0] * 4 + 8) >> 4, (colsum[0] * 3 + colsum[1] + 7) >> 4]
            for c in range(1, cols - 1):
                line += [(colsum[c] * 3 + colsum[c - 1] + 8) >> 4,
                         (colsum[c] * 3 + colsum[c + 1] + 7) >> 4]
            c = cols - 1
            line += [(colsum[c] * 3 + colsum[c - 1] + 8) >> 4, (colsum[c] * 4 + 7) >> 4]
            out[2 * r + v] = line
    return out


def h1v2_fancy_c(plane):
    rows = plane.shape[0]
    out = []
    for r in range(rows):
        out.append((3 * plane[r] + plane[max(r - 1, 0)] + 1) >> 2)
        out.append((3 * plane[r] + plane[min(r + 1, rows - 1)] + 2) >> 2)
    return np.array(out)


@pytest.mark.parametrize("width", [3, 4, 5, 8, 17, 40])
def test_h2v1_fancy(width):
    plane = np.random.default_rng(width).integers(0, 256, (3, width))
    expected = np.array([h2v1_fancy_c(row) for row in plane])
    assert (upsample(plane, 2, 1, "fancy") == expected).all()


@pytest.mark.parametrize("shape", [(1, 3), (2, 5), (5, 3), (9, 16), (4, 33)])
def test_h2v2_fancy(shape):
    plane = np.random.default_rng(shape[1]).integers(0, 256, shape)
    assert (upsample(plane, 2, 2, "fancy") == h2v2_fancy_c(plane)).all()


@pytest.mark.parametrize("shape", [(1, 1), (2, 3), (7, 4)])
def test_h1v2_fancy(shape):
    plane = np.random.default_rng(7).integers(0, 256, shape)
    assert (upsample(plane, 1, 2, "fancy") == h1v2_fancy_c(plane)).all()


@pytest.mark.parametrize("factors", [(2, 1), (2, 2)])
def test_narrow_components_replicate(factors):
    """libjpeg-turbo uses plain replication when the component is at most 2 samples wide."""
    plane = np.array([[10, 200], [40, 90], [0, 255]])
    assert (upsample(plane, *factors, "fancy") == upsample(plane, *factors, "fast")).all()


def test_fast_is_replication_and_modes_are_checked():
    plane = np.array([[1, 2], [3, 4]])
    assert upsample(plane, 2, 2, "fast").tolist() == [[1, 1, 2, 2], [1, 1, 2, 2],
                                                      [3, 3, 4, 4], [3, 3, 4, 4]]
    with pytest.raises(ValueError):
        upsample(plane, 2, 2, "bilinear")
