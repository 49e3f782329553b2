"""Random int8 layers and their expected outputs: the data of the engine's testbenches, of
`dlforge bench device`, of the demo and of the tests, in one place so that each of them
checks the engine against the same golden model (:mod:`dlforge.sim.models.conv_model`)."""

import numpy as np

from dlforge.host.conv.link_words import LayerTensors
from dlforge.sim.models.conv_model import conv_layer, max_pool2, requantize

__all__ = ["random_tensors", "expected_output"]


def random_tensors(layer, cfg, rng):
    """int8 tensors, and a requantisation that keeps typical outputs inside int8."""
    lo, hi = -(1 << (cfg.operand_bits - 1)), 1 << (cfg.operand_bits - 1)
    if cfg.operand_bits == 16:       # keep the reduction inside the contract's int32
        lo, hi = -256, 256
    dtype = np.int8 if cfg.operand_bits == 8 else np.int16
    x = rng.integers(lo, hi, (layer.in_channels, layer.height, layer.width)).astype(dtype)
    w = rng.integers(lo, hi, (layer.out_channels, layer.group_in, layer.kh, layer.kw)).astype(dtype)
    bias = rng.integers(-(1 << 20), 1 << 20, layer.out_channels).astype(np.int32)
    spread = (hi / 1.7) ** 2 * np.sqrt(layer.group_in * layer.kh * layer.kw) + 1
    shift = rng.integers(24, 34, layer.out_channels)
    mult = np.clip((64.0 * 2.0 ** shift / spread) * rng.uniform(0.5, 2, layer.out_channels),
                   1, 2 ** 31 - 1).astype(np.int64)
    residual = (rng.integers(-128, 128, (layer.out_channels, layer.out_h, layer.out_w))
                .astype(np.int8) if layer.residual else None)
    return LayerTensors(layer, x, w, bias, mult, shift, residual)


def expected_output(layer, t):
    x = t.x[None].astype(np.int8) if t.x.dtype == np.int8 else t.x[None]
    if t.x.dtype != np.int8:         # the golden model takes int8; 16-bit goes by hand
        import torch
        import torch.nn.functional as F
        acc = F.conv2d(torch.from_numpy(t.x[None].astype(np.float64)),
                       torch.from_numpy(t.w.astype(np.float64)),
                       torch.from_numpy(t.bias.astype(np.float64)), stride=layer.stride,
                       padding=layer.padding, groups=layer.groups).numpy().astype(np.int64)
        y = requantize(acc, t.multiplier, t.shift,
                       None if t.residual is None else t.residual[None], layer.relu)
        return (max_pool2(y) if layer.pool else y)[0]
    return conv_layer(x, t.w, t.bias.astype(np.int32), t.multiplier, t.shift, layer.stride,
                      layer.padding, layer.groups, layer.relu, layer.pool,
                      None if t.residual is None else t.residual[None])[0]
