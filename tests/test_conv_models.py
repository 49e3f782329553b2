"""Layer lists read off real PyTorch modules."""

import pytest
import torch.nn as nn

from dlforge.host.conv.networks import conv_layers, resnet18, resnet18_layers


def test_resnet18_has_its_twenty_convolutions_and_1_8_gmacs():
    layers = resnet18_layers()
    assert len(layers) == 20
    first = layers[0]
    assert (first.in_channels, first.height, first.out_channels, first.kh, first.stride,
            first.padding) == (3, 224, 64, 7, 2, 3)
    assert sum(layer.macs for layer in layers) == 1_813_561_344     # + 512 000 in the fc layer
    downsample = [layer for layer in layers if layer.name.endswith("downsample.0")]
    assert len(downsample) == 3 and not any(layer.relu for layer in downsample)
    assert sum(layer.residual for layer in layers) == 8
    # The model itself runs: 1000 classes out.
    import torch
    assert resnet18().eval()(torch.zeros(1, 3, 64, 64)).shape == (1, 1000)


def test_grouped_and_unsupported_convolutions():
    model = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.Conv2d(8, 4, 1))
    layers = conv_layers(model, (8, 10, 12))
    assert [(layer.groups, layer.width, layer.out_channels) for layer in layers] == [(8, 12, 8),
                                                                                   (1, 12, 4)]
    with pytest.raises(ValueError, match="dilation"):
        conv_layers(nn.Conv2d(3, 4, 3, dilation=2), (3, 9, 9))


def test_randomise_batch_norms_changes_every_bn_reproducibly():
    import torch
    from dlforge.host.conv.networks import randomise_batch_norms, resnet18
    a, b = randomise_batch_norms(resnet18(10), 3), randomise_batch_norms(resnet18(10), 3)
    bns = [m for m in a.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert len(bns) == 20 and not a.training
    for m in bns:
        assert 0.5 <= m.running_var.min() and m.running_var.max() <= 1.5
        assert m.running_mean.abs().max() <= 0.1 and m.running_mean.abs().max() > 0
    other = [m for m in b.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    for x, y in zip(bns, other):
        for name in ("running_mean", "running_var", "weight", "bias"):
            assert torch.equal(getattr(x, name), getattr(y, name))
