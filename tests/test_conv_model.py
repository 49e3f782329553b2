"""The convolution golden model against PyTorch (accumulators) and against the contract's
requantisation written out independently here with Python integers."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from dlforge.sim.models.conv_model import accumulate, conv_layer, max_pool2, output_size, requantize


def _rand_layer(rng, n, c, h, w, oc, k, groups):
    x = rng.integers(-128, 128, (n, c, h, w), dtype=np.int8)
    wt = rng.integers(-128, 128, (oc, c // groups, k, k), dtype=np.int8)
    bias = rng.integers(-(1 << 20), 1 << 20, oc, dtype=np.int32)
    return x, wt, bias


CASES = [  # n, c, h, w, oc, k, stride, padding, groups
    (1, 3, 17, 13, 8, 7, 2, 3, 1),      # a ResNet stem in small
    (2, 16, 9, 11, 12, 3, 1, 1, 1),
    (1, 16, 9, 9, 16, 3, 2, 1, 16),     # depthwise, stride 2
    (1, 24, 8, 8, 12, 1, 1, 0, 3),      # grouped pointwise
    (1, 8, 6, 5, 4, 5, 1, 2, 2),
    (1, 64, 4, 4, 10, 4, 1, 0, 1),      # fully connected as a 4x4 convolution
    (1, 5, 7, 7, 3, 6, 2, 0, 1),        # even kernel, no padding
    (3, 4, 1, 1, 6, 1, 1, 0, 1),        # 1x1 images
]


@pytest.mark.parametrize("case", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_accumulators_equal_pytorch_float64(case):
    n, c, h, w, oc, k, stride, padding, groups = case
    rng = np.random.default_rng(sum(case))
    x, wt, bias = _rand_layer(rng, n, c, h, w, oc, k, groups)
    got = accumulate(x, wt, bias, stride, padding, groups)
    want = F.conv2d(torch.from_numpy(x).double(), torch.from_numpy(wt).double(),
                    torch.from_numpy(bias).double(), stride=stride, padding=padding,
                    groups=groups)
    assert got.shape == want.shape == (n, oc, output_size(h, k, stride, padding),
                                       output_size(w, k, stride, padding))
    assert np.array_equal(got, want.numpy().astype(np.int64))


def _requant_by_hand(acc, m, s, r, relu):
    """The contract's formula with unbounded Python integers, element by element."""
    q = (int(acc) * int(m) + (1 << (int(s) - 1))) >> int(s)   # Python's >> floors
    y = q + int(r)
    return min(127, max(0 if relu else -128, y))


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("residual", [False, True])
def test_requantisation_equals_the_formula(relu, residual):
    rng = np.random.default_rng(5 + relu + 2 * residual)
    oc = 16
    acc = rng.integers(-(1 << 31), 1 << 31, (2, oc, 5, 7), dtype=np.int64)
    acc[0, :, 0, :2] = [-(1 << 31), (1 << 31) - 1]                    # the extremes
    m = rng.integers(1, 1 << 31, oc, dtype=np.int64)
    m[:2] = [1, (1 << 31) - 1]
    s = rng.integers(1, 63, oc)
    s[:3] = [1, 62, 31]
    r = rng.integers(-128, 128, acc.shape, dtype=np.int8) if residual else None
    got = requantize(acc, m, s, r, relu)
    want = np.vectorize(_requant_by_hand)(acc, m[None, :, None, None], s[None, :, None, None],
                                          r if residual else 0, relu)
    assert got.dtype == np.int8 and np.array_equal(got, want)


def test_rounding_is_half_up_for_negative_values():
    acc = np.array([-3, -2, -1, 1, 2, 3], dtype=np.int64).reshape(1, 6, 1, 1)
    # x / 2 rounded half up: -1.5 -> -1, -1 -> -1, -0.5 -> 0, 0.5 -> 1, 1 -> 1, 1.5 -> 2
    got = requantize(acc, np.ones(6, np.int64), np.ones(6, np.int64))
    assert got.ravel().tolist() == [-1, -1, 0, 1, 1, 2]


def test_whole_layer_with_pool_equals_pytorch():
    rng = np.random.default_rng(9)
    x, wt, bias = _rand_layer(rng, 1, 8, 11, 10, 6, 3, 1)
    m = rng.integers(1 << 20, 1 << 24, 6)
    s = np.full(6, 30)
    y = conv_layer(x, wt, bias, m, s, padding=1, relu=True, pool=True)
    acc = F.conv2d(torch.from_numpy(x).double(), torch.from_numpy(wt).double(),
                   torch.from_numpy(bias).double(), padding=1).numpy().astype(np.int64)
    q = np.vectorize(_requant_by_hand)(acc, m[None, :, None, None], s[None, :, None, None], 0,
                                       True).astype(np.int8)
    want = F.max_pool2d(torch.from_numpy(q).float(), 2).numpy().astype(np.int8)
    assert y.shape == (1, 6, 5, 5) and np.array_equal(y, want)
    assert np.array_equal(max_pool2(q), want)


def test_contract_violations_are_clear_errors():
    x = np.zeros((1, 4, 3, 3), np.int8)
    w = np.zeros((2, 4, 3, 3), np.int8)
    with pytest.raises(TypeError, match="int8"):
        accumulate(x.astype(np.int16), w)
    with pytest.raises(ValueError, match="groups"):
        accumulate(x, np.zeros((2, 3, 3, 3), np.int8))
    with pytest.raises(ValueError, match="does not fit"):
        accumulate(x, np.zeros((2, 4, 5, 5), np.int8))
    with pytest.raises(OverflowError, match="int32"):
        accumulate(np.full((1, 4, 3, 3), -128, np.int8), np.full((2, 4, 3, 3), -128, np.int8),
                   np.full(2, (1 << 31) - 1, np.int32))
    acc = np.zeros((1, 2, 1, 1), np.int64)
    with pytest.raises(ValueError, match="multiplier"):
        requantize(acc, np.array([0, 1]), np.array([1, 1]))
    with pytest.raises(ValueError, match="shift"):
        requantize(acc, np.array([1, 1]), np.array([1, 63]))
    with pytest.raises(ValueError, match="both"):
        conv_layer(x, w, multiplier=np.ones(2, np.int64))
