"""``dlforge bench network``: a whole PyTorch network quantised and run on a device, the
pipelined integration beside the naive one, every output compared with the int8 golden
network model in the same run.

* ``--model digits``: the CNN of :mod:`dlforge.host.conv.digits`, trained in the run on
  scikit-learn's digits; top-1 on the held-out split for the float model, the int8 golden
  model and the device (``--limit`` test images through the device, default 32; the whole
  split through the golden model).
* ``--model resnet18``: ResNet-18 at 224x224 with 1000 classes, PyTorch's initialisation
  and random batch-norm statistics (no weights are downloaded: the figures are cycles and
  bit-exactness, not accuracy), ``--limit`` random images (default 2), calibrated on 8.

Cycles are converted at the ULX3S-85F engine build's routed Fmax and at 250 MHz
(host/conv/network_run.py states how host time counts).
"""

import contextlib
import time

import numpy as np

from dlforge.gen.bench.device import ECP5_ENGINE_BOARD_MHZ, XDMA_MHZ

__all__ = ["bench_network", "MODELS"]

MODELS = ("digits", "resnet18")


def _resnet18(images, seed):
    import torch
    from dlforge.host.conv.networks import randomise_batch_norms, resnet18
    torch.manual_seed(seed)
    model = randomise_batch_norms(resnet18(1000), seed)
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(8 + images, 3, 224, 224, generator=gen).numpy()
    return model, x[:8], x[8:], None, None


def _digits(images, seed):
    from dlforge.host.conv.digits import train_digits_cnn
    model, (x_train, _, x_test, y_test) = train_digits_cnn(seed)
    return model, x_train[:256], x_test[:images], x_test, y_test


def bench_network(model="digits", images=None, device="sim", seed=0, progress=None):
    import torch
    from dlforge.host.conv.compile import compile_module
    from dlforge.host.conv.digits import top1
    from dlforge.host.conv.network_run import prepare, run_program
    from dlforge.host.conv.quantize import quantize
    from dlforge.host.conv.run import engine_config
    from dlforge.host.device.open import open_device
    from dlforge.sim.models.network_model import quantize_input, run_network
    from dlforge.sim.tools.progress import Progress
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}: {', '.join(MODELS)}")
    progress = progress or Progress("bench network", enabled=False)
    images = images or (32 if model == "digits" else 2)
    progress.phase(f"{model}: the float model")
    net_model, calibration, x, x_all, y_all = (_digits if model == "digits" else _resnet18)(
        images, seed)
    t0 = time.perf_counter()
    program = quantize(compile_module(net_model, torch.as_tensor(calibration[:1])),
                       calibration)
    report = {"benchmark": "network", "model": model,
              "device": device if isinstance(device, str) else device.name, "images": len(x),
              "compile_and_quantize_s": round(time.perf_counter() - t0, 3),
              "engine_layers": len(program.engine_layers()),
              "host_ops": [f"{op.name}:{op.kind}" for op in program.ops
                           if op.kind != "engine"],
              "macs_per_image": None,
              "checked": "every output of both runs equal to the int8 golden network model "
                         "(sim/models/network_model.py), in this run"}
    if y_all is not None:
        with torch.no_grad():
            float_logits = net_model(torch.as_tensor(x_all))
        golden_all = run_network(program, quantize_input(x_all, program.input_scale))
        report["accuracy"] = {"held_out": len(y_all), "float_top1": top1(float_logits, y_all),
                              "int8_top1": top1(golden_all, y_all)}
    xq = quantize_input(x, program.input_scale)
    golden = run_network(program, xq)
    clocks = (ECP5_ENGINE_BOARD_MHZ, XDMA_MHZ)
    failures = []
    owned = isinstance(device, str)
    opened = open_device(device, **({"conv": True} if device == "sim" else {}))
    with opened if owned else contextlib.nullcontext(opened) as board:
        prepared = prepare(program, engine_config(board))
        report["board"] = board.name
        for mode in ("pipelined", "naive"):
            progress.phase(f"{model}: {len(x)} images, {mode}")
            y, run = run_program(program, xq, board, mode, clocks, prepared=prepared)
            run["bit_exact"] = bool(np.array_equal(y, golden))
            if not run["bit_exact"]:
                failures.append(f"{mode}: differs from the golden network model")
            if y_all is not None:
                run["top1"] = top1(y, y_all[:len(x)])
            report[mode] = run
    report["macs_per_image"] = report["pipelined"]["macs"] // len(x)
    report["pipelined_vs_naive"] = [
        {"clock_mhz": p["clock_mhz"],
         "speedup": round(n["end_to_end_cycles"] / p["end_to_end_cycles"], 3)}
        for p, n in zip(report["pipelined"]["at_clock"], report["naive"]["at_clock"])]
    report["summary"] = [
        {"mode": mode, "clock_mhz": c["clock_mhz"], "cycles_per_image": c["cycles_per_image"],
         "end_to_end_utilization": c["utilization"],
         "device_utilization": report[mode]["device_utilization"],
         "images_per_second": c["images_per_second"],
         "host_ms_per_image": round(report[mode]["host_s"] * 1e3 / len(x), 3)}
        for mode in ("pipelined", "naive") for c in report[mode]["at_clock"]]
    report["failures"] = failures
    report["ok"] = not failures
    return report
