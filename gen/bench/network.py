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

``--images``: decode -> infer (host/conv/image_infer.py) instead: JPEG files through the
device's decoder cores and resampler into the network, the stages overlapped; every image's
input checked against the host's decode and every output against the golden model.  Digits:
the held-out digits written as 16x16 greyscale JPEG files (``--limit``, default 32), top-1 of
the float model on the host-decoded pixels beside the device's; ResNet-18: scikit-image's
colour photos as JPEG files (4:2:0, quality 85; ``--limit``, default 8, repeating them),
``Resize(256)`` and ``CenterCrop(224)`` on the device, calibrated on the same photos.

Cycles are converted at the ULX3S-85F engine build's routed Fmax and at 250 MHz
(host/conv/network_run.py states how host time counts).
"""

import contextlib
import time

import numpy as np

from dlforge.gen.bench.device import ECP5_ENGINE_BOARD_MHZ, XDMA_MHZ

__all__ = ["bench_network", "bench_network_images", "MODELS"]

MODELS = ("digits", "resnet18")


def _resnet18(images, seed):
    import torch
    from dlforge.host.conv.networks import randomise_batch_norms, resnet18
    torch.manual_seed(seed)
    model = randomise_batch_norms(resnet18(1000), seed)
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(8 + images, 3, 224, 224, generator=gen).numpy()
    return model, x[:8], x[8:], None, None


def _digits_model(seed):
    from dlforge.host.conv.digits import train_digits_cnn
    return train_digits_cnn(seed)


def _digits(images, seed):
    model, (x_train, _, x_test, y_test) = _digits_model(seed)
    return model, x_train[:256], x_test[:images], x_test, y_test


def bench_network(model="digits", images=None, device="sim", seed=0, progress=None):
    """``model`` ("digits" or "resnet18") quantised and run on ``device``, the pipelined
    integration against the naive one, every output checked against the golden network
    model; ``images``: how many (see the module's docstring).  The report as a dict."""
    import torch
    from dlforge.host.conv.compile import compile_module
    from dlforge.host.conv.digits import top1
    from dlforge.host.conv.network_run import prepare, run_program
    from dlforge.host.conv.program import quantize_input
    from dlforge.host.conv.quantize import quantize
    from dlforge.host.conv.run import engine_config
    from dlforge.host.device.open import open_device
    from dlforge.sim.models.network_model import run_network
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


def _photo_files(folder, count):
    from dlforge.sim.corpus.jpeg_making import pillow_encode
    from dlforge.sim.corpus.photos import COLOUR_PHOTOS, available_photos, photo
    names = available_photos(COLOUR_PHOTOS)
    paths = []
    for i in range(count):
        name = names[i % len(names)]
        path = folder / f"{i:03d}-{name}.jpg"
        path.write_bytes(pillow_encode(photo(name), "4:2:0", quality=85))
        paths.append(path)
    return paths


def bench_network_images(model="digits", images=None, device="sim", seed=0, progress=None,
                         batch=4):
    """Decode -> infer; see the module's docstring."""
    import tempfile
    from pathlib import Path
    import torch
    from dlforge.host.conv.compile import compile_module
    from dlforge.host.conv.digits import digit_label, top1, write_digit_jpegs
    from dlforge.host.conv.image_infer import check_images, infer_images, reference_images
    from dlforge.host.conv.quantize import quantize
    from dlforge.sim.tools.progress import Progress
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}: {', '.join(MODELS)}")
    progress = progress or Progress("bench network", enabled=False)
    images = images or (32 if model == "digits" else 8)
    clocks = (ECP5_ENGINE_BOARD_MHZ, XDMA_MHZ)
    resize = None if model == "digits" else 256
    with tempfile.TemporaryDirectory(prefix="dlforge-infer-") as tmp:
        folder = Path(tmp)
        progress.phase(f"{model}: the float model and {images} JPEG files")
        if model == "digits":
            net_model, (x_train, _, x_test, y_test) = _digits_model(seed)
            files = write_digit_jpegs(folder, x_test[:images], y_test[:images], size=16)
            labels = [digit_label(f) for f in files]
            # calibrated on training digits that took the same way (JPEG, decode, resize)
            calibration = write_digit_jpegs(folder / "calibration", x_train[:256],
                                            np.zeros(256, int), size=16)
        else:
            net_model = _resnet18(0, seed)[0]
            files = _photo_files(folder, images)
            labels = None
            calibration = None
        example = torch.zeros(1, *((1, 8, 8) if model == "digits" else (3, 224, 224)))
        network = compile_module(net_model, example)
        pixels, _ = reference_images(network, files, resize)
        floats = pixels.astype(np.float32) / np.float32(255)
        if calibration is not None:
            calibration = reference_images(network, calibration, resize)[0]
            calibration = calibration.astype(np.float32) / np.float32(255)
        program = quantize(network, floats if calibration is None else calibration)
        progress.phase(f"{model}: {images} files decoded and inferred on {device}")
        run = infer_images(program, files, device, resize=resize, batch=batch,
                           clocks_mhz=clocks)
        checks = check_images(program, files, run, resize)
    report = {"benchmark": "network-images", "model": model,
              "device": device if isinstance(device, str) else device.name,
              "files": len(files), "batch": batch, "resize": resize, **checks,
              "run": run.report}
    if labels is not None:
        with torch.no_grad():
            float_logits = net_model(torch.as_tensor(floats))
        report["accuracy"] = {"images": len(labels), "float_top1": top1(float_logits, labels),
                              "device_int8_top1": top1(run.outputs, labels)}
    r = run.report
    report["summary"] = [
        {"clock_mhz": c["clock_mhz"], "cycles_per_image": c["cycles_per_image"],
         "end_to_end_utilization": c["utilization"],
         "images_per_second": c["images_per_second"],
         "decode_core_cycles_per_image": round(r["decode"]["core_cycles"] / r["images"]),
         "decode_exposed_cycles_per_image":
             round(r["decode"]["exposed_device_cycles"] / r["images"]),
         "device_utilization": r["device_utilization"]}
        for c in r["at_clock"]]
    report["failures"] = ([] if checks["bit_exact"] else
                          ["the device's inputs or outputs differ from the host's"])
    report["failures"] += [f"{f['file']}: {f['error']}" for f in r["failed"]]
    report["ok"] = not report["failures"]
    return report
