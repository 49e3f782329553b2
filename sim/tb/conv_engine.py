"""cocotb testbench of the convolution engine: layers planned by the host, packed into link
words, computed by the RTL and compared bit for bit with the golden model.

Parameters (``DLFORGE_TB_PARAMS``):
  config      the EngineConfig fields the Verilog was generated with
  layers      list of LayerShape fields (dicts), or "resnet18" (optionally ``names``: a subset)
  plans       optional {layer name: {"th", "tw", "tic", "order"}} to force a tiling
  seed        tensors' random seed
  valid_prob  probability an input word is offered in a clock
  ready_prob  probability the output is ready in a clock
  check       compare with the golden model (default true)
Metrics: per layer MACs, tiles, predicted and measured cycles (the engine's ``cycles``
counter), utilisation; the mean utilisation over the layers after the first.
"""

import json
import os
import random
from pathlib import Path

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, ReadOnly

from dlforge.host.conv.link_words import layer_words, scatter_results
from dlforge.host.conv.random_layer import expected_output, random_tensors
from dlforge.host.conv.plan import LayerShape, Plan, plan_layer, predict_cycles, utilization
from dlforge.rtl.conv.config import EngineConfig
from dlforge.rtl.conv.descriptor import DescriptorError, pack_descriptor
from dlforge.sim.tb.streams import reset, send_beats, start, stream_through

PARAMS = json.loads(os.environ.get("DLFORGE_TB_PARAMS", "{}"))


def _config():
    return EngineConfig(**PARAMS.get("config", {}))


def _layers():
    spec = PARAMS.get("layers", [])
    if spec == "resnet18":
        from dlforge.host.conv.networks import resnet18_layers
        layers = resnet18_layers()
        names = PARAMS.get("names")
        return [layer for layer in layers if names is None or layer.name in names]
    return [LayerShape(**({"kernel": tuple(d["kernel"])} | {k: v for k, v in d.items()
                                                               if k != "kernel"})
                       if isinstance(d.get("kernel"), list) else d) for d in spec]


async def read_counter(dut, name):
    await ReadOnly()
    value = int(getattr(dut, name).value)
    await FallingEdge(dut.clk)
    return value


@cocotb.test()
async def run_layers(dut):
    """Every layer through the engine, each output equal to the golden model's."""
    cfg = _config()
    await start(dut, sources=("i",), sinks=("o",))
    rng = np.random.default_rng(PARAMS.get("seed", 1))
    flow = random.Random(PARAMS.get("seed", 1))
    check = PARAMS.get("check", True)
    rows = []
    for layer in _layers():
        forced = PARAMS.get("plans", {}).get(layer.name)
        if forced:
            from dlforge.host.conv.plan import tiles_for
            tiles = tiles_for(layer, cfg, forced["th"], forced["tw"], forced["tic"],
                              forced["order"])
            plan = Plan(layer, forced["th"], forced["tw"], forced["tic"], forced["order"],
                        predict_cycles(layer, cfg, tiles))
        else:
            plan = plan_layer(layer, cfg)
        tiles = plan.tiles(cfg)
        t = random_tensors(layer, cfg, rng)
        parts = layer_words(layer, cfg, tiles, t)
        words = [w for tile_in, _ in parts for w in tile_in]
        n_out = sum(n for _, n in parts)
        before = await read_counter(dut, "cycles")
        got, stats = await stream_through(
            dut, words, n_out, valid_prob=PARAMS.get("valid_prob", 1.0),
            ready_prob=PARAMS.get("ready_prob", 1.0), rng=flow,
            max_cycles=4 * plan.cycles + 20 * len(words) + 10_000)
        # Let the engine finish its bookkeeping, then read its own count.
        for _ in range(4):
            await FallingEdge(dut.clk)
        cycles = await read_counter(dut, "cycles") - before
        assert not int(dut.error.value), f"{layer.name}: engine error {int(dut.error_code.value)}"
        oh = layer.out_h // 2 if layer.pool else layer.out_h
        ow = layer.out_w // 2 if layer.pool else layer.out_w
        out = np.zeros((layer.out_channels, oh, ow), np.int8)
        data_bits = 8 * cfg.link_bytes
        position = 0
        for tile, (_, n) in zip(tiles, parts):
            chunk = got[position:position + n]
            position += n
            if n:
                lasts = [(beat >> data_bits) & 1 for beat in chunk]
                assert lasts == [0] * (n - 1) + [1], f"{layer.name}: 'last' not on a tile's end"
                scatter_results(layer, cfg, tile,
                                [beat & ((1 << data_bits) - 1) for beat in chunk], out)
        if check:
            want = expected_output(layer, t)
            bad = np.argwhere(out != want)
            assert not len(bad), (f"{layer.name}: {len(bad)} of {want.size} outputs differ, "
                                  f"first at {bad[0].tolist()}: {out[tuple(bad[0])]} "
                                  f"!= {want[tuple(bad[0])]}")
        rows.append({"name": layer.name, "macs": layer.macs, "tiles": len(tiles),
                     "plan": plan.as_dict(), "predicted_cycles": plan.cycles, "cycles": cycles,
                     "link_cycles": stats.cycles,
                     "utilization": round(utilization(layer, cfg, cycles), 4)})
        dut._log.info(json.dumps(rows[-1]))
    later = [row["utilization"] for row in rows[1:]] if len(rows) > 1 else []
    Path("metrics.json").write_text(json.dumps({
        "config": cfg.as_dict(), "layers": rows,
        "mean_utilization": (sum(later) / len(later)) if later else None,
        "array_cycles": int(dut.array_cycles.value), "tiles": int(dut.tiles.value),
    }))


@cocotb.test()
async def bad_descriptors(dut):
    """Each impossible descriptor sets its error code; the engine keeps taking words."""
    cfg = _config()
    good = dict(kh=3, kw=3, stride=1, vectors=1, ih=4, iw=4, y_off=0, x_off=0, th=2, tw=2,
                oc_count=1, first=0, last=0, load_weights=0, load_inputs=0, relu=0, pool=0,
                residual=0)
    cases = [
        ({"magic": 0x12}, DescriptorError.BAD_MAGIC),
        ({"kh": 0}, DescriptorError.BAD_KERNEL),
        ({"stride": 3}, DescriptorError.BAD_STRIDE),
        ({"tw": 0}, DescriptorError.ZERO_SIZE),
        ({"oc_count": cfg.channels + 1}, DescriptorError.BAD_CHANNELS),
        ({"kh": 7, "kw": 7, "vectors": cfg.weight_depth // 49 + 1}, DescriptorError.WEIGHTS_TOO_BIG),
        ({"ih": 64, "iw": 64, "vectors": cfg.input_depth // 4096 + 1}, DescriptorError.INPUTS_TOO_BIG),
        ({"th": 64, "tw": cfg.psum_depth // 64 + 1}, DescriptorError.PIXELS_TOO_BIG),
        ({"pool": 1, "th": 3}, DescriptorError.BAD_POOL),
        ({"y_off": 1}, DescriptorError.BAD_OFFSET),
    ]
    await start(dut, sources=("i",), sinks=("o",))
    for fields, code in cases:
        await reset(dut)
        assert int(dut.error_code.value) == 0
        word = pack_descriptor(**(good | fields))
        junk = [word] + [random.getrandbits(8 * cfg.link_bytes) for _ in range(20)]
        await send_beats(dut, "i", junk)
        for _ in range(30):
            await FallingEdge(dut.clk)
        dut.i__valid.value = 1                        # still taking words: no hang
        await ReadOnly()
        assert int(dut.i__ready.value) == 1
        assert int(dut.error_code.value) == code, (fields, int(dut.error_code.value), code)
        await FallingEdge(dut.clk)
        dut.i__valid.value = 0


@cocotb.test()
async def stream_words(dut):
    """Host-prepared link words in (``words``: a file of link words), result words out
    (``results``: written as a file), the engine's cycle count in the metrics."""
    cfg = _config()
    await start(dut, sources=("i",), sinks=("o",))
    raw = Path(PARAMS["words"]).read_bytes()
    lb = cfg.link_bytes
    words = [int.from_bytes(raw[i:i + lb], "little") for i in range(0, len(raw), lb)]
    n_out = int(PARAMS["n_out"])
    got, stats = await stream_through(dut, words, n_out,
                                      max_cycles=int(PARAMS.get("max_cycles", 10_000_000)))
    for _ in range(4):
        await FallingEdge(dut.clk)
    cycles = await read_counter(dut, "cycles")
    assert not int(dut.error.value), f"engine error {int(dut.error_code.value)}"
    data_bits = 8 * lb
    Path(PARAMS["results"]).write_bytes(b"".join(
        (beat & ((1 << data_bits) - 1)).to_bytes(lb, "little") for beat in got))
    Path("metrics.json").write_text(json.dumps({
        "cycles": cycles, "link_cycles": stats.cycles,
        "array_cycles": int(dut.array_cycles.value), "tiles": int(dut.tiles.value),
        "lasts": [(beat >> data_bits) & 1 for beat in got]}))
