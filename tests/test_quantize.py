"""Post-training quantisation: the requantisation parameters, the scales the engine's fused
add needs, and accuracy on real data (scikit-learn's digits) within 1 point of the float
model, with the int8 golden network model as the judge."""

import numpy as np
import pytest
import torch

from dlforge.host.conv.compile import compile_module, run_float
from dlforge.host.conv.digits import top1, train_digits_cnn
from dlforge.host.conv.program import quantize_input
from dlforge.host.conv.quantize import quantize, requant_parameters
from dlforge.host.sched.models import small_resnet
from dlforge.sim.models.network_model import run_network


def test_requant_parameters_are_31_bit_and_close():
    factors = np.array([1e-9, 3.7e-5, 0.00390625, 0.3, 0.99999999999, 1.0, 5.5, 2.0 ** 29])
    m, s = requant_parameters(factors)
    assert np.all((m > 0) & (m < 2 ** 31)) and np.all((s >= 1) & (s <= 62))
    assert np.allclose(m / 2.0 ** s, factors, rtol=2 ** -29)
    assert (m[2], s[2]) == (2 ** 30, 38)                   # 1/256 exactly
    with pytest.raises(ValueError, match="beyond"):
        requant_parameters(np.array([2.0 ** 31]))
    with pytest.raises(ValueError, match="positive"):
        requant_parameters(np.array([0.0]))


@pytest.fixture(scope="module")
def digits():
    return train_digits_cnn()


def test_digits_int8_within_one_point_of_float(digits):
    model, (x_train, _, x_test, y_test) = digits
    with torch.no_grad():
        float_top1 = top1(model(torch.as_tensor(x_test)), y_test)
    net = compile_module(model, torch.as_tensor(x_train[:1]))
    program = quantize(net, x_train[:256])
    logits = run_network(program, quantize_input(x_test, program.input_scale))
    int8_top1 = top1(logits, y_test)
    assert float_top1 > 0.95                               # the model learned the digits
    assert int8_top1 >= float_top1 - 0.01
    assert all(op.weight.dtype == np.int8 and op.bias.dtype == np.int32
               for op in program.engine_layers())


def test_residuals_share_their_layers_scale_and_the_int8_net_agrees():
    torch.manual_seed(3)
    model = small_resnet(10).eval()
    x = torch.rand(16, 3, 32, 32)
    net = compile_module(model, x[:1])
    program = quantize(net, x.numpy())
    residual = [op for op in program.engine_layers() if op.residual is not None]
    assert residual
    for op in residual:
        assert program.scales[op.output] == program.scales[op.residual]
    with torch.no_grad():
        ref = model(x).numpy()
    got = run_network(program, quantize_input(x.numpy(), program.input_scale))
    got = got * program.output_scale
    assert np.corrcoef(got.ravel(), ref.ravel())[0, 1] > 0.98
    assert np.abs(got - ref).max() < 0.1 * np.abs(ref).max()


def test_calibration_needs_data(digits):
    model, (x_train, *_) = digits
    net = compile_module(model, torch.as_tensor(x_train[:1]))
    with pytest.raises(ValueError, match="at least one"):
        quantize(net, x_train[:0])
    assert run_float(net, x_train[:2]).shape == (2, 10)
