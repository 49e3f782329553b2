"""The network program's host operations (host/conv/program.py) against PyTorch, its input
quantisation's rounding, and the golden network model chaining a program's values as the
engine layers define them."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from dlforge.host.conv.program import (EngineLayer, HostOp, NetworkProgram, global_avg_pool,
                                      max_pool, quantize_input)
from dlforge.sim.models.conv_model import conv_layer
from dlforge.sim.models.network_model import run_network


@pytest.mark.parametrize("kernel,stride,padding", [(3, 2, 1), (2, 2, 0), (3, 1, 1), (5, 3, 2)])
def test_max_pool_is_torchs(kernel, stride, padding):
    y = np.random.default_rng(kernel).integers(-128, 128, (2, 3, 11, 9)).astype(np.int8)
    ref = F.max_pool2d(torch.as_tensor(y, dtype=torch.float32), kernel, stride, padding)
    assert np.array_equal(max_pool(y, kernel, stride, padding), ref.numpy().astype(np.int8))


def test_max_pool_refuses_what_does_not_fit():
    with pytest.raises(ValueError, match="does not fit"):
        max_pool(np.zeros((1, 1, 2, 2), np.int8), 5, 1, 0)


def test_global_avg_pool_rounds_half_up():
    y = np.array([1, 2, 0, 0, -1, -2, 0, 0, 127, 127, 126, 127], np.int8).reshape(3, 1, 2, 2)
    # means 0.75, -0.75, 126.75; and exact halves: 0.5 -> 1, -0.5 -> 0
    assert global_avg_pool(y).ravel().tolist() == [1, -1, 127]
    halves = np.array([1, 0, -1, 0], np.int8).reshape(2, 1, 1, 2)
    assert global_avg_pool(halves).ravel().tolist() == [1, 0]


def test_quantize_input_rounds_half_up_and_saturates():
    x = np.array([0.5, 1.5, -0.5, -1.5, 0.49, 300, -300], np.float32).reshape(1, 1, 1, 7)
    assert quantize_input(x, 1.0).ravel().tolist() == [1, 2, 0, -1, 0, 127, -128]


def _program(rng):
    """conv (relu) -> conv with the first as residual -> 3x3 host pool -> global pool -> fc."""
    def layer(name, src, out, oc, c, k, pad, **kw):
        return EngineLayer(name, src, out, rng.integers(-20, 20, (oc, c, k, k)).astype(np.int8),
                           rng.integers(-500, 500, oc).astype(np.int32),
                           rng.integers(1 << 20, 1 << 22, oc), np.full(oc, 30), padding=pad,
                           **kw)
    ops = [layer("a", 0, 1, 8, 3, 3, 1, relu=True),
           layer("b", 1, 2, 8, 8, 3, 1, relu=True, residual=1),
           HostOp("pool", "max_pool", 2, 3, 3, 2, 1),
           HostOp("avg", "global_avg_pool", 3, 4),
           layer("fc", 4, 5, 5, 8, 1, 0)]
    shapes = {0: (3, 9, 9), 1: (8, 9, 9), 2: (8, 9, 9), 3: (8, 5, 5), 4: (8, 1, 1),
              5: (5, 1, 1)}
    return NetworkProgram(0.1, 0.2, ops, shapes, 5)


def test_run_network_chains_the_layers():
    rng = np.random.default_rng(1)
    prog = _program(rng)
    x = rng.integers(-128, 128, (2, 3, 9, 9)).astype(np.int8)
    y, values = run_network(prog, x, keep=True)
    a, b, fc = prog.ops[0], prog.ops[1], prog.ops[4]
    v1 = conv_layer(x, a.weight, a.bias, a.multiplier, a.shift, padding=1, relu=True)
    v2 = conv_layer(v1, b.weight, b.bias, b.multiplier, b.shift, padding=1, relu=True,
                    residual=v1)
    v4 = global_avg_pool(max_pool(v2, 3, 2, 1))
    ref = conv_layer(v4, fc.weight, fc.bias, fc.multiplier, fc.shift).reshape(2, 5)
    assert np.array_equal(values[2], v2) and np.array_equal(y, ref)
    assert y.dtype == np.int8 and len(np.unique(v2)) > 10


def test_run_network_refuses_a_wrong_input():
    prog = _program(np.random.default_rng(2))
    with pytest.raises(TypeError, match="int8"):
        run_network(prog, np.zeros((1, 3, 9, 9), np.float32))
    with pytest.raises(ValueError, match="input shape"):
        run_network(prog, np.zeros((1, 3, 8, 9), np.int8))
