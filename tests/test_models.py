"""The scheduler's networks: torchvision's ResNet layout and sizes, free input size and class
count, and the shared-weights net really sharing."""

import pytest
import torch

from dlforge.host.conv import networks as conv_models
from dlforge.host.sched.models import (MODELS, build_model, mlp, resnet18, resnet50,
                                       shared_weights_net)

torch.set_num_threads(1)


def _count(model):
    return sum(p.numel() for p in model.parameters())


def test_resnet_parameter_counts_are_torchvisions():
    # torchvision.models.resnet18() / resnet50(): 11,689,512 and 25,557,032 parameters.
    assert _count(resnet18()) == 11_689_512
    assert _count(resnet50()) == 25_557_032


def test_resnet_layer_names_are_torchvisions():
    # the conv engine's layer lists (conv_models) name layers the way torchvision does
    names18 = set(dict(resnet18().named_modules()))
    assert {"conv1", "layer1.0.conv2", "layer2.0.downsample.0", "layer4.1.conv2",
            "fc"} <= names18
    assert {layer.name for layer in conv_models.resnet18_layers(64)} <= names18
    names = set(dict(resnet50().named_modules()))
    assert {"layer1.0.conv3", "layer4.2.bn3", "layer2.0.downsample.0", "fc"} <= names


@pytest.mark.parametrize("name, size", [("resnet18", 64), ("small", 40), ("mlp", 16),
                                        ("shared", 24)])
def test_any_input_size_and_class_count(name, size):
    model = build_model(name, num_classes=7, image_size=size)
    assert model(torch.zeros(2, 3, size, size)).shape == (2, 7)


def test_shared_net_shares_a_weight_and_reuses_a_layer():
    net = shared_weights_net()
    assert net.shared_a.weight is net.shared_b.weight
    calls = []
    net.twice.register_forward_hook(lambda *a: calls.append(1))
    net(torch.zeros(1, 3, 16, 16))
    assert len(calls) == 2
    names = [n for n, _ in net.named_parameters()]
    assert "shared_b.weight" not in names and "shared_a.weight" in names


def test_mlp_layers():
    model = mlp(12, hidden=(5,), num_classes=3)
    assert [type(m).__name__ for m in model] == ["Flatten", "Linear", "ReLU", "Linear"]


def test_unknown_model_is_refused():
    with pytest.raises(ValueError, match="resnet18"):
        build_model("vgg16")
    assert set(MODELS) == {"resnet18", "resnet50", "small", "mlp", "shared"}
