"""Run one convolution layer on a device: any board or simulated board through the host
runtime (the tiles planned for the engine the device reports), or the golden model on the
CPU.  Tensors follow the brief's contract."""

import numpy as np

from dlforge.rtl.conv.config import EngineConfig
from dlforge.rtl.link.protocol import Register
from dlforge.sim.models.conv_model import conv_layer, output_size
from dlforge.host.conv.exchange import conv_exchange
from dlforge.host.conv.link_words import LayerTensors, layer_words, scatter_results
from dlforge.host.conv.plan import LayerShape, plan_layer, utilization
from dlforge.host.device.accelerator import AcceleratorDevice
from dlforge.host.device.cpu import CpuDevice
from dlforge.host.device.open import open_device
from dlforge.host.link.device_string import parse_device

__all__ = ["run_conv", "engine_config", "layer_stream", "layer_results", "exchange_layer"]


def engine_config(device):
    """The EngineConfig of a device's engine, from its registers."""
    array, link = device.read_regs(Register.ARRAY, 2)
    if not array:
        raise ValueError(f"{device.name} has no convolution engine")
    depths = device.read_regs(Register.CONV_WEIGHT_DEPTH, 4)
    return EngineConfig(rows=array & 0xFF, cols=array >> 8 & 0xFF, simd=array >> 16 & 0xFF,
                        operand_bits=array >> 24 & 0xFF, weight_depth=depths[0],
                        input_depth=depths[1], psum_depth=depths[2], link_bytes=link,
                        max_reduction=depths[3])


def run_conv(x, w, bias=None, multiplier=None, shift=None, *, stride=1, padding=0, groups=1,
             relu=False, pool=False, residual=None, device="sim", config=None):
    """``y`` for an (N, C, H, W) int8 batch, and a dict of what the device reports.

    ``device``: a device string or an open device.  ``config``: the engine to build when
    ``device`` is ``sim`` (default: EngineConfig()); other devices report their own."""
    kind = ("cpu" if isinstance(device, CpuDevice) else
            parse_device(device).kind if isinstance(device, str) else None)
    if kind == "cpu" and config is not None:
        raise ValueError("config is for the simulated board; the cpu device has no engine")
    x, w = np.asarray(x), np.asarray(w)
    if x.ndim == 3:
        x = x[None]
    if x.ndim != 4 or w.ndim != 4:
        raise ValueError("input must be (N, C, H, W) or (C, H, W), weights (OC, C/groups, KH, KW)")
    if bias is not None:
        bias = np.asarray(bias)
        if bias.dtype != np.int32:
            raise TypeError(f"bias must be int32, got {bias.dtype}")
    if kind == "cpu":
        y = conv_layer(x, w, bias, multiplier, shift, stride, padding, groups, relu, pool,
                       residual)
        return y, {"device": "cpu"}
    if x.dtype != np.int8 or w.dtype != np.int8:
        raise TypeError("the engine takes int8 inputs and weights")
    if multiplier is None or shift is None:
        raise ValueError("the engine's results are int8: give a multiplier and a shift "
                         "(the cpu device returns the int32 accumulators without them)")
    if kind not in (None, "sim") and config is not None:
        raise ValueError("config chooses the engine of a simulated board built for the run; "
                         f"{device} reports its own engine")
    owned = isinstance(device, str)
    board = open_device(device, conv=config or True) if kind == "sim" else open_device(device)
    try:
        if not isinstance(board, AcceleratorDevice):
            raise ValueError(f"{board.name} cannot run convolution layers")
        return _on_board(board, x, w, bias, multiplier, shift, stride, padding, groups, relu,
                         pool, residual)
    finally:
        if owned:
            board.close()


def layer_stream(cfg, layer, x, w, bias, multiplier, shift, residual, plan=None):
    """The link bytes of a layer for a batch ``x`` (N, C, H, W), the result words each
    image's tiles send back, the tiles and the plan (``plan``: one made before)."""
    plan = plan or plan_layer(layer, cfg)                  # PlanError: what the engine refuses
    tiles = plan.tiles(cfg)
    words, per_image = [], []
    for image in range(len(x)):
        t = LayerTensors(layer, x[image], w, bias, multiplier, shift,
                         None if residual is None else np.asarray(residual)[image])
        parts = layer_words(layer, cfg, tiles, t)
        words += [word for tile_words, _ in parts for word in tile_words]
        per_image.append([count for _, count in parts])
    lb = cfg.link_bytes
    return b"".join(word.to_bytes(lb, "little") for word in words), per_image, tiles, plan


def layer_results(cfg, layer, tiles, per_image, got):
    """The int8 outputs (N, OC, OH', OW') from a layer's result bytes."""
    lb = cfg.link_bytes
    results = [int.from_bytes(got[i:i + lb], "little") for i in range(0, len(got), lb)]
    oh = layer.out_h // 2 if layer.pool else layer.out_h
    ow = layer.out_w // 2 if layer.pool else layer.out_w
    y = np.zeros((len(per_image), layer.out_channels, oh, ow), np.int8)
    position = 0
    for image, counts in enumerate(per_image):
        for tile, count in zip(tiles, counts):
            if count:
                scatter_results(layer, cfg, tile, results[position:position + count], y[image])
                position += count
    return y


def exchange_layer(device, raw, result_words, link_bytes):
    """Send a layer's bytes, return (result bytes, engine cycles, device span cycles): the
    engine's own counter, and the device's span from the first word's arrival to the last
    result's departure (what the layer costs at the device's host interface)."""
    (before,) = device.read_regs(Register.CONV_CYCLES, 1)
    device.open_span()
    got = conv_exchange(device, raw, result_words * link_bytes)
    device_cycles = device.span_cycles()
    (after, error) = device.read_regs(Register.CONV_CYCLES, 1) + device.read_regs(
        Register.CONV_ERROR, 1)
    if error:
        raise RuntimeError(f"{device.name}: the engine reported descriptor error {error}")
    return got, (after - before) & 0xFFFFFFFF, device_cycles


def _on_board(board, x, w, bias, multiplier, shift, stride, padding, groups, relu, pool,
              residual):
    cfg = engine_config(board)
    n, c, h, wd = x.shape
    layer = LayerShape("layer", c, h, wd, w.shape[0], (w.shape[2], w.shape[3]), stride,
                       padding, groups, relu=relu, pool=pool, residual=residual is not None)
    output_size(h, w.shape[2], stride, padding)            # a clear error if it does not fit
    raw, per_image, tiles, plan = layer_stream(cfg, layer, x, w, bias, multiplier, shift,
                                               residual)
    got, cycles, device_cycles = exchange_layer(board, raw, sum(map(sum, per_image)),
                                                cfg.link_bytes)
    y = layer_results(cfg, layer, tiles, per_image, got)
    return y, {"device": board.name, "config": cfg.as_dict(), "plan": plan.as_dict(),
               "tiles": len(tiles) * n, "predicted_cycles": plan.cycles * n, "cycles": cycles,
               "utilization": round(utilization(layer, cfg, cycles / n), 4),
               "device_cycles": device_cycles,
               "device_utilization": round(utilization(layer, cfg, device_cycles / n), 4)}
