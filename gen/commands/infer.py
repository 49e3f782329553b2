"""``dlforge infer``: a float PyTorch model (a ``torch.export``ed program) quantised with a
calibration batch and run on a device, its logits written to a file.

Every run also computes the golden network model's output and says whether the device's
equals it (``checked``), and, unless ``--no-naive``, runs the naive integration (one image,
one layer at a time) on the same device for the comparison.  Cycles are converted at the
clocks of ``--clock`` (default: the ULX3S-85F build's routed Fmax with its engine, and a PCIe
card's 250 MHz).

``--images DIR``: decode -> infer (host/conv/image_infer.py): the files through the device's
decoder cores and resampler into the network; checked against the host's own decode and the
golden model in the same run.  The naive comparison is for ``--input`` runs.
"""

import json
import sys

from dlforge.gen.bench.device import ECP5_ENGINE_BOARD_MHZ, XDMA_MHZ

__all__ = ["add_commands", "cmd_infer"]


def _load(path, what):
    import numpy as np
    try:
        return np.load(path)
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read {what} {path}: {exc}") from None


def _calibration(path, exported, resize):
    """X.npy, or a folder of JPEG files decoded and resized on the host as the device would."""
    import os
    import numpy as np
    if not os.path.isdir(path):
        return _load(path, "calibration data")
    from dlforge.host.conv.compile import compile_exported
    from dlforge.host.conv.image_infer import jpeg_files, reference_images
    # (the float network: reference_images needs its input shape alone)
    images, _ = reference_images(compile_exported(exported), jpeg_files(path), resize)
    if not len(images):
        raise ValueError(f"no JPEG file in {path} decodes")
    return images.astype(np.float32) / np.float32(255)


def cmd_infer(args):
    """Quantise the exported float model with the calibration data, run it on the device
    (``--input`` arrays, or ``--images``: decode -> infer) and write the float logits; every
    run checked against the golden network model in the same run, exit 1 if they differ."""
    import numpy as np
    import torch
    from dlforge.host.conv.engine_module import EngineModule
    from dlforge.host.conv.network_run import run_program
    from dlforge.sim.models.network_model import run_network

    try:
        exported = torch.export.load(args.model)
    except Exception as exc:                            # torch raises many kinds here
        raise ValueError(f"cannot load the exported model {args.model}: {exc}") from None
    calibration = _calibration(args.calibrate, exported, args.resize)
    clocks = tuple(args.clock or (ECP5_ENGINE_BOARD_MHZ, XDMA_MHZ))
    if args.images:
        return _infer_images(args, exported, calibration, clocks)
    if args.resize is not None or args.batch is not None:
        raise ValueError("--resize and --batch apply to --images")
    x = _load(args.input, "input")
    with EngineModule(device=args.device, calibration=calibration, exported=exported,
                      clocks_mhz=clocks) as module:
        xq = module.quantize_input(x)
        program = module.program
        y = module.run_int8(xq)
        report = module.last_report
        golden = run_network(program, xq)
        exact = bool(np.array_equal(y, golden))
        runs = {report.get("mode", "golden"): report}
        naive_exact = None
        if not args.no_naive and module.device != "cpu":
            yn, naive = run_program(program, xq, module.device, "naive", clocks)
            naive_exact = bool(np.array_equal(yn, golden))
            runs["naive"] = naive
    logits = y.astype(np.float32) * np.float32(program.output_scale)
    np.save(args.out, logits)
    info = {"out": args.out, "shape": list(logits.shape), "device": args.device,
            "checked": "the device's int8 outputs against the golden network model "
                       "(sim/models/network_model.py), in this run",
            "bit_exact": exact if naive_exact is None else exact and naive_exact,
            "input_scale": program.input_scale, "output_scale": program.output_scale,
            "engine_layers": len(program.engine_layers()),
            "host_ops": [op.name + ":" + op.kind for op in program.ops if op.kind != "engine"],
            "runs": runs}
    if "naive" in runs and "pipelined" in runs:
        info["pipelined_vs_naive"] = [
            {"clock_mhz": b["clock_mhz"],
             "speedup": round(n["end_to_end_cycles"] / b["end_to_end_cycles"], 3)}
            for b, n in zip(runs["pipelined"]["at_clock"], runs["naive"]["at_clock"])]
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        print(f"wrote {args.out}: {tuple(logits.shape)} logits on {args.device}, "
              f"{'bit-exact' if info['bit_exact'] else 'NOT equal'} to the golden model")
        for mode, run in runs.items():
            for c in run.get("at_clock", []):
                print(f"  {mode}: at {c['clock_mhz']:g} MHz {c['cycles_per_image']} cycles "
                      f"per image, utilisation {c['utilization']:.1%}, "
                      f"{c['images_per_second']:g} images/s")
    if not info["bit_exact"]:
        print("dlforge: error: the device's outputs differ from the golden model",
              file=sys.stderr)
        return 1
    return 0


def _infer_images(args, exported, calibration, clocks):
    import numpy as np
    from dlforge.host.conv.engine_module import EngineModule
    from dlforge.host.conv.image_infer import check_images, jpeg_files
    files = jpeg_files(args.images)
    with EngineModule(device=args.device, calibration=calibration, exported=exported,
                      clocks_mhz=clocks) as module:
        program = module.program
        logits, run = module.forward_files(files, args.resize, args.batch or 4)
    checks = check_images(program, files, run, args.resize)
    logits = logits.numpy()
    np.save(args.out, logits)
    info = {"out": args.out, "shape": list(logits.shape), "device": args.device,
            "images_dir": args.images, **checks, "input_scale": program.input_scale,
            "output_scale": program.output_scale, "run": run.report, "files": run.files}
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        r = run.report
        print(f"wrote {args.out}: {tuple(logits.shape)} logits of {len(files)} files on "
              f"{args.device}, {r['images']} decoded ({r['fallback']} by the host's fallback), "
              f"{'bit-exact' if checks['bit_exact'] else 'NOT equal'} to the host's decode "
              f"and the golden model")
        for c in r["at_clock"]:
            print(f"  decode -> infer at {c['clock_mhz']:g} MHz: {c['cycles_per_image']} "
                  f"cycles per image, utilisation {c['utilization']:.1%}, "
                  f"{c['images_per_second']:g} images/s")
    for failed in run.report["failed"]:
        print(f"dlforge: {failed['file']}: {failed['error']}", file=sys.stderr)
    if not checks["bit_exact"]:
        print("dlforge: error: the device's results differ from the host's", file=sys.stderr)
        return 1
    return 1 if run.report["failed"] else 0


def add_commands(sub):
    """Register ``infer`` on the ``dlforge`` subparsers ``sub``."""
    from dlforge.host.device.open import DEVICE_HELP
    infer = sub.add_parser("infer", help="run a PyTorch model (torch.export) on a device, "
                                         "quantised to int8")
    infer.add_argument("--device", default="sim", help=DEVICE_HELP)
    infer.add_argument("--model", required=True,
                       help="FILE.pt2: a float model saved with torch.export.save")
    infer.add_argument("--calibrate", required=True,
                       help="X.npy: calibration inputs, float or uint8 (N, C, H, W); or a "
                            "folder of JPEG files (decoded and resized on the host)")
    source = infer.add_mutually_exclusive_group(required=True)
    source.add_argument("--input", help="X.npy: the inputs, float or uint8 (N, C, H, W)")
    source.add_argument("--images", metavar="DIR",
                        help="JPEG files (sorted by name) decoded, resized and quantised "
                             "on the device's way into the network, the stages overlapped")
    infer.add_argument("--resize", type=int, metavar="N",
                       help="with --images (square inputs): the shorter side to N, then "
                            "the centre crop (default: N = the input's size)")
    infer.add_argument("--batch", type=int, metavar="N",
                       help="with --images: images per engine run (default 4)")
    infer.add_argument("--out", required=True,
                       help="Y.npy: float32 logits (one row per file; NaN for a file that "
                            "failed, named on stderr)")
    infer.add_argument("--clock", type=float, action="append", metavar="MHZ",
                       help="convert cycles at this clock (repeatable; default "
                            f"{ECP5_ENGINE_BOARD_MHZ:g} and {XDMA_MHZ:g})")
    infer.add_argument("--no-naive", action="store_true",
                       help="skip the naive one-layer-at-a-time run")
    infer.add_argument("--json", action="store_true")
    infer.set_defaults(func=cmd_infer)
