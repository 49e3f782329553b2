"""The compiler from torch.export graphs to engine layers: what it fuses, that the fused form
computes what the model computes, and a clear error naming anything it cannot express."""

import numpy as np
import pytest
import torch
import torch.nn as nn

from dlforge.host.conv.compile import (UnsupportedOperator, compile_exported, compile_module,
                                       export_model, run_float)
from dlforge.host.conv.digits import digits_cnn
from dlforge.host.conv.networks import randomise_batch_norms
from dlforge.host.sched.models import resnet18


def _randomise_bn(model):
    return randomise_batch_norms(model)


@pytest.fixture(scope="module")
def resnet():
    torch.manual_seed(0)
    model = _randomise_bn(resnet18(10))
    x = torch.rand(2, 3, 64, 64)
    return model, x, compile_module(model, x[:1])


def test_resnet18_becomes_engine_layers_and_two_host_pools(resnet):
    _, _, net = resnet
    kinds = [(op.kind, op.name) for op in net.ops]
    engine = [name for kind, name in kinds if kind == "engine"]
    assert len(engine) == 21                        # 20 convolutions and the fc
    assert [k for k in kinds if k[0] != "engine"] == [("max_pool", "maxpool"),
                                                      ("global_avg_pool", "avgpool")]
    by_name = {op.name: op for op in net.ops}
    # the 3x3 keeps its accumulators, the shortcut's 1x1 becomes the residual, and the
    # layer runs after it
    conv2, down = by_name["layer2.0.conv2"], by_name["layer2.0.downsample.0"]
    assert conv2.residual == down.output and conv2.relu and not down.relu
    assert net.ops.index(conv2) > net.ops.index(down)
    assert by_name["layer1.0.conv2"].residual == by_name["maxpool"].output
    assert by_name["conv1"].relu and not by_name["fc"].relu
    assert net.shapes[by_name["fc"].output] == (10, 1, 1) and net.flatten_output


def test_the_fused_network_computes_what_the_model_does(resnet):
    model, x, net = resnet
    with torch.no_grad():
        ref = model(x).numpy()
    got = run_float(net, x.numpy()).numpy()
    assert got.shape == ref.shape
    assert np.abs(got - ref).max() < 1e-4 * max(1.0, np.abs(ref).max())


def test_a_flattened_linear_becomes_a_whole_map_convolution():
    torch.manual_seed(1)
    model = _randomise_bn(digits_cnn())
    x = torch.rand(3, 1, 8, 8)
    net = compile_module(model, x[:1])
    ops = net.ops
    assert [op.weight.shape for op in ops] == [(16, 1, 3, 3), (32, 16, 3, 3), (64, 32, 4, 4),
                                               (10, 64, 1, 1)]
    assert ops[1].pool and ops[1].relu and ops[2].relu and not ops[3].relu
    with torch.no_grad():
        assert np.allclose(run_float(net, x.numpy()).numpy(), model(x).numpy(), atol=1e-5)


class _Sigmoid(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return torch.sigmoid(self.conv(x))


class _Double(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        y = self.conv(x)
        return y + y


class _BnTwice(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):
        y = self.conv(x)
        return self.bn(y) + y


@pytest.mark.parametrize("model,match", [
    (_Sigmoid(), "sigmoid"),
    (nn.Sequential(nn.Conv2d(3, 4, 3), nn.AvgPool2d(2)), "avg_pool2d"),
    (nn.Sequential(nn.Conv2d(3, 4, 3, dilation=2)), "dilated"),
    (nn.Sequential(nn.Conv2d(3, 4, (3, 1))), None),          # compiles: a 3x1 kernel
    (_BnTwice(), "batch norm not right after a convolution"),
    (_Double(), "add of a value to itself"),
    (nn.Sequential(nn.ReLU(), nn.Conv2d(3, 4, 3)), "relu that follows no convolution"),
    (nn.Sequential(nn.Conv2d(3, 4, 3, stride=(1, 2))), "not square"),
])
def test_what_cannot_be_expressed_is_named(model, match):
    ep = export_model(model, torch.rand(1, 3, 8, 8))
    if match is None:
        assert compile_exported(ep).ops[0].weight.shape == (4, 3, 3, 1)
        return
    with pytest.raises(UnsupportedOperator, match=match):
        compile_exported(ep)


def test_an_exported_file_compiles_like_the_module(tmp_path):
    torch.manual_seed(2)
    model = _randomise_bn(digits_cnn())
    x = torch.rand(1, 1, 8, 8)
    torch.export.save(export_model(model, x), tmp_path / "m.pt2")
    net = compile_exported(torch.export.load(tmp_path / "m.pt2"))
    with torch.no_grad():
        assert np.allclose(run_float(net, x.numpy()).numpy(), model(x).numpy(), atol=1e-5)
