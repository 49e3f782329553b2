"""``dlforge infer``: a float PyTorch model (a ``torch.export``ed program) quantised with a
calibration batch and run on a device, its logits written to a file.

Every run also computes the golden network model's output and says whether the device's
equals it (``checked``), and, unless ``--no-naive``, runs the naive integration (one image,
one layer at a time) on the same device for the comparison.  Cycles are converted at the
clocks of ``--clock`` (default: the ULX3S-85F build's routed Fmax with its engine, and a PCIe
card's 250 MHz).
"""

import json
import sys

from dlforge.gen.bench.device import ECP5_ENGINE_BOARD_MHZ, XDMA_MHZ

__all__ = ["add_infer_command"]


def _load(path, what):
    import numpy as np
    try:
        return np.load(path)
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read {what} {path}: {exc}") from None


def cmd_infer(args):
    import numpy as np
    import torch
    from dlforge.host.conv.engine_module import EngineModule
    from dlforge.host.conv.network_run import run_program
    from dlforge.sim.models.network_model import run_network

    try:
        exported = torch.export.load(args.model)
    except Exception as exc:                            # torch raises many kinds here
        raise ValueError(f"cannot load the exported model {args.model}: {exc}") from None
    calibration = _load(args.calibrate, "calibration data")
    x = _load(args.input, "input")
    clocks = tuple(args.clock or (ECP5_ENGINE_BOARD_MHZ, XDMA_MHZ))
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


def add_infer_command(sub):
    from dlforge.host.device.open import DEVICE_HELP
    infer = sub.add_parser("infer", help="run a PyTorch model (torch.export) on a device, "
                                         "quantised to int8")
    infer.add_argument("--device", default="sim", help=DEVICE_HELP)
    infer.add_argument("--model", required=True,
                       help="FILE.pt2: a float model saved with torch.export.save")
    infer.add_argument("--calibrate", required=True,
                       help="X.npy: calibration inputs, float or uint8 (N, C, H, W)")
    infer.add_argument("--input", required=True,
                       help="X.npy: the inputs, float or uint8 (N, C, H, W)")
    infer.add_argument("--out", required=True, help="Y.npy: float32 logits")
    infer.add_argument("--clock", type=float, action="append", metavar="MHZ",
                       help="convert cycles at this clock (repeatable; default "
                            f"{ECP5_ENGINE_BOARD_MHZ:g} and {XDMA_MHZ:g})")
    infer.add_argument("--no-naive", action="store_true",
                       help="skip the naive one-layer-at-a-time run")
    infer.add_argument("--json", action="store_true")
    infer.set_defaults(func=cmd_infer)
