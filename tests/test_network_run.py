"""Whole networks on a device: the simulated board's engine gives the golden network
model's outputs bit for bit, in both integrations, with the device's cycles and the host's
time reported; what cannot run is refused before anything is sent."""

import numpy as np
import pytest
import torch
import torch.nn as nn

from dlforge.host.conv.compile import compile_module
from dlforge.host.conv.digits import train_digits_cnn
from dlforge.host.conv.network_run import layer_shape, run_program
from dlforge.host.conv.plan import PlanError
from dlforge.host.conv.program import quantize_input
from dlforge.host.conv.quantize import quantize
from dlforge.host.device.open import open_device
from dlforge.host.sched.models import small_resnet
from dlforge.rtl.link.protocol import Register
from dlforge.sim.models.network_model import run_network

# The default simulated board, shared with the suite's other engine tests.
pytestmark = [pytest.mark.xdist_group("sim_board"), pytest.mark.slow]


@pytest.fixture(scope="module")
def board():
    with open_device("sim", conv=True) as device:
        yield device


def _program(model, x):
    return quantize(compile_module(model, torch.as_tensor(x[:1])), x)


def test_digits_cnn_bit_exact_in_both_integrations(board):
    model, (x_train, _, x_test, _) = train_digits_cnn()
    program = _program(model, x_train[:256])
    xq = quantize_input(x_test[:6], program.input_scale)
    golden = run_network(program, xq)
    y, pipelined = run_program(program, xq, board, "pipelined", clocks_mhz=(44.3, 250))
    y_naive, naive = run_program(program, xq, board, "naive", clocks_mhz=(44.3, 250))
    assert np.array_equal(y, golden) and np.array_equal(y_naive, golden)
    assert len(np.unique(golden)) > 20
    assert [r["exchanges"] for r in pipelined["layers"]] == [1, 1, 1, 1]
    assert [r["exchanges"] for r in naive["layers"]] == [6, 6, 6, 6]
    assert pipelined["macs"] == naive["macs"] == 6 * sum(
        layer_shape(program, op).macs for op in program.ops)
    for report in (pipelined, naive):
        assert 0 < report["engine_cycles"] <= report["device_cycles"]
        assert report["host_s"] > 0
        at = report["at_clock"][0]
        assert at["end_to_end_cycles"] > report["device_cycles"]
        assert 0 < at["utilization"] < report["device_utilization"]
    # per image, one exchange per layer costs the device more than one per batch
    assert naive["device_cycles"] > pipelined["device_cycles"]
    cpu_y, cpu = run_program(program, xq, "cpu")
    assert np.array_equal(cpu_y, golden) and cpu["mode"] == "golden"


def test_a_resnet_with_residuals_and_host_pools_bit_exact(board):
    torch.manual_seed(4)
    model = small_resnet(10).eval()
    x = torch.rand(3, 3, 32, 32).numpy()
    program = _program(model, x)
    assert {op.kind for op in program.ops} == {"engine", "max_pool", "global_avg_pool"}
    xq = quantize_input(x, program.input_scale)
    y, report = run_program(program, xq, board)
    assert np.array_equal(y, run_network(program, xq))
    assert report["device_utilization"] > 0


def test_what_cannot_run_is_refused_before_anything_is_sent(board):
    torch.manual_seed(5)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Flatten(),
                          nn.Linear(4 * 9 * 9, 10)).eval()     # a 9x9 kernel: too large
    x = torch.rand(2, 3, 9, 9).numpy()
    program = _program(model, x)
    xq = quantize_input(x, program.input_scale)
    (before,) = board.read_regs(Register.CONV_CYCLES, 1)
    with pytest.raises(PlanError, match="kernel 9x9"):
        run_program(program, xq, board)
    assert board.read_regs(Register.CONV_CYCLES, 1) == [before]
    with pytest.raises(TypeError, match="int8"):
        run_program(program, x, board)
    with pytest.raises(ValueError, match="input shape"):
        run_program(program, xq[:, :, :8], board)
    with pytest.raises(ValueError, match="unknown mode"):
        run_program(program, xq, board, "eager")
    # the board still runs the next network
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU()).eval()
    program = _program(model, x)
    xq = quantize_input(x, program.input_scale)
    assert np.array_equal(run_program(program, xq, board)[0], run_network(program, xq))


@pytest.mark.parametrize("device_cycles,host_s,expected", [
    # the host hides behind the device but for one image's share
    (1000, 2e-6, 1000 + 200 / 4 + 300),
    # the host is the slower side: its time binds
    (100, 2e-6, 200 + 200 / 4 + 300),
])
def test_the_pipelined_host_rule(device_cycles, host_s, expected):
    from dlforge.host.conv.network_run import _end_to_end
    layers = [{"kind": "engine", "device_cycles": device_cycles, "host_s": host_s},
              {"kind": "max_pool", "device_cycles": 0, "host_s": 1e-6}]
    # 100 MHz: the layer's host time is 200 cycles; the rest of the host's 5 us (300
    # cycles: the pool and the loop) is added in full
    assert _end_to_end(layers, "pipelined", 5e-6, 4, 100e6) == pytest.approx(expected)
    assert _end_to_end(layers, "naive", 5e-6, 4, 100e6) == pytest.approx(device_cycles + 500)
