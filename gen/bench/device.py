"""``dlforge bench device``: what a device delivers at its host interface, from its own
counters, beside the core fed directly and libjpeg-turbo on one CPU core, in one run.

* ``device_cycles``: the device's own span registers (SPAN_START/SPAN_END, in CYCLES): from
  the arrival of the batch's first request to the departure of its last reply's last byte;
* ``core_pixels_per_clock``: the same files through one core of the same design whose input
  and output never wait (a simulated board with one core behind a 64-byte link), from the
  core's own cycle count in each file's record (first input byte to trailer);
* ``efficiency``: pixels_per_clock / (cores x core_pixels_per_clock), the brief's 1b;
* every image is compared with libjpeg-turbo (simplejpeg, islow, fancy upsampling) in the
  same run; a mismatch or a failed file fails the bench (``ok`` false, exit 1);
* ``cpu``: libjpeg-turbo's megapixels per second on one core, on the same files;
* ``worth``: megapixels and ImageNet-size images (500x375) per second of one device at a
  clock, and the CPU cores that replaces; beside it one core fed directly at that clock
  (``megapixels_per_second_per_core``) and its ratio to libjpeg-turbo on one CPU core
  (``per_core_vs_cpu_core``).  The clocks: 250 MHz, a projection (a PCIe card's XDMA clock:
  no Xilinx timing has been measured), and the stated clock (``--clock MHZ``; by default the
  ECP5 decoder core's measured Fmax, ``ECP5_CORE_FMAX_MHZ``), each with its source;
* ``--scale 1/2|1/4|1/8``: the same files again decoded at that scale by the cores' reduced
  IDCTs (then the eval pipeline with ``--transform eval``), each image compared with
  libjpeg-turbo's scaled decode (and Pillow's resize and crop of it), and the input pixels a
  clock beside the full-size decode's.
"""

import hashlib
import time

import numpy as np

from dlforge.host.jpeg.scaled_decode import scaled_decode

__all__ = ["bench_device", "cpu_rate", "stated_clock", "worth", "ECP5_CORE_FMAX_MHZ",
           "ECP5_PAIR_FMAX_MHZ",
           "ECP5_ENGINE_BOARD_MHZ", "XDMA_MHZ", "IMAGENET_PIXELS"]

#: The whole decoder core out of context on an ECP5-85F, max width 4096, median of placer
#: seeds 1-3 (docs/results.md, `dlforge synth jpeg`; 2026-12-06, after the raster's writes and
#: the IDCT's input were registered: seeds 49.99 / 45.98 / 48.65, the Huffman loop critical
#: in each; 50.08 on 2026-12-05).
ECP5_CORE_FMAX_MHZ = 48.65
#: The two-file core (``contexts=2``, C-slowed) out of context on an ECP5-85F, max width
#: 2048 (the narrowest that takes every photo of the corpus; at 4096 its block RAM does not
#: fit), median of placer seeds 1-3 with nextpnr's static placer (72.04 / 72.44 / 68.13 MHz,
#: 2026-12-07, commit 99837af, yosys from RTLIL with no_rw_check applied; two seeds bound by
#: the marker parser's per-byte checks, one by the raster writer's byte mask; that netlist
#: passes the gate-level check; docs/results.md): the default clock of a two-file core's rates.
ECP5_PAIR_FMAX_MHZ = 72.04
#: The ULX3S-85F preset (a decoder core and the 2x2x4 engine) as routed by nextpnr
#: (docs/boards.md): the clock the engine's cycles are converted at for an ECP5.
ECP5_ENGINE_BOARD_MHZ = 44.3
#: Xilinx XDMA's AXI clock (a 256-bit stream at 250 MHz is 8 GB/s, PCIe gen3 x8).
XDMA_MHZ = 250.0
#: An ImageNet-size photo (500 x 375).
IMAGENET_PIXELS = 500 * 375
#: Where a rate's clock comes from: ECP5_CORE_FMAX_MHZ, ``--clock``, XDMA_MHZ.
MEASURED_CLOCK = "measured: ECP5-85F whole core, median of placer seeds 1-3"
MEASURED_PAIR_CLOCK = ("measured: ECP5-85F whole two-file core at max width 2048, median of "
                       "placer seeds 1-3 (that core takes images up to 2048 wide; wider "
                       "files in the run were decoded by a wider simulated core)")
STATED_CLOCK = "stated on the command line, not measured here"
XDMA_CLOCK = "projection: Xilinx XDMA's AXI clock; no Xilinx timing has been measured"


def stated_clock(clock_mhz=None, contexts=1):
    """(MHz, where that clock comes from) for a rate at ``clock_mhz`` (None: the ECP5 core's
    measured Fmax, the two-file core's with ``contexts=2``): a figure at a clock says which
    kind of clock it is."""
    if clock_mhz is None:
        if contexts == 2:
            return ECP5_PAIR_FMAX_MHZ, MEASURED_PAIR_CLOCK
        return ECP5_CORE_FMAX_MHZ, MEASURED_CLOCK
    if not clock_mhz > 0:
        raise ValueError(f"a clock is a positive number of MHz, not {clock_mhz!r}")
    return float(clock_mhz), STATED_CLOCK


#: The corpora of whole photos the device bench takes by name (``--corpus``).
DEVICE_CORPORA = ("photos", "heavy", "shipped")


def _files(files, corpus, limit):
    """[(name, bytes)] of the paths ``files``, else of the corpus named (as every JPEG
    testbench picks them: :func:`dlforge.sim.corpus.pick.files_of`)."""
    from dlforge.sim.corpus.pick import files_of
    if not files and corpus not in DEVICE_CORPORA:
        raise ValueError(f"unknown corpus {corpus!r}: {', '.join(DEVICE_CORPORA)}")
    params = {"files": list(files)} if files else {"corpus": corpus}
    return files_of(params | ({"limit": limit} if limit else {}))


def _layout(data):
    """The file's chroma layout (420, 422, 440, 444, gray; "-" for a file not parsed)."""
    from dlforge.sim.models.jpeg_parse import JpegDecodeError, parse_headers
    try:
        return parse_headers(data).layout
    except JpegDecodeError:
        return "-"


def _reference(named):
    return [scaled_decode(data, 1)
            for _, data in named]


def _run(device, named, expected, resizes=None, scale=1, sizes=None, progress=None):
    """Decode ``named`` on ``device`` (each with its Resize of ``resizes``, if given; at
    1/``scale``, ``sizes`` the scaled ones); returns (the device's span in cycles, replies,
    wall seconds, mismatches).  ``progress``: told each file decoded."""
    if resizes is None and scale == 1:
        jobs = [(name, data, False) for name, data in named]
    elif scale == 1:
        # (each Resize's box is its whole image: eval_request)
        jobs = [(name, data, False, (r.box[2], r.box[3]), r)
                for (name, data), r in zip(named, resizes)]
    else:
        jobs = [(name, data, False, size, None if resizes is None else resizes[k], scale)
                for k, ((name, data), size) in enumerate(zip(named, sizes))]
    device.open_span()
    began = time.perf_counter()
    replies = []
    for reply in device.decode_jpegs(iter(jobs)):
        replies.append(reply)
        if progress is not None:
            progress.update("files decoded", len(replies), len(jobs))
    wall = time.perf_counter() - began
    cycles = device.span_cycles()
    bad = []
    for (name, _), reply, want in zip(named, replies, expected):
        if reply.pixels is None or reply.pixels.shape != want.shape \
                or not np.array_equal(reply.pixels, want):
            bad.append(f"{name}: {reply.status.name} {reply.error or 'pixels differ'}")
    return cycles, replies, wall, bad


def _with_transform(device, named, expected, transform, scale=1, progress=None):
    """The files again through ``transform`` ("eval": Resize(256), CenterCrop(224); None:
    none) on the device, decoded at 1/``scale`` (``expected``: the images at that scale):
    (span cycles, replies, mismatches against Pillow)."""
    from dlforge.host.jpeg.transforms import eval_request
    sizes = [(want.shape[1], want.shape[0]) for want in expected]
    resizes = None if transform is None else [eval_request(*size) for size in sizes]
    wanted = expected if resizes is None else [r.apply(want)
                                               for r, want in zip(resizes, expected)]
    cycles, replies, _, bad = _run(device, named, wanted, resizes, scale, sizes, progress)
    return cycles, replies, bad


def cpu_rate(named, repeat=3):
    """libjpeg-turbo on one core: megapixels per second over the [(name, bytes)] ``named``,
    best of ``repeat``: what a decoder's rate is set beside."""
    pixels, best = 0, None
    for _ in range(repeat):
        began = time.perf_counter()
        pixels = 0
        for _, data in named:
            image = scaled_decode(data, 1)
            pixels += image.shape[0] * image.shape[1]
        took = time.perf_counter() - began
        best = took if best is None else min(best, took)
    return pixels / best / 1e6


def worth(pixels_per_clock, cpu, clock, core_pixels_per_clock=None):
    """A device's megapixels and ImageNet-size images per second at 250 MHz (a projection)
    and at ``clock`` ((MHz, source): :func:`stated_clock`), and the CPU cores that replaces
    (``cpu``: libjpeg-turbo's megapixels per second on one core); with
    ``core_pixels_per_clock`` (one core fed directly) also that core at each clock and its
    ratio to one CPU core: ``report["worth"]``."""
    out = {}
    for label, (mhz, source) in (("xdma_250mhz", (XDMA_MHZ, XDMA_CLOCK)),
                                 ("stated_clock", clock)):
        mps = pixels_per_clock * mhz
        out[label] = {"clock_mhz": mhz, "clock_source": source, "megapixels_per_second": mps,
                      "imagenet_images_per_second": mps * 1e6 / IMAGENET_PIXELS,
                      "cpu_cores_replaced": mps / cpu}
        if core_pixels_per_clock is not None:
            per_core = core_pixels_per_clock * mhz
            out[label] |= {"megapixels_per_second_per_core": per_core,
                           "per_core_vs_cpu_core": per_core / cpu}
    out["note"] = ("device rate = measured pixels per clock x clock; per core = one core fed "
                   "directly (core_pixels_per_clock) x clock, beside libjpeg-turbo on one "
                   "CPU core; 250 MHz is a projection (no Xilinx timing has been measured), "
                   "the stated clock says its source")
    return out


def bench_device(files=None, corpus="photos", limit=None, cores=None, link_bytes=None,
                 conv=False, reference=True, transform=None, scale=1, clock_mhz=None,
                 progress=None, **board):
    """The figures as a dict (see the module docstring); ``conv``: the board with the engine;
    ``transform="eval"``: the same files again through torchvision's eval pipeline on the
    cores' resamplers, and the device's input pixels per clock then beside without;
    ``clock_mhz``: the stated clock of ``worth`` (None: ``ECP5_CORE_FMAX_MHZ``).
    Builds the simulated boards it needs (minutes the first time).  ``progress``: a
    :class:`~dlforge.sim.tools.progress.Progress` told each phase and file."""
    from dlforge.sim.tools.progress import Progress
    progress = progress or Progress("bench device", enabled=False)
    from dlforge.host.device.accelerator import AcceleratorDevice
    from dlforge.sim.board.build import DEFAULTS
    if transform not in (None, "eval"):
        raise ValueError(f"bench device takes --transform eval, not {transform!r}")
    clock = stated_clock(clock_mhz, board.get("contexts", 1))
    cores = DEFAULTS["cores"] if cores is None else cores
    link_bytes = DEFAULTS["link_bytes"] if link_bytes is None else link_bytes
    named = _files(files, corpus, limit)
    progress.phase(f"libjpeg-turbo's reference images ({len(named)} files)")
    expected = _reference(named)
    pixels = sum(w.shape[0] * w.shape[1] for w in expected)
    digest = hashlib.sha256(b"".join(hashlib.sha256(d).digest() for _, d in named)).hexdigest()
    report = {"benchmark": "device",
              "config": {"device": "sim", "cores": cores, "link_bytes": link_bytes,
                         "conv": bool(conv), **board},
              "files_digest": digest[:16], "images": len(named), "pixels": pixels,
              "checked": "every image bit-exact to libjpeg-turbo (simplejpeg: islow IDCT, "
                         "fancy upsampling), in this run"}
    failures = []
    progress.phase(f"starting the simulated board ({cores} cores)")
    with AcceleratorDevice.simulated("sim", cores=cores, link_bytes=link_bytes, conv=conv,
                                     **board) as device:
        progress.phase("decoding on the board, each image checked")
        cycles, replies, wall, bad = _run(device, named, expected, progress=progress)
        if transform is not None:
            progress.phase(f"decoding with the {transform} transform on the cores")
            resized = _with_transform(device, named, expected, transform, progress=progress)
        if scale > 1:
            small = [scaled_decode(data, scale) for _, data in named]
            progress.phase(f"decoding at 1/{scale}")
            scaled = _with_transform(device, named, small, transform, scale, progress)
        info = device.info()
    failures += [f"device: {b}" for b in bad]
    report |= {"device_cycles": cycles, "pixels_per_clock": pixels / cycles,
               "wall_seconds": round(wall, 2),
               "decoded_megapixels_per_wall_second": pixels / wall / 1e6,
               "simulated_cycles_per_second": cycles / wall,
               "board": info}
    rows = [{"file": name, "layout": _layout(data), "width": int(r.width),
             "height": int(r.height), "status": r.status.name, "core_cycles_in_device": r.cycles}
            for (name, data), r in zip(named, replies)]
    if reference:
        progress.phase("the reference: one core fed directly")
        with AcceleratorDevice.simulated(
                "sim", cores=1, link_bytes=64, conv=False,
                max_width=board.get("max_width", DEFAULTS["max_width"]),
                max_height=board.get("max_height", DEFAULTS["max_height"]),
                **({"contexts": board["contexts"]} if "contexts" in board else {})) as one:
            _, direct, _, bad = _run(one, named, expected, progress=progress)
        failures += [f"reference core: {b}" for b in bad]
        core_cycles = sum(r.cycles or 0 for r in direct)
        for row, r in zip(rows, direct):
            row["core_cycles_direct"] = r.cycles
            row["core_pixels_per_clock"] = row["width"] * row["height"] / r.cycles \
                if r.cycles else None
        report["core_pixels_per_clock"] = pixels / core_cycles
        report["efficiency"] = report["pixels_per_clock"] / (cores
                                                             * report["core_pixels_per_clock"])
        report["core_reference"] = ("the same files through one core behind a 64-byte link "
                                    "(input and output never wait), the core's own cycles "
                                    "per file")
    progress.phase("libjpeg-turbo on one CPU core")
    cpu = cpu_rate(named)
    report["cpu"] = {"libjpeg_turbo_megapixels_per_second_one_core": cpu,
                     "what": "simplejpeg.decode_jpeg, islow, fancy upsampling, best of 3, "
                             "same files, this machine"}
    report["worth"] = worth(report["pixels_per_clock"], cpu, clock,
                            report.get("core_pixels_per_clock"))
    if transform is not None:
        r_cycles, r_replies, r_bad = resized
        failures += [f"device, {transform}: {b}" for b in r_bad]
        report["transform"] = {
            "transform": transform,
            "device_cycles": r_cycles,
            "input_pixels_per_clock": pixels / r_cycles,
            "keep_pace": (pixels / r_cycles) / report["pixels_per_clock"],
            "resized_on_device": sum(r.resized == "device" for r in r_replies),
            "checked": "every image equal to Pillow's resize and crop of libjpeg-turbo's "
                       "decode (torchvision's pipeline on Pillow), in this run",
            "what": "the same files again, each cropped and resized by the cores' "
                    "resamplers; keep_pace is the input pixels per clock with them over "
                    "without (target 0.95)"}
    if scale > 1:
        s_cycles, s_replies, s_bad = scaled
        failures += [f"device, 1/{scale}: {b}" for b in s_bad]
        report["scaled"] = {
            "scale": f"1/{scale}",
            "transform": transform,
            "device_cycles": s_cycles,
            "input_pixels_per_clock": pixels / s_cycles,
            "speedup": (pixels / s_cycles) / report["pixels_per_clock"],
            "resized_on_device": sum(r.resized == "device" for r in s_replies),
            "checked": "every image equal to libjpeg-turbo's scaled decode (simplejpeg at "
                       "exactly 1/scale)" + (", then Pillow's resize and crop of it"
                                             if transform else "") + ", in this run",
            "what": "the same files again, decoded at the scale by the cores' reduced IDCTs; "
                    "input pixels are the full-size images' (the work a file stands for)"}
    report["files"] = rows
    report["failures"] = failures
    report["ok"] = not failures
    return report


def print_table(report, out):
    """A readable summary of :func:`bench_device`'s report."""
    c = report["config"]
    lines = [f"device: simulated board, {c['cores']} cores, {c['link_bytes']}-byte link"
             f"{' + engine' if c['conv'] else ''}; {report['images']} images, "
             f"{report['pixels'] / 1e6:.1f} Mpixels ({report['checked']})",
             f"device cycles {report['device_cycles']}: {report['pixels_per_clock']:.3f} "
             f"pixels/clock"]
    if "efficiency" in report:
        lines.append(f"one core fed directly: {report['core_pixels_per_clock']:.3f} "
                     f"pixels/clock; efficiency {report['efficiency']:.3f}")
    lines.append(f"libjpeg-turbo, one CPU core: "
                 f"{report['cpu']['libjpeg_turbo_megapixels_per_second_one_core']:.0f} MP/s")
    for key in ("xdma_250mhz", "stated_clock"):
        w = report["worth"][key]
        lines.append(f"at {w['clock_mhz']:g} MHz ({w['clock_source']}): "
                     f"{w['megapixels_per_second']:.0f} MP/s, "
                     f"{w['imagenet_images_per_second']:.0f} ImageNet-size images/s, "
                     f"{w['cpu_cores_replaced']:.2f} CPU cores")
    w = report["worth"]["stated_clock"]
    if "megapixels_per_second_per_core" in w:
        lines.append(f"  one core fed directly at {w['clock_mhz']:g} MHz: "
                     f"{w['megapixels_per_second_per_core']:.0f} MP/s, "
                     f"{w['per_core_vs_cpu_core']:.2f}x libjpeg-turbo on one CPU core")
    if "transform" in report:
        t = report["transform"]
        lines.append(f"with {t['transform']} resizing on the cores: "
                     f"{t['input_pixels_per_clock']:.3f} input pixels/clock, "
                     f"{t['keep_pace']:.3f} of the rate without "
                     f"({t['resized_on_device']} resized on the device)")
    if "scaled" in report:
        t = report["scaled"]
        lines.append(f"decoded at {t['scale']}{' with ' + t['transform'] if t['transform'] else ''}"
                     f" on the cores: {t['input_pixels_per_clock']:.3f} input pixels/clock, "
                     f"{t['speedup']:.2f}x the full-size decode "
                     f"({t['resized_on_device']} resized on the device)")
    lines.append(f"simulator: {report['simulated_cycles_per_second'] / 1e6:.2f} M cycles/s, "
                 f"{report['decoded_megapixels_per_wall_second']:.2f} decoded MP per wall "
                 f"second")
    for f in report["failures"]:
        lines.append(f"FAILED {f}")
    print("\n".join(lines), file=out)


def bench_conv_device(model="resnet18", names=None, seed=2, progress=None, **board):
    """Every convolution layer of ``model`` on the simulated board's engine (random int8
    tensors, each layer compared with the golden model): the engine's own CONV_CYCLES, the
    device's span from the first word's arrival to the last result's departure, and the cycle
    model's prediction of the engine fed directly (within 0.2 % of `dlforge bench conv`'s
    measurements on every ResNet-18 layer, docs/conv-engine.md)."""
    from dlforge.host.device.accelerator import AcceleratorDevice
    from dlforge.host.conv.networks import resnet18_layers
    from dlforge.host.conv.run import engine_config, run_conv
    from dlforge.host.conv.random_layer import expected_output, random_tensors
    if model != "resnet18":
        raise ValueError(f"unknown model {model!r}: resnet18")
    from dlforge.sim.tools.progress import Progress
    progress = progress or Progress("bench conv", enabled=False)
    layers = [layer for layer in resnet18_layers() if not names or layer.name in names]
    rng = np.random.default_rng(seed)
    rows, failures = [], []
    progress.phase("starting the simulated board")
    with AcceleratorDevice.simulated("sim", **board) as device:
        cfg = engine_config(device)
        info = device.info()
        progress.phase("layers through the board's engine, each checked")
        for k, layer in enumerate(layers):
            progress.update(f"layers done, now {layer.name}", k, len(layers))
            t = random_tensors(layer, cfg, rng)
            y, r = run_conv(t.x, t.w, t.bias.astype(np.int32), t.multiplier, t.shift,
                            stride=layer.stride, padding=layer.padding, groups=layer.groups,
                            relu=layer.relu, pool=layer.pool,
                            residual=None if t.residual is None else t.residual[None],
                            device=device)
            exact = bool(np.array_equal(y[0], expected_output(layer, t)))
            if not exact:
                failures.append(f"{layer.name}: differs from the golden model")
            direct = layer.macs / cfg.macs_per_clock / r["predicted_cycles"]
            rows.append({"layer": layer.name, "macs": layer.macs, "tiles": r["tiles"],
                         "predicted_cycles_fed_directly": r["predicted_cycles"],
                         "engine_cycles": r["cycles"], "device_cycles": r["device_cycles"],
                         "utilization_fed_directly": round(direct, 4),
                         "utilization_engine": r["utilization"],
                         "utilization_device": r["device_utilization"],
                         "device_vs_direct": round(r["device_utilization"] / direct, 4),
                         "bit_exact": exact})
    macs = sum(r["macs"] for r in rows)
    cycles = sum(r["device_cycles"] for r in rows)
    return {"benchmark": "conv-device", "board": info, "config": cfg.as_dict(),
            "checked": "every layer bit-exact to the int8 golden model, in this run",
            "layers": rows,
            "network_utilization_device": macs / cfg.macs_per_clock / cycles,
            "worst_device_vs_direct": min(r["device_vs_direct"] for r in rows),
            "failures": failures, "ok": not failures}
