"""The ``dlforge`` command: one entry point for generating, simulating, benchmarking, building."""

import argparse
import json
import sys

from .blocks import BLOCKS, get_block
from .axi_command import add_axi_command
from .board_commands import add_board_commands
from .runtime_commands import _scale as _scale_arg, add_runtime_commands
from .infer_command import add_infer_command

__all__ = ["main"]


def _add_block_params(parser):
    """Every block parameter as an option; each block ignores the ones it does not declare."""
    seen = {}
    for name in BLOCKS():
        for p in get_block(name).params:
            if p.name not in seen:
                seen[p.name] = p
                parser.add_argument(f"--{p.name.replace('_', '-')}", type=p.type, default=None,
                                    help=f"{p.help} (default {p.default}"
                                         + (f"; one of {', '.join(map(str, p.choices))})" if p.choices else ")"))


def _block_params(block, args):
    return {p.name: getattr(args, p.name) for p in block.params if getattr(args, p.name) is not None}


def cmd_gen(args):
    from .verilog import generate
    block = get_block(args.block)
    path, info = generate(block.name, args.output, **_block_params(block, args))
    if args.json:
        print(json.dumps({"verilog": str(path), "manifest": info}, indent=2))
    else:
        print(f"wrote {path} and {path.parent / 'manifest.json'} "
              f"(top {info['top']}, {len(info['ports'])} ports)")
    return 0


def cmd_sim(args):
    from .regression import run_regression
    block = get_block(args.block)
    chosen = _block_params(block, args)
    if chosen:
        param_sets = [chosen]
    else:
        param_sets = list(block.regression) or [block.defaults()]
    options = {}
    if args.blocks is not None:
        options["blocks"] = args.blocks
    if args.seed is not None:
        options["seed"] = args.seed
    from dlforge.sim.tools.runner import default_simulator
    with _progress(f"dlforge sim {block.name}") as progress:
        rows = run_regression(block.name, sim=args.sim or (None if args.gate_level
                                                           else default_simulator()),
                              waves=args.waves, param_sets=param_sets, quiet=not args.verbose,
                              progress=progress, gate_level=args.gate_level, **options)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(_table(rows))
    for row in rows:
        if not row["passed"]:
            print(f"FAILED: {row['block']} {row['parameters']}: see {row['log_dir']}/sim.log",
                  file=sys.stderr)
        if row["waves"]:
            print(f"waves: {row['waves']}", file=sys.stderr)
        if row.get("gate_level"):
            print(f"simulated yosys' ECP5 netlist {row['gate_level']} (gate level)",
                  file=sys.stderr)
    return 0 if all(row["passed"] for row in rows) else 1


def cmd_synth(args):
    from ..boards.ooc import DEVICES, synthesize
    block = get_block(args.block)
    params = block.full_params(_block_params(block, args))
    top = block.module_name(params)
    out_dir = args.output or f"build/synth/{top}-{args.device}"
    _check_plot(args.plot, None)
    if args.plot and DEVICES[args.device][1] is None:
        raise ValueError(f"--plot draws Fmax, which {args.device} (synthesis only) has not")
    with _progress(f"dlforge synth {block.name}") as progress:
        progress.phase("elaborating")
        figures = synthesize(block.build(**params), top, out_dir, device=args.device,
                             freq_mhz=args.freq, seed=args.seed, progress=progress)
    figures["parameters"] = params
    if args.plot:
        from dlforge.gen.bench.plot import plot_report
        plot_report(figures, args.plot, kind="fmax")
        print(f"plot: {args.plot}", file=sys.stderr)
    if args.json:
        print(json.dumps(figures, indent=2))
    elif figures.get("projection"):
        print(f"{top} on {args.device} (projection: {figures['projection']}): "
              f"{figures['luts']} LUT6, {figures['ffs']} FF, {figures['lutram']} LUT as memory, "
              f"{figures['bram']} BRAM36, {figures['uram']} URAM, {figures['dsp']} DSP48E2")
    else:
        print(f"{top} on {args.device}: {figures['luts']} LUT4, {figures['ffs']} FF, "
              f"{figures['lutram']} LUT-RAM, {figures['bram']} block RAM, {figures['dsp']} DSP; "
              f"Fmax {figures['fmax_mhz']} MHz (target {args.freq:g}: "
              f"{'met' if figures['meets_timing'] else 'missed'})")
    return 0


def _progress(what):
    """The command's progress on stderr (see :mod:`dlforge.sim.tools.progress`)."""
    from dlforge.sim.tools.progress import Progress
    return Progress(what)


#: The benches ``--plot`` draws, and what.
PLOTS = {"jpeg": "pixels per clock per file, by layout",
         "device": "pixels per clock per file, by layout",
         "conv": "utilisation per layer"}


def _check_plot(path, name):
    """Refuse ``--plot`` before a long run if it cannot be drawn."""
    if not path:
        return
    import importlib.util
    if name is not None and name not in PLOTS:
        raise ValueError(f"--plot draws {', '.join(f'bench {k} ({v})' for k, v in PLOTS.items())}"
                         f" and synth (Fmax); not {name}")
    if importlib.util.find_spec("matplotlib") is None:
        raise RuntimeError("--plot needs matplotlib, which is not installed: "
                           "pip install 'dlforge[plot]' (or pip install matplotlib)")


def _emit(args, report, text, ok=True):
    """Print the report (JSON with ``--json``, else ``text``), draw ``--plot``; the exit
    status."""
    if getattr(args, "plot", None):
        from dlforge.gen.bench.plot import plot_report
        plot_report(report, args.plot)
        print(f"plot: {args.plot}", file=sys.stderr)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(text)
    return 0 if ok else 1


def cmd_bench(args):
    """Run a benchmark: a block's speed in simulation (every result checked in the same run),
    the host runtime (loader), the simulated board or a device; a table, or JSON."""
    _check_plot(args.plot, args.block)
    with _progress(f"dlforge bench {args.block}") as progress:
        report, ok, text = _bench(args, progress)
    return _emit(args, report, text, ok)


def _bench(args, progress):
    """(report, ok, table) of the bench ``args`` asks for."""
    from dlforge.gen.bench.table import format_report
    if args.no_check and args.block not in BLOCKS():
        raise ValueError(f"bench {args.block} always checks every result (no --no-check)")
    if args.block == "loader" and args.transform:
        from dlforge.gen.bench.transform import bench_transform
        progress.phase(f"loader with the {args.transform} transform on {args.device or 'sim:dma'}")
        report = bench_transform(args.files or None, args.transform, args.device or "sim:dma",
                                 passes=args.passes or 4,
                                 batches=args.batches)
        # a wrong image fails it on any device; the budget, on the DMA link
        over = args.device in (None, "sim:dma") and not report["within_5_percent"]
        ok = not (report["mismatches"] or over)
        return report, ok, format_report(
            report, f"bench loader --transform {report['transform']} on {report['device']}: "
                    f"{'ok' if ok else 'FAILED'}",
            headline=("host_vs_cpu_pipeline", "within_5_percent", "host_cpu_s_per_image",
                      "cpu_pipeline_s_per_image", "images_per_s", "images", "mismatches",
                      "checked"))
    if args.block == "loader":
        from dlforge.gen.bench.loader import bench_loader, bench_loader_both
        if args.device in (None, "sim:dma"):
            # the DMA link, with TCP beside it; exit 1 past the host's budget on DMA
            progress.phase("loader on the simulated board's DMA link, then TCP")
            report = bench_loader_both(args.files or None, passes=args.passes or 8,
                                       batches=args.batches)
        else:
            progress.phase(f"loader on {args.device}")
            report = bench_loader(args.files or None, device=args.device,
                                  passes=args.passes or 8,
                                  batches=args.batches)
        # a wrong image fails it on any device; the budget, on the DMA link
        wrong = report["mismatches"] or (report.get("tcp") or {}).get("mismatches")
        over = args.device in (None, "sim:dma") and not report["within_5_percent"]
        ok = not (wrong or over)
        return report, ok, format_report(
            report, f"bench loader on {report['device']}: {'ok' if ok else 'FAILED'}",
            headline=("host_vs_libjpeg", "within_5_percent", "host_cpu_s_per_image",
                      "libjpeg_cpu_s_per_image", "images", "ok", "mismatches", "checked"))
    if args.block == "device":
        import io
        from dlforge.gen.bench.device import bench_device, print_table
        report = bench_device(args.files or None, corpus=args.corpus or "photos",
                              limit=args.limit, cores=args.cores, link_bytes=args.link_bytes,
                              conv=args.conv, reference=not args.no_reference,
                              transform=args.transform, scale=args.scale, progress=progress)
        out = io.StringIO()
        print_table(report, out)
        return report, report["ok"], out.getvalue().rstrip("\n")
    if args.block == "sim-board":
        from dlforge.gen.bench.sim_board import bench_sim_board
        progress.phase("the simulated board's decoder cores, busy")
        report = bench_sim_board(cores=args.cores or 1)
        return report, True, format_report(
            report, "bench sim-board: simulated cycles per second of wall time",
            headline=("busy_cycles_per_s", "cycles_per_s", "pixels", "busy_seconds",
                      "build_or_lookup_seconds"))
    if args.block == "network":
        from dlforge.gen.bench.network import bench_network
        if args.layers:
            raise ValueError("--layers is for the conv block")
        if args.images:
            from dlforge.gen.bench.network import bench_network_images
            report = bench_network_images(args.model, args.limit, args.device or "sim",
                                          progress=progress)
            return report, report["ok"], format_report(
                report, f"bench network --images --model {args.model}: "
                f"{'ok' if report['ok'] else 'FAILED'}",
                headline=("summary", "accuracy", "bit_exact", "checked", "failures"),
                skip=("run",))
        report = bench_network(args.model, args.limit, args.device or "sim", progress=progress)
        return report, report["ok"], format_report(
            report, f"bench network --model {args.model}: {'ok' if report['ok'] else 'FAILED'}",
            headline=("pipelined_vs_naive", "accuracy", "macs_per_image", "ok", "checked",
                      "failures"), skip=("pipelined", "naive"))
    if args.block == "conv" and args.device:
        # through a device's link (the simulated board): what the layer costs there
        if args.device != "sim":
            raise ValueError("bench conv --device: only sim (the simulated board)")
        from dlforge.gen.bench.device import bench_conv_device
        report = bench_conv_device(args.model, args.layers.split(",") if args.layers else None,
                                   progress=progress)
        return report, report["ok"], format_report(
            report, f"bench conv --device sim: {'ok' if report['ok'] else 'FAILED'}",
            headline=("network_utilization_device", "worst_device_vs_direct", "ok",
                      "checked", "failures"), skip=("board",))
    block = get_block(args.block)
    if block.bench is None:
        raise ValueError(f"{block.name} has no benchmark")
    params = block.full_params(_block_params(block, args))
    component = block.build(**params)
    testcase, overrides = block.bench
    tb = block.tb_params(component) | overrides
    if args.corpus:
        tb["corpus"] = args.corpus
    if args.files:
        from pathlib import Path
        if "corpus" not in tb:
            raise ValueError(f"{block.name} does not take files")
        missing = [f for f in args.files if not Path(f).is_file()]
        if missing:
            raise ValueError(f"no such file: {missing[0]}")
        tb.pop("corpus")
        tb["files"] = [str(Path(f).resolve()) for f in args.files]
    if args.limit:
        tb["limit"] = args.limit
    if block.name == "conv":
        tb["layers"] = args.model
        if args.layers:
            tb["names"] = args.layers.split(",")
        else:
            tb.pop("names", None)
    elif args.model != "resnet18" or args.layers:
        raise ValueError("--model and --layers are for the conv block")
    from dlforge.gen.regression import run_bench
    report = run_bench(block.name, params, tb, component=component, sim=args.sim,
                       check=not args.no_check, progress=progress)
    return report, report["passed"], _block_bench_table(report)


def _block_bench_table(report):
    from dlforge.gen.bench.table import format_report
    params = " ".join(f"{k}={v}" for k, v in report["parameters"].items())
    title = (f"bench {report['block']} ({params or 'defaults'}) on {report['simulator']}: "
             f"{'passed' if report['passed'] else 'FAILED'}")
    return format_report(
        report, title,
        headline=("checked", "files", "ok", "aggregate_pixels_per_clock",
                  "pixels_per_clock_median", "pixels_per_clock_min", "mean_utilization",
                  "cycles_per_block", "samples_per_clock", "latency_cycles",
                  "symbols_per_clock_median", "symbols_per_clock_min", "failed"),
        skip=("block", "passed", "parameters", "simulator", "testbench", "testcase",
              "testbench_params", "config"),
        tables={"per_file": ["file", "mode", "layout", "status", "width", "height", "cycles",
                             "pixels_per_clock", "cycles_per_symbol", "bit_exact"],
                "layers": ["name", "macs", "tiles", "predicted_cycles", "cycles",
                           "utilization"]})


def _table(rows):
    head = ("parameters", "sim", "tests", "result", "blocks checked", "latency", "clk/block",
            "blocks/clk", "samples/clk")
    lines = []
    for row in rows:
        m = row["metrics"]
        checked = m.get("random_blocks", 0) + m.get("full_rate_blocks", 0) + m.get("stall_blocks", 0)
        lines.append((
            " ".join(f"{k}={v}" for k, v in row["parameters"].items()), row["sim"],
            str(row["tests"]), "pass" if row["passed"] else f"FAIL ({row['failures']})",
            str(checked) if checked else "-", str(m.get("latency_cycles", "-")),
            f"{m['cycles_per_block']:g}" if "cycles_per_block" in m else "-",
            f"{1 / m['cycles_per_block']:.4g}" if "cycles_per_block" in m else "-",
            f"{m['samples_per_clock']:g}" if "samples_per_clock" in m else "-",
        ))
    widths = [max(len(h), *(len(r[i]) for r in lines)) for i, h in enumerate(head)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*head), fmt.format(*("-" * w for w in widths))]
                     + [fmt.format(*r) for r in lines])


def build_parser():
    parser = argparse.ArgumentParser(prog="dlforge", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    gen = sub.add_parser("gen", help="write a block's Verilog and manifest.json")
    gen.add_argument("block", choices=BLOCKS())
    gen.add_argument("-o", "--output", required=True, help="output folder")
    gen.add_argument("--json", action="store_true", help="print the manifest as JSON")
    _add_block_params(gen)
    gen.set_defaults(func=cmd_gen)

    sim = sub.add_parser("sim", help="run a block's cocotb regression")
    sim.add_argument("block", choices=BLOCKS())
    sim.add_argument("--sim", choices=("verilator", "icarus"), default=None,
                     help="simulator (default: $SIM, else verilator)")
    sim.add_argument("--waves", action="store_true", help="record FST waveforms (also WAVES=1)")
    sim.add_argument("--blocks", type=int, default=None,
                     help="how many random and edge-case items the testbench checks")
    sim.add_argument("--seed", type=int, default=None)
    sim.add_argument("--gate-level", action="store_true",
                     help="simulate yosys' ECP5 netlist (synth_ecp5) with the cell models "
                          "instead of the RTL (default simulator then: icarus)")
    sim.add_argument("--json", action="store_true", help="print results as JSON")
    sim.add_argument("-v", "--verbose", action="store_true", help="show simulator output")
    _add_block_params(sim)
    sim.set_defaults(func=cmd_sim)

    bench = sub.add_parser("bench", help="measure a block's speed in simulation (every result "
                                         "checked in the same run), the host runtime (loader) "
                                         "or the simulated board (a table, or --json)")
    bench.add_argument("block", choices=BLOCKS() + ("device", "loader", "sim-board", "sched",
                                                    "network"),
                       help="sched: the GPU scheduler vs stock PyTorch (`dlforge bench sched "
                            "--help` for its options)")
    bench.add_argument("--device", default=None,
                       help="loader: the device to measure the host path against (default "
                            "sim:dma); conv: sim runs the layers through the simulated "
                            "board's link instead of the engine alone")
    bench.add_argument("--passes", type=int, default=None, metavar="N",
                       help="loader: rounds of the files, streamed as one (default 8; 4 with "
                            "--transform)")
    bench.add_argument("--transform", choices=("eval", "train"), default=None,
                       help="loader: training-ready images (torchvision's pipeline) against "
                            "the CPU pipeline (Pillow decode + the same transform) on "
                            "ImageNet-size photos (default passes 4); device: eval only, "
                            "the files again resized by the cores (keep_pace)")
    bench.add_argument("--scale", type=_scale_arg, default=1, metavar="1/N",
                       help="device: the files again decoded at 1/2, 1/4 or 1/8 by the cores' "
                            "reduced IDCTs (with --transform eval: then resized), beside the "
                            "full-size decode")
    bench.add_argument("--batches", type=int, default=3, metavar="N",
                       help="loader: times the rounds are streamed; the median batch's "
                            "figure counts (default 3)")
    bench.add_argument("files", nargs="*", metavar="FILE",
                       help="JPEG files to measure (decoder blocks; default: --corpus)")
    bench.add_argument("--sim", choices=("verilator", "icarus"), default=None)
    bench.add_argument("--corpus", choices=("quick", "full", "photos", "shipped"), default=None,
                       help="JPEG corpus for decoder blocks (device: photos or shipped)")
    bench.add_argument("--json", action="store_true",
                       help="print the report as one JSON object (else a table)")
    bench.add_argument("--plot", metavar="FILE.png", default=None,
                       help="draw the figures (matplotlib): jpeg and device: pixels per clock "
                            "per file by layout; conv: utilisation per layer")
    bench.add_argument("--no-check", action="store_true",
                       help="decoder and conv blocks: time only, without comparing each "
                            "result with the golden model (the report says checked: false)")
    bench.add_argument("--conv", action="store_true",
                       help="device: the simulated board with the convolution engine")
    bench.add_argument("--no-reference", action="store_true",
                       help="device: skip the one-core reference run (no efficiency)")
    bench.add_argument("--limit", type=int, default=None,
                       help="at most this many files (network: images, default 32 digits or "
                            "2 ResNet-18)")
    bench.add_argument("--model", choices=("resnet18", "digits"), default="resnet18",
                       help="conv: the network whose convolution layers run (resnet18); "
                            "network: the whole network run (resnet18, or digits: a CNN "
                            "trained in the run on scikit-learn's digits)")
    bench.add_argument("--images", action="store_true",
                       help="network: decode -> infer, JPEG files through the device's "
                            "decoder and resampler into the network")
    bench.add_argument("--layers", default=None,
                       help="conv: comma-separated layer names (default: every layer)")
    _add_block_params(bench)
    bench.set_defaults(func=cmd_bench)

    add_runtime_commands(sub)
    add_infer_command(sub)
    add_board_commands(sub)
    add_axi_command(sub)

    from ..boards.ooc import DEVICES
    synth = sub.add_parser("synth", help="out-of-context synthesis, place and route of a block "
                                         "(YoWASP yosys + nextpnr): resources and Fmax; "
                                         "xcup (UltraScale+): synthesis only, a projection")
    synth.add_argument("block", choices=BLOCKS())
    synth.add_argument("--device", choices=tuple(DEVICES), default="ecp5-85f")
    synth.add_argument("--freq", type=float, default=100.0, help="target clock in MHz")
    synth.add_argument("--seed", type=int, default=1, help="placer seed")
    synth.add_argument("-o", "--output", default=None, help="work folder (default build/synth/...)")
    synth.add_argument("--json", action="store_true")
    synth.add_argument("--plot", metavar="FILE.png", default=None,
                       help="draw Fmax against the target (matplotlib)")
    _add_block_params(synth)
    synth.set_defaults(func=cmd_synth)
    return parser


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:2] == ["bench", "sched"]:
        # the scheduler's benchmark has its own options (--device cpu|cuda, --model resnet50)
        from dlforge.gen.bench.sched import main as bench_sched_main
        return bench_sched_main(argv[2:])
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # argparse stops filling a trailing positional list at the first option, so files given
    # after options (`bench jpeg --max-width 512 a.jpg`) come back as extras.
    if extra and getattr(args, "files", None) is not None and not any(
            e.startswith("-") for e in extra):
        args.files = list(args.files) + extra
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return args.func(args)
    except (ValueError, KeyError, RuntimeError, TypeError, OverflowError, OSError) as exc:
        print(f"dlforge: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
