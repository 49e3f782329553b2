"""Layer lists of real networks for the convolution engine, read off PyTorch modules.

``resnet18()`` builds torchvision's ResNet-18 architecture (He et al. 2016, BasicBlock
[2, 2, 2, 2]) in plain PyTorch, so no torchvision is needed; :func:`conv_layers` runs a
module once on a dummy input and records every ``Conv2d`` with the input it saw.  The
post-operations follow the block structure: ReLU after every convolution except a shortcut's
downsampling, and the residual add before the second convolution's ReLU.  Batch norms are
folded into the requantisation when a real model is quantised, so they add no operation.
"""

__all__ = ["resnet18", "conv_layers", "resnet18_layers", "randomise_batch_norms"]


def resnet18(num_classes=1000):
    """ResNet-18 (torchvision's layout and layer names), defined once in :mod:`.models`."""
    from dlforge.host.sched.models import resnet18 as build
    return build(num_classes)


def conv_layers(model, input_shape):
    """The model's Conv2d layers in execution order as LayerShape, batch 1."""
    import torch
    import torch.nn as nn
    from dlforge.host.conv.plan import LayerShape

    seen = []
    hooks = [module.register_forward_hook(
        lambda mod, args, out, name=name: seen.append((name, mod, tuple(args[0].shape))))
        for name, module in model.named_modules() if isinstance(module, nn.Conv2d)]
    try:
        with torch.no_grad():
            model.eval()(torch.zeros((1, *input_shape)))
    finally:
        for hook in hooks:
            hook.remove()
    layers = []
    for name, conv, (_, c, h, w) in seen:
        if conv.padding_mode != "zeros" or conv.dilation != (1, 1) or isinstance(conv.padding, str):
            raise ValueError(f"{name}: only zero padding without dilation is supported")
        if conv.stride[0] != conv.stride[1] or conv.padding[0] != conv.padding[1]:
            raise ValueError(f"{name}: only square strides and paddings are supported")
        shortcut = name.endswith("downsample.0")
        layers.append(LayerShape(name, c, h, w, conv.out_channels, conv.kernel_size,
                                 conv.stride[0], conv.padding[0], conv.groups,
                                 relu=not shortcut, residual=name.endswith(".conv2")))
    return layers


def resnet18_layers(size=224):
    return conv_layers(resnet18(), (3, size, size))


def randomise_batch_norms(model, seed=0):
    """Batch-norm statistics and affine parameters drawn at random (means in +-0.1,
    variances and scales in 0.5..1.5, shifts in +-0.1): a freshly initialised model's are
    the identity, which would leave the compiler's folding untested.  Returns the model in
    eval mode."""
    import torch
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                n = mod.num_features
                mod.running_mean.copy_(torch.rand(n, generator=gen) * 0.2 - 0.1)
                mod.running_var.copy_(torch.rand(n, generator=gen) + 0.5)
                mod.weight.copy_(torch.rand(n, generator=gen) + 0.5)
                mod.bias.copy_(torch.rand(n, generator=gen) * 0.2 - 0.1)
    return model.eval()
