"""``make demo``: real photos through the simulated decoder core, checked against libjpeg-turbo;
then ResNet-18 layers through the simulated convolution engine, checked against the golden model.

Decodes scikit-image's three shipped JPEG files and a few Pillow encodes of its photos with
the generated core in Verilator (``dlforge decode --device sim``), compares every image with
simplejpeg (libjpeg-turbo), and prints a table: file, layout, size, bit-exact, pixels/clock
from the core's own cycle counter.  Then three ResNet-18 convolution layers (random int8
tensors) run through the default 8x8x8 engine in Verilator, each compared bit for bit with
the golden model, with their cycles and MAC utilisation.  Exit status 1 if anything differs.
"""

import argparse
import json
import sys
from pathlib import Path

__all__ = ["main"]


def _layout(data):
    from ..sim.jpeg_parse import parse_headers
    h = parse_headers(data)
    if len(h.components) == 1:
        return "gray"
    return {(1, 1): "4:4:4", (2, 1): "4:2:2", (1, 2): "4:4:0",
            (2, 2): "4:2:0"}[(h.components[0].h, h.components[0].v)]


def demo_files(folder, photos=4):
    """Paths of the demo's inputs: skimage's JPEG files, plus ``photos`` photo-corpus files."""
    from ..sim import jpeg_corpus
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, data in jpeg_corpus.shipped_jpegs():
        paths.append(folder / name)
        paths[-1].write_bytes(data)
    corpus = jpeg_corpus.photo_corpus()
    step = max(1, len(corpus) // photos) if photos else len(corpus) + 1
    for f in corpus[::step][:photos]:
        paths.append(folder / f"{f.name}.jpg")
        paths[-1].write_bytes(f.data)
    return paths


CONV_LAYERS = ("layer3.0.downsample.0", "layer4.0.downsample.0", "layer4.1.conv1")


def conv_demo(names=CONV_LAYERS):
    """Rows of (layer, MACs, tiles, predicted and measured cycles, utilisation, bit-exact)."""
    from dataclasses import asdict
    from .blocks import get_block
    from ..sim.runner import run_cocotb
    block = get_block("conv")
    params = block.defaults()
    engine = block.build(**params)
    run = run_cocotb(engine, name=block.module_name(params), test_module=block.testbench,
                     params={"config": asdict(engine.cfg), "layers": "resnet18",
                             "names": list(names), "check": True, "seed": 2},
                     testcase="run_layers", quiet=True)
    rows = run.metrics.get("layers", [])
    return [{"layer": r["name"], "macs": r["macs"], "tiles": r["tiles"],
             "predicted_cycles": r["predicted_cycles"], "cycles": r["cycles"],
             "utilization": r["utilization"], "bit_exact": run.passed} for r in rows], run


def _print_table(head, table):
    widths = [max(len(h), *(len(t[i]) for t in table)) for i, h in enumerate(head)]
    fmt = "  ".join(f"{{:<{n}}}" for n in widths)
    print(fmt.format(*head))
    print(fmt.format(*("-" * n for n in widths)))
    for t in table:
        print(fmt.format(*t))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m dlforge.gen.demo", description=__doc__)
    parser.add_argument("--photos", type=int, default=4, help="photo-corpus files to add")
    parser.add_argument("--folder", default="build/demo/jpeg", help="where the inputs go")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--skip-conv", action="store_true",
                        help="only the decoder part (the engine's build takes a minute)")
    args = parser.parse_args(argv)

    import simplejpeg
    from ..host.jpeg_decode import decode_files
    paths = demo_files(args.folder, args.photos)
    results = decode_files(paths, device="sim")
    rows = []
    for path, r in zip(paths, results):
        data = path.read_bytes()
        ref = simplejpeg.decode_jpeg(data, colorspace="RGB", fastdct=False, fastupsample=False)
        exact = r.status == "ok" and r.pixels.shape == ref.shape and bool((r.pixels == ref).all())
        rows.append({"file": path.name, "layout": _layout(data), "size": f"{ref.shape[1]}x"
                     f"{ref.shape[0]}", "status": r.status, "bit_exact": exact,
                     "cycles": r.cycles, "pixels_per_clock":
                     round(ref.shape[0] * ref.shape[1] / r.cycles, 3) if r.cycles else None})
    if not args.json:
        _print_table(("file", "layout", "size", "status", "bit-exact", "cycles", "pixels/clock"),
                     [(w["file"], w["layout"], w["size"], w["status"],
                       "yes" if w["bit_exact"] else "NO", str(w["cycles"]),
                       str(w["pixels_per_clock"])) for w in rows])
        print()
    conv_rows, run = ([], None) if args.skip_conv else conv_demo()
    if run is not None and not run.passed:
        print(f"convolution engine FAILED: {run.failed} (log: {run.test_dir}/sim.log)",
              file=sys.stderr)
    if args.json:
        print(json.dumps({"jpeg": rows, "conv": conv_rows}, indent=2))
    elif conv_rows:
        _print_table(("ResNet-18 layer (8x8x8 engine)", "MACs", "tiles", "predicted", "cycles",
                      "utilisation", "bit-exact"),
                     [(c["layer"], str(c["macs"]), str(c["tiles"]), str(c["predicted_cycles"]),
                       str(c["cycles"]), f"{c['utilization']:.1%}",
                       "yes" if c["bit_exact"] else "NO") for c in conv_rows])
    ok = all(w["bit_exact"] for w in rows) and (run is None or run.passed)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
