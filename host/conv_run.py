"""Run one convolution layer on a device: the simulated engine (its generated Verilog under
Verilator), or the golden model on the CPU.  Tensors follow the brief's contract."""

import tempfile
from dataclasses import asdict
from pathlib import Path

import numpy as np

from ..rtl.conv.config import EngineConfig
from ..sim.conv_model import conv_layer, output_size
from .conv_link import LayerTensors, layer_words, scatter_results
from .conv_plan import LayerShape, plan_layer, utilization

__all__ = ["run_conv", "DEVICES"]

DEVICES = ("sim", "cpu")


def run_conv(x, w, bias=None, multiplier=None, shift=None, *, stride=1, padding=0, groups=1,
             relu=False, pool=False, residual=None, device="sim", config=None, sim=None):
    """``y`` for an (N, C, H, W) int8 batch, and a dict of what the device reports."""
    if device not in DEVICES:
        raise ValueError(f"device must be one of {', '.join(DEVICES)}, not {device!r}")
    x, w = np.asarray(x), np.asarray(w)
    if x.ndim == 3:
        x = x[None]
    if x.ndim != 4 or w.ndim != 4:
        raise ValueError("input must be (N, C, H, W) or (C, H, W), weights (OC, C/groups, KH, KW)")
    if bias is not None:
        bias = np.asarray(bias)
        if bias.dtype != np.int32:
            raise TypeError(f"bias must be int32, got {bias.dtype}")
    if device == "cpu":
        y = conv_layer(x, w, bias, multiplier, shift, stride, padding, groups, relu, pool,
                       residual)
        return y, {"device": "cpu"}
    if x.dtype != np.int8 or w.dtype != np.int8:
        raise TypeError("the engine takes int8 inputs and weights")
    if multiplier is None or shift is None:
        raise ValueError("the engine's results are int8: give a multiplier and a shift "
                         "(the cpu device returns the int32 accumulators without them)")
    cfg = config or EngineConfig()
    n, c, h, wd = x.shape
    layer = LayerShape("layer", c, h, wd, w.shape[0], (w.shape[2], w.shape[3]), stride,
                       padding, groups, relu=relu, pool=pool, residual=residual is not None)
    output_size(h, w.shape[2], stride, padding)            # a clear error if it does not fit
    plan = plan_layer(layer, cfg)                          # PlanError: what the engine refuses
    tiles = plan.tiles(cfg)
    words, per_image = [], []
    for image in range(n):
        t = LayerTensors(layer, x[image], w, bias, multiplier, shift,
                         None if residual is None else np.asarray(residual)[image])
        parts = layer_words(layer, cfg, tiles, t)
        words += [word for tile_words, _ in parts for word in tile_words]
        per_image.append([count for _, count in parts])
    metrics, results = _simulate(cfg, words, sum(map(sum, per_image)), sim)
    oh = layer.out_h // 2 if pool else layer.out_h
    ow = layer.out_w // 2 if pool else layer.out_w
    y = np.zeros((n, layer.out_channels, oh, ow), np.int8)
    position = 0
    for image in range(n):
        for tile, count in zip(tiles, per_image[image]):
            if count:
                scatter_results(layer, cfg, tile, results[position:position + count], y[image])
                position += count
    cycles = metrics["cycles"]
    return y, {"device": "sim", "config": cfg.as_dict(), "plan": plan.as_dict(),
               "tiles": len(tiles) * n, "predicted_cycles": plan.cycles * n, "cycles": cycles,
               "utilization": round(utilization(layer, cfg, cycles / n), 4)}


def _simulate(cfg, words, n_out, sim):
    from ..gen.blocks import get_block
    from ..sim.runner import run_cocotb
    block = get_block("conv")
    params = block.full_params(asdict(cfg))
    engine = block.build(**params)
    lb = cfg.link_bytes
    with tempfile.TemporaryDirectory(prefix="dlforge-conv-") as tmp:
        words_file = Path(tmp) / "words.bin"
        results_file = Path(tmp) / "results.bin"
        words_file.write_bytes(b"".join(word.to_bytes(lb, "little") for word in words))
        run = run_cocotb(engine, name=block.module_name(params), test_module=block.testbench,
                         params={"config": asdict(cfg), "words": str(words_file),
                                 "results": str(results_file), "n_out": n_out},
                         sim=sim, testcase="stream_words", quiet=True)
        if not run.passed:
            raise RuntimeError(f"the simulated engine failed: {run.failed} "
                               f"(log: {run.test_dir}/sim.log)")
        raw = results_file.read_bytes()
    results = [int.from_bytes(raw[i:i + lb], "little") for i in range(0, len(raw), lb)]
    return run.metrics, results
