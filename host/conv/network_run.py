"""A quantised network (:class:`NetworkProgram`) on a device: every engine layer through the
engine, the host operations on the host, and the time of both.

Two ways, measured side by side by ``dlforge infer`` and its tests:

* ``naive``: one image and one layer at a time, synchronous: pack the layer's words (in
  Python, :func:`~dlforge.host.conv.link_words.tile_words`), send them, wait for the
  results, unpack, and only then the next layer: what a first integration does, and what
  FlexCNN measured as up to 8.45x slower;
* ``pipelined``: every layer's constant words (descriptors, parameters, weights) prepared
  once (:class:`~dlforge.host.conv.layer_pack.LayerPack`), one exchange per layer for the
  whole batch, each image's words made while the images before it travel and compute, the
  results gathered with one numpy index.  The engine's loader, array and unloader overlap
  across images, and the per-exchange costs are paid once per layer.

Host time counts.  On a board the device's clock runs while the host packs and unpacks; the
simulated board's runs at simulation speed, which says nothing about a board.  So the
device's part is its own span registers per exchange (first word in to last result out),
and the host's part is the wall time of the run less the time spent inside exchanges
(packing, unpacking, host operations and the host's loop), converted to device clocks at a
stated clock (``clocks_mhz``) and added where the device waits for the host:

* naive: all of it (nothing overlaps);
* pipelined: per layer ``max(D, H) + H / N``, with ``D`` the layer's device cycles, ``H``
  the host's packing and unpacking of its ``N`` images in cycles (the host makes image i+1's
  words while the device works on image i; one image's share cannot hide), plus all other
  host time (host operations, the loop) in full.

Register reads for the measurement itself are inside the exchanges and not counted.  The
one-time preparation of the pipelined way (``prepare_s``) is reported, not counted: it is
done once per model, as loading the weights is.  End-to-end utilisation is the network's
MACs over (MACs a clock x all those cycles).
"""

import time

import numpy as np

from dlforge.host.conv.layer_pack import LayerPack
from dlforge.host.conv.plan import LayerShape, plan_layer
from dlforge.host.conv.program import check_input, run_host_op
from dlforge.host.conv.run import engine_config, exchange_layer, layer_results, layer_stream
from dlforge.host.device.accelerator import AcceleratorDevice
from dlforge.host.device.cpu import CpuDevice
from dlforge.host.device.open import open_device
from dlforge.sim.models.network_model import run_network

__all__ = ["layer_shape", "plan_program", "prepare", "run_program", "MODES"]

MODES = ("pipelined", "naive")


def layer_shape(program, op):
    """The planner's :class:`LayerShape` of an engine layer of ``program``."""
    c, h, w = program.shapes[op.source]
    oc, _, kh, kw = op.weight.shape
    return LayerShape(op.name, c, h, w, oc, (kh, kw), op.stride, op.padding, op.groups,
                      relu=op.relu, pool=op.pool, residual=op.residual is not None)


def plan_program(program, cfg):
    """Every engine layer's plan, before anything runs: a layer the engine cannot run
    (PlanError, naming it) stops the network before its first word is sent."""
    return {op.name: plan_layer(layer_shape(program, op), cfg)
            for op in program.engine_layers()}


def prepare(program, cfg):
    """(packs, plans, cfg): the pipelined way's :class:`LayerPack` and plan of every engine
    layer, for one engine."""
    plans = plan_program(program, cfg)
    return {op.name: LayerPack(layer_shape(program, op), cfg, plans[op.name].tiles(cfg),
                               op.weight, op.bias, op.multiplier, op.shift)
            for op in program.engine_layers()}, plans, cfg


def _row(op):
    return {"layer": op.name, "kind": op.kind, "macs": 0, "engine_cycles": 0,
            "device_cycles": 0, "predicted_cycles": 0, "host_s": 0.0, "exchange_s": 0.0,
            "exchanges": 0, "bytes_in": 0}


def _naive_layer(board, cfg, program, op, x, residual, row, plan):
    layer = layer_shape(program, op)
    t0 = time.perf_counter()
    raw, per_image, tiles, plan = layer_stream(cfg, layer, x, op.weight, op.bias,
                                               op.multiplier, op.shift, residual, plan)
    t1 = time.perf_counter()
    got, cycles, span = exchange_layer(board, raw, sum(map(sum, per_image)), cfg.link_bytes)
    t2 = time.perf_counter()
    y = layer_results(cfg, layer, tiles, per_image, got)
    t3 = time.perf_counter()
    _count(row, layer, len(x), plan, cycles, span, (t1 - t0) + (t3 - t2), t2 - t1, len(raw))
    return y


def _count(row, layer, images, plan, cycles, span, host_s, exchange_s, nbytes):
    row["macs"] += layer.macs * images
    row["engine_cycles"] += cycles
    row["device_cycles"] += span
    row["predicted_cycles"] += plan.cycles * images
    row["host_s"] += host_s
    row["exchange_s"] += exchange_s
    row["exchanges"] += 1
    row["bytes_in"] += nbytes


def _pipelined_layer(board, cfg, program, op, x, residual, row, plan, pack):
    layer = layer_shape(program, op)
    made = [0.0, 0]

    def pieces():
        for image in range(len(x)):
            t = time.perf_counter()
            data = pack.image_bytes(x[image], None if residual is None else residual[image])
            made[0] += time.perf_counter() - t
            made[1] += len(data)
            yield data

    t0 = time.perf_counter()
    got, cycles, span = exchange_layer(board, pieces(), sum(pack.result_words) * len(x),
                                       cfg.link_bytes)
    t1 = time.perf_counter()
    y = pack.results(got, len(x))
    t2 = time.perf_counter()
    _count(row, layer, len(x), plan, cycles, span, made[0] + (t2 - t1),
           (t1 - t0) - made[0], made[1])
    return y


def run_program(program, x, device="sim", mode="pipelined", clocks_mhz=(), config=None,
                prepared=None):
    """Int8 outputs for an int8 batch (N, C, H, W) and a report of the run.

    ``device``: a device string or an open device (``cpu``: the golden model).  ``config``
    builds the simulated board's engine when ``device`` is ``sim``.  ``prepared``: what
    :func:`prepare` made for this program and the device's engine (made here if None)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}: {', '.join(MODES)}")
    x = check_input(program, x)
    if isinstance(device, CpuDevice) or device == "cpu":
        t0 = time.perf_counter()
        y = run_network(program, x)
        return y, {"device": "cpu", "mode": "golden", "images": len(x),
                   "host_s": time.perf_counter() - t0}
    owned = isinstance(device, str)
    board = open_device(device, conv=config or True) if owned else device
    try:
        if not isinstance(board, AcceleratorDevice):
            raise ValueError(f"{board.name} cannot run convolution layers")
        return _on_board(board, program, x, mode, clocks_mhz, prepared)
    finally:
        if owned:
            board.close()


def _on_board(board, program, x, mode, clocks_mhz, prepared):
    cfg = engine_config(board)
    prepare_s = 0.0
    if mode == "pipelined":
        if prepared is None or prepared[2] != cfg:
            t0 = time.perf_counter()
            prepared = prepare(program, cfg)
            prepare_s = time.perf_counter() - t0
        packs, plans, _ = prepared
    else:
        plans = plan_program(program, cfg)
    rows = {op.name: _row(op) for op in program.ops}
    groups = [x] if mode == "pipelined" else [x[i:i + 1] for i in range(len(x))]
    outputs = []
    start = time.perf_counter()
    for batch in groups:
        values = {0: batch}
        for op in program.ops:
            row = rows[op.name]
            if op.kind == "engine":
                res = None if op.residual is None else values[op.residual]
                args = (board, cfg, program, op, values[op.source], res, row, plans[op.name])
                values[op.output] = (_pipelined_layer(*args, packs[op.name])
                                     if mode == "pipelined" else _naive_layer(*args))
            else:
                t0 = time.perf_counter()
                values[op.output] = run_host_op(op, values[op.source])
                row["host_s"] += time.perf_counter() - t0
        outputs.append(values[program.output])
    wall = time.perf_counter() - start
    y = np.concatenate(outputs)
    if program.flatten_output:
        y = y.reshape(len(y), -1)
    layers = list(rows.values())
    macs = sum(r["macs"] for r in layers)
    device = sum(r["device_cycles"] for r in layers)
    # the host's time: everything but waiting for the device's exchanges (packing,
    # unpacking, host operations, the loop itself)
    host = wall - sum(r["exchange_s"] for r in layers)
    report = {"device": board.name, "mode": mode, "images": len(x), "config": cfg.as_dict(),
              "layers": layers, "macs": macs, "engine_cycles":
              sum(r["engine_cycles"] for r in layers), "device_cycles": device,
              "host_s": round(host, 6), "prepare_s": round(prepare_s, 3),
              "wall_s": round(wall, 3),
              "device_utilization": round(macs / cfg.macs_per_clock / device, 4)
              if device else None, "at_clock": []}
    for mhz in clocks_mhz:
        total = _end_to_end(layers, mode, host, len(x), mhz * 1e6)
        report["at_clock"].append({
            "clock_mhz": mhz, "end_to_end_cycles": round(total),
            "cycles_per_image": round(total / len(x)),
            "utilization": round(macs / cfg.macs_per_clock / total, 4),
            "images_per_second": round(len(x) * mhz * 1e6 / total, 2)})
    return y, report


def _end_to_end(layers, mode, host_s, images, hz):
    """Device cycles with the host's time where the device waits for it (the module's
    docstring states the rule)."""
    if mode == "naive":
        return sum(r["device_cycles"] for r in layers) + host_s * hz
    total, counted = 0.0, 0.0
    for r in layers:
        if r["kind"] == "engine":
            h = r["host_s"] * hz
            total += max(r["device_cycles"], h) + h / images
            counted += r["host_s"]
    return total + max(host_s - counted, 0.0) * hz
