"""A quantised network (:class:`NetworkProgram`) on a device: every engine layer through the
engine, the host operations on the host, and the time of both.

Two ways, measured side by side by ``dlforge infer`` and its tests:

* ``naive``: one image and one layer at a time, synchronous: pack the layer's words, send
  them, wait for the results, unpack, and only then the next layer (what a first integration
  does, and what FlexCNN measured as up to 8.45x slower);
* ``batched``: one exchange per layer for the whole batch, the images' tiles back to back,
  so the engine's loader, array and unloader overlap across images and the per-exchange
  costs (register reads, the span, the link's turnaround) are paid once per layer.

Host time counts.  On a board the device's clock runs while the host packs and unpacks; the
simulated board's runs at simulation speed, which says nothing about a board.  So the
device's part is its own span registers per exchange (first word in to last result out),
and the host's part is the wall time of the run less the time spent inside exchanges
(packing, unpacking, host operations and the host's loop), converted to device clocks at a
stated clock (``clocks_mhz``) and added, since the device waits for the host all that time:
neither way overlaps packing with the engine yet.  Register reads for the measurement itself
are inside the exchanges and not counted.  End-to-end utilisation is the network's MACs over (MACs a clock x all those cycles).
"""

import time

import numpy as np

from dlforge.host.conv.plan import LayerShape, plan_layer
from dlforge.host.conv.run import engine_config, exchange_layer, layer_results, layer_stream
from dlforge.host.device.cpu import CpuDevice
from dlforge.host.device.open import open_device
from dlforge.sim.models.network_model import run_host_op, run_network

__all__ = ["layer_shape", "plan_program", "run_program", "MODES"]

MODES = ("batched", "naive")


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


def _engine(board, cfg, program, op, x, residual, row, plan):
    layer = layer_shape(program, op)
    t0 = time.perf_counter()
    raw, per_image, tiles, plan = layer_stream(cfg, layer, x, op.weight, op.bias,
                                               op.multiplier, op.shift, residual, plan)
    t1 = time.perf_counter()
    got, cycles, span = exchange_layer(board, raw, sum(map(sum, per_image)), cfg.link_bytes)
    t2 = time.perf_counter()
    y = layer_results(cfg, layer, tiles, per_image, got)
    t3 = time.perf_counter()
    row["macs"] += layer.macs * len(x)
    row["engine_cycles"] += cycles
    row["device_cycles"] += span
    row["predicted_cycles"] += plan.cycles * len(x)
    row["host_s"] += (t1 - t0) + (t3 - t2)
    row["exchange_s"] += t2 - t1
    row["exchanges"] += 1
    row["bytes_in"] += len(raw)
    return y


def run_program(program, x, device="sim", mode="batched", clocks_mhz=(), config=None):
    """Int8 outputs for an int8 batch (N, C, H, W) and a report of the run.

    ``device``: a device string or an open device (``cpu``: the golden model).  ``config``
    builds the simulated board's engine when ``device`` is ``sim``."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}: {', '.join(MODES)}")
    x = np.asarray(x)
    if x.dtype != np.int8:
        raise TypeError(f"the network's input must be int8 (quantize_input), got {x.dtype}")
    if x.ndim != 4 or x.shape[1:] != tuple(program.input_shape):
        raise ValueError(f"input shape {x.shape[1:]} is not the network's "
                         f"{tuple(program.input_shape)} (N, C, H, W)")
    if isinstance(device, CpuDevice) or device == "cpu":
        t0 = time.perf_counter()
        y = run_network(program, x)
        return y, {"device": "cpu", "mode": "golden", "images": len(x),
                   "host_s": time.perf_counter() - t0}
    owned = isinstance(device, str)
    board = open_device(device, conv=config or True) if owned else device
    try:
        if not hasattr(board, "conv_exchange"):
            raise ValueError(f"{board.name} cannot run convolution layers")
        return _on_board(board, program, x, mode, clocks_mhz)
    finally:
        if owned:
            board.close()


def _on_board(board, program, x, mode, clocks_mhz):
    cfg = engine_config(board)
    plans = plan_program(program, cfg)
    rows = {op.name: {"layer": op.name, "kind": op.kind, "macs": 0, "engine_cycles": 0,
                      "device_cycles": 0, "predicted_cycles": 0, "host_s": 0.0,
                      "exchange_s": 0.0, "exchanges": 0, "bytes_in": 0}
            for op in program.ops}
    groups = [x] if mode == "batched" else [x[i:i + 1] for i in range(len(x))]
    outputs = []
    start = time.perf_counter()
    for batch in groups:
        values = {0: batch}
        for op in program.ops:
            row = rows[op.name]
            if op.kind == "engine":
                res = None if op.residual is None else values[op.residual]
                values[op.output] = _engine(board, cfg, program, op, values[op.source], res,
                                            row, plans[op.name])
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
              "host_s": round(host, 6), "wall_s": round(wall, 3),
              "device_utilization": round(macs / cfg.macs_per_clock / device, 4)
              if device else None, "at_clock": []}
    for mhz in clocks_mhz:
        total = device + host * mhz * 1e6
        report["at_clock"].append({
            "clock_mhz": mhz, "end_to_end_cycles": round(total),
            "cycles_per_image": round(total / len(x)),
            "utilization": round(macs / cfg.macs_per_clock / total, 4),
            "images_per_second": round(len(x) * mhz * 1e6 / total, 2)})
    return y, report
