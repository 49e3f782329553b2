"""The networks the GPU scheduler trains and benchmarks, written here so nothing is downloaded.

``resnet18`` and ``resnet50`` follow torchvision's ImageNet layout (He et al. 2016: a 7x7
stride-2 stem, max pool, four stages, global average pool, one ``fc``), with the same module
names (``layer1.0.conv2``, ``layer2.0.downsample.0``) and initialisation, so traces and
checkpoints read the same; the input size and the number of classes are free.  ``small`` is a
narrow two-stage ResNet for tests, ``mlp`` a plain multi-layer perceptron, and ``shared`` a
network whose weights are shared between two layers and whose one layer is used twice: the
cases a hand-written backward schedule gets wrong first.
"""

import torch
import torch.nn as nn

__all__ = ["resnet18", "resnet50", "small_resnet", "mlp", "shared_weights_net", "build_model",
           "MODELS", "ResNet", "BasicBlock", "Bottleneck"]


class BasicBlock(nn.Module):
    """Two 3x3 convolutions and the shortcut (ResNet-18/34)."""
    expansion = 1

    def __init__(self, cin, width, stride=1):
        super().__init__()
        cout = width * self.expansion
        self.conv1 = nn.Conv2d(cin, width, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = _shortcut(cin, cout, stride)

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return self.relu(y + (x if self.downsample is None else self.downsample(x)))


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (carrying the stride, as torchvision's v1.5 does), 1x1 expand."""
    expansion = 4

    def __init__(self, cin, width, stride=1):
        super().__init__()
        cout = width * self.expansion
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = _shortcut(cin, cout, stride)

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return self.relu(y + (x if self.downsample is None else self.downsample(x)))


def _shortcut(cin, cout, stride):
    if stride == 1 and cin == cout:
        return None
    return nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))


class ResNet(nn.Module):
    """The ImageNet ResNet; ``widths`` per stage (64, 128, 256, 512 for the real ones)."""

    def __init__(self, block, layers, num_classes=1000, widths=(64, 128, 256, 512), stem=64):
        super().__init__()
        self.conv1 = nn.Conv2d(3, stem, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(stem)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        cin = stem
        self.stages = len(layers)
        for n, (count, width) in enumerate(zip(layers, widths), start=1):
            blocks = []
            for i in range(count):
                blocks.append(block(cin, width, 2 if (i == 0 and n > 1) else 1))
                cin = width * block.expansion
            setattr(self, f"layer{n}", nn.Sequential(*blocks))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        for n in range(1, self.stages + 1):
            x = getattr(self, f"layer{n}")(x)
        return self.fc(self.avgpool(x).flatten(1))


def resnet18(num_classes=1000):
    return ResNet(BasicBlock, [2, 2, 2, 2], num_classes)


def resnet50(num_classes=1000):
    return ResNet(Bottleneck, [3, 4, 6, 3], num_classes)


def small_resnet(num_classes=10):
    """Two narrow stages of basic blocks, a downsampling shortcut in the second: every kind
    of layer ResNet-18 has, at a size a test trains in a fraction of a second."""
    return ResNet(BasicBlock, [1, 1], num_classes, widths=(8, 16), stem=8)


def mlp(in_features=3 * 32 * 32, hidden=(256, 128), num_classes=10):
    """Flatten, then Linear + ReLU layers (biases included)."""
    layers, width = [nn.Flatten()], in_features
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, num_classes))
    return nn.Sequential(*layers)


class SharedWeightsNet(nn.Module):
    """A convolution stem, then ``shared_a`` and ``shared_b`` (two Linear modules holding
    the same weight Parameter) and ``twice`` (one Linear applied two times)."""

    def __init__(self, in_channels=3, num_classes=10, width=32):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, 8, 3, 2, 1)
        self.pool = nn.AdaptiveAvgPool2d(4)
        self.proj = nn.Linear(8 * 16, width)
        self.shared_a = nn.Linear(width, width)
        self.shared_b = nn.Linear(width, width, bias=False)
        self.shared_b.weight = self.shared_a.weight
        self.twice = nn.Linear(width, width)
        self.fc = nn.Linear(width, num_classes)

    def forward(self, x):
        x = torch.relu(self.proj(self.pool(torch.relu(self.conv(x))).flatten(1)))
        x = torch.relu(self.shared_a(x))
        x = torch.relu(self.twice(x))
        x = torch.tanh(self.shared_b(x))
        x = torch.relu(self.twice(x))
        return self.fc(x)


def shared_weights_net(num_classes=10):
    return SharedWeightsNet(num_classes=num_classes)


MODELS = ("resnet18", "resnet50", "small", "mlp", "shared")


def build_model(name, num_classes=1000, image_size=224):
    """One of :data:`MODELS` for RGB images of ``image_size`` pixels a side."""
    if name == "resnet18":
        return resnet18(num_classes)
    if name == "resnet50":
        return resnet50(num_classes)
    if name == "small":
        return small_resnet(num_classes)
    if name == "mlp":
        return mlp(3 * image_size * image_size, num_classes=num_classes)
    if name == "shared":
        return shared_weights_net(num_classes)
    raise ValueError(f"unknown model {name!r}; one of {', '.join(MODELS)}")
