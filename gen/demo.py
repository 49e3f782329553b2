"""``make demo``: the main job on the built-in simulated board.

Starts the simulated board (the accelerator top — two JPEG decoder cores and the 8x8x8
convolution engine behind a 32-byte link, a PCIe card's DMA stream — compiled with Verilator
and driven over a local socket by the host runtime), then:

1. decodes scikit-image's three shipped JPEG files and a few Pillow encodes of its photos
   through the decoder service, compares every image with libjpeg-turbo (simplejpeg), and
   gives the device's pixels per clock from its own CYCLES register (first request to last
   reply) next to each core's own count per file;
2. streams the same photos as fixed-size uint8 batches through the PyTorch loader (resized on
   the host), each image compared with an independent reference: Pillow's decode, resize
   and centre crop (the loader resizes in float32, Pillow in integers: within 1);
3. runs a ResNet-18 convolution layer (random int8 tensors) on the board's engine and compares
   it bit for bit with the golden model;

and prints the summary, ending with one line ``demo: ok: ...`` or ``demo: FAILED: ...``.  Exit
status 1 if anything differs.
"""

import argparse
import json
import sys
from pathlib import Path

from dlforge.host.jpeg.scaled_decode import scaled_decode

__all__ = ["main"]


def _layout(data):
    from dlforge.sim.models.jpeg_parse import parse_headers
    layout = parse_headers(data).layout
    return ":".join(layout) if layout.isdigit() else layout      # "420" -> "4:2:0"


def demo_files(folder, photos=4):
    """Paths of the demo's inputs: skimage's JPEG files, plus ``photos`` photo-corpus files."""
    from dlforge.sim.corpus import jpeg_corpus
    from dlforge.sim.corpus import photos as shipped   # (not the ``photos`` count)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, data in shipped.shipped_jpegs():
        paths.append(folder / name)
        paths[-1].write_bytes(data)
    corpus = jpeg_corpus.photo_corpus()
    step = max(1, len(corpus) // photos) if photos else len(corpus) + 1
    for f in corpus[::step][:photos]:
        paths.append(folder / f"{f.name}.jpg")
        paths[-1].write_bytes(f.data)
    return paths


CONV_LAYERS = ("layer2.0.downsample.0",)


def conv_demo(board, names=CONV_LAYERS, seed=2):
    """Rows of (layer, MACs, tiles, predicted and measured cycles, utilisation, bit-exact)."""
    import numpy as np
    from dlforge.host.conv.networks import resnet18_layers
    from dlforge.host.conv.run import engine_config, run_conv
    from dlforge.host.conv.random_layer import expected_output, random_tensors
    cfg = engine_config(board)
    layers = {layer.name: layer for layer in resnet18_layers()}
    rng = np.random.default_rng(seed)
    rows = []
    for name in names:
        layer = layers[name]
        t = random_tensors(layer, cfg, rng)
        y, info = run_conv(t.x, t.w, t.bias.astype(np.int32), t.multiplier, t.shift,
                           stride=layer.stride, padding=layer.padding, groups=layer.groups,
                           relu=layer.relu, pool=layer.pool, residual=t.residual,
                           device=board)
        rows.append({"layer": name, "macs": layer.macs, "tiles": info["tiles"],
                     "predicted_cycles": info["predicted_cycles"], "cycles": info["cycles"],
                     "utilization": info["utilization"],
                     "device_cycles": info["device_cycles"],
                     "device_utilization": info["device_utilization"],
                     "bit_exact": bool(np.array_equal(y[0], expected_output(layer, t)))})
    return rows


def network_demo(board, images=32):
    """The digits CNN trained here, quantised, and run on the board's engine (pipelined and
    naive), every output compared with the golden network model; then decode -> infer:
    held-out digits as JPEG files through the board's decoder cores and resampler into it."""
    from dlforge.gen.bench.network import bench_network, bench_network_images
    report = bench_network("digits", images, board)
    # (every held-out digit: the accuracy of a few dozen moves by 3 points per image)
    report["images_run"] = bench_network_images("digits", 397, board, batch=16)
    report["ok"] = report["ok"] and report["images_run"]["ok"]
    return report


def _pillow_reference(path, size):
    """Pillow's decode and Pillow's bilinear resize (antialiased, 8-bit integer arithmetic),
    the shorter side to ``size`` and the centre crop, as torchvision's ``Resize`` +
    ``CenterCrop`` on Pillow: (size, size, 3) uint8.  Independent of the loader, whose
    ``resize_image`` resizes on float32 tensors."""
    import numpy as np
    from PIL import Image
    with Image.open(path) as im:
        im = im.convert("RGB")
        w, h = im.size
        nh, nw = (size, int(size * w / h)) if h <= w else (int(size * h / w), size)
        if (nw, nh) != (w, h):
            im = im.resize((nw, nh), Image.Resampling.BILINEAR)
        top, left = int(round((nh - size) / 2.0)), int(round((nw - size) / 2.0))
        return np.asarray(im)[top:top + size, left:left + size]


#: The loader's float32 resize and Pillow's integer one round apart by at most this much.
STREAM_TOLERANCE = 1


def stream_demo(service, folder, batch=4, size=128):
    """Batches through the loader; each image against Pillow's decode + resize + crop (an
    independent reference: equal within :data:`STREAM_TOLERANCE`)."""
    import numpy as np
    from dlforge.host.jpeg.loader import JpegBatches
    loader = JpegBatches(folder, batch, size=size, layout="NCHW", service=service)
    close = exact = total = max_diff = 0
    for b in loader:
        for image, name in zip(b.images, b.names):
            ref = _pillow_reference(name, size).astype(np.int16)
            got = image.permute(1, 2, 0).numpy().astype(np.int16)
            diff = int(np.abs(got - ref).max()) if got.shape == ref.shape else 255
            max_diff = max(max_diff, diff)
            close += diff <= STREAM_TOLERANCE
            exact += diff == 0
            total += 1
    return {"images": total, "within_tolerance": close, "tolerance": STREAM_TOLERANCE,
            "bit_exact": exact, "max_diff": max_diff, "batches": loader.stats["batches"],
            "ok": loader.stats["ok"], "fallback": loader.stats["fallback"],
            "error": loader.stats["error"], "batch": batch, "size": size}


def _print_table(head, table):
    widths = [max(len(h), *(len(t[i]) for t in table)) for i, h in enumerate(head)]
    fmt = "  ".join(f"{{:<{n}}}" for n in widths)
    print(fmt.format(*head))
    print(fmt.format(*("-" * n for n in widths)))
    for t in table:
        print(fmt.format(*t))


def main(argv=None):
    """Run the demo (``python -m dlforge.gen.demo``, ``make demo``); the exit status: 1 if
    any result differs from its reference."""
    parser = argparse.ArgumentParser(prog="python -m dlforge.gen.demo", description=__doc__)
    parser.add_argument("--photos", type=int, default=4, help="photo-corpus files to add")
    parser.add_argument("--folder", default="build/demo/jpeg", help="where the inputs go")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--skip-conv", action="store_true",
                        help="no convolution layer and no network on the engine")
    args = parser.parse_args(argv)

    from dlforge.host.jpeg.decode_service import DecoderService
    from dlforge.host.device.open import open_device
    paths = demo_files(args.folder, args.photos)
    print("starting the simulated board (the first run builds it with Verilator: minutes)",
          flush=True)
    board = open_device("sim")
    service = DecoderService(board)
    info = board.info()
    if not args.json:
        print(f"simulated board at {info['device']}: {info['cores']} decoder core(s) up to "
              f"{info['max_width']}x{info['max_height']}, engine {info['engine']}, "
              f"{info['link_bytes']}-byte link\n")
    board.open_span()
    results = list(service.decode(paths))
    device_cycles = board.span_cycles()
    rows = []
    for path, r in zip(paths, results):
        data = path.read_bytes()
        ref = scaled_decode(data, 1)
        exact = r.status == "ok" and r.pixels.shape == ref.shape and bool((r.pixels == ref).all())
        rows.append({"file": path.name, "layout": _layout(data), "size": f"{ref.shape[1]}x"
                     f"{ref.shape[0]}", "status": r.status, "bit_exact": exact,
                     "cycles": r.cycles, "pixels_per_clock":
                     round(ref.shape[0] * ref.shape[1] / r.cycles, 3) if r.cycles else None})
    pixels = sum(int(w["size"].split("x")[0]) * int(w["size"].split("x")[1]) for w in rows)
    device = {"cycles": device_cycles, "pixels": pixels, "cores": info["cores"],
              "link_bytes": info["link_bytes"],
              "pixels_per_clock": round(pixels / device_cycles, 3)}
    if not args.json:
        _print_table(("file", "layout", "size", "status", "bit-exact", "core cycles",
                      "core pixels/clock"),
                     [(w["file"], w["layout"], w["size"], w["status"],
                       "yes" if w["bit_exact"] else "NO", str(w["cycles"]),
                       str(w["pixels_per_clock"])) for w in rows])
        print(f"\ndevice: {len(rows)} images, {pixels} pixels in {device_cycles} cycles of its "
              f"span registers (first request byte to last reply byte, {info['cores']} cores, "
              f"{info['link_bytes']}-byte link): {device['pixels_per_clock']} pixels/clock\n")
    stream = stream_demo(service, args.folder)
    if not args.json:
        print(f"stream: {stream['images']} images in {stream['batches']} batches of "
              f"{stream['batch']} x 3 x {stream['size']} x {stream['size']} uint8; "
              f"{stream['ok']} decoded on the board, {stream['fallback']} fallback, "
              f"{stream['error']} error; {stream['within_tolerance']} within "
              f"{stream['tolerance']} of Pillow's decode + resize + crop (largest difference "
              f"{stream['max_diff']}; {stream['bit_exact']} equal)\n")
    conv_rows = [] if args.skip_conv else conv_demo(board)
    network = None if args.skip_conv else network_demo(board)
    counters = board.counters()
    board.close()
    if args.json:
        print(json.dumps({"board": info, "jpeg": rows, "device": device, "stream": stream,
                          "conv": conv_rows, "network": network, "counters": counters},
                         indent=2))
    elif conv_rows:
        _print_table(("ResNet-18 layer (board engine)", "MACs", "tiles", "fed directly",
                      "engine", "device", "utilisation", "bit-exact"),
                     [(c["layer"], str(c["macs"]), str(c["tiles"]), str(c["predicted_cycles"]),
                       str(c["cycles"]), str(c["device_cycles"]),
                       f"{c['device_utilization']:.1%}",
                       "yes" if c["bit_exact"] else "NO") for c in conv_rows])
        print("\n(cycles: the engine fed directly by the planner's cycle model, the engine's "
              "own counter, and the device's span from the first word in to the last result "
              "out; utilisation at the device's interface)")
    if network and not args.json:
        acc, run = network["accuracy"], network["pipelined"]
        at = run["at_clock"][0]
        speedup = network["pipelined_vs_naive"][0]["speedup"]
        print(f"\nnetwork: the digits CNN (trained here on scikit-learn's digits, "
              f"{acc['held_out']} held out): float top-1 {acc['float_top1']:.1%}, int8 "
              f"{acc['int8_top1']:.1%}; on the board {network['images']} images "
              f"{'bit-exact' if run['bit_exact'] else 'NOT equal'} to the golden network "
              f"model; at {at['clock_mhz']:g} MHz {at['cycles_per_image']} cycles per image, "
              f"end-to-end utilisation {at['utilization']:.1%} (device alone "
              f"{run['device_utilization']:.1%}), {at['images_per_second']:g} images/s, "
              f"{speedup:g}x the naive integration")
        images = network["images_run"]
        acc, at = images["accuracy"], images["summary"][0]
        print(f"decode -> infer: {images['files']} held-out digits as JPEG files through the "
              f"board's decoder cores and resampler into the CNN: inputs and logits "
              f"{'bit-exact' if images['bit_exact'] else 'NOT equal'} to the host's decode "
              f"and the golden model; top-1 float {acc['float_top1']:.1%}, on the board "
              f"{acc['device_int8_top1']:.1%}; at {at['clock_mhz']:g} MHz "
              f"{at['cycles_per_image']} cycles per image, {at['images_per_second']:g} "
              f"images/s")
    network_ok = network is None or network["ok"]
    ok = (all(w["bit_exact"] for w in rows) and stream["within_tolerance"] == stream["images"]
          and all(c["bit_exact"] for c in conv_rows) and network_ok)
    if not args.json:
        print(f"\ndemo: {'ok' if ok else 'FAILED'}: {sum(w['bit_exact'] for w in rows)} of "
              f"{len(rows)} images bit-exact, {stream['within_tolerance']} of "
              f"{stream['images']} stream images within {stream['tolerance']}, "
              f"{sum(c['bit_exact'] for c in conv_rows)} of {len(conv_rows)} convolution "
              f"layers bit-exact" + ("" if network is None else
                                     f", the digits CNN {'bit-exact' if network_ok else 'WRONG'}"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
