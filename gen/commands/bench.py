"""``dlforge bench BENCH``: one subcommand per bench, each taking only its own options.

``dlforge bench --help`` lists the benches, ``dlforge bench BENCH --help`` one bench's options;
an option of another bench is refused.  The block benches (a registered block's speed in
simulation, every result checked against the golden model in the same run) take that block's
parameters; ``device``, ``loader``, ``sim-board``, ``network`` and ``sched`` measure the
simulated board, the host runtime, a whole network and the GPU scheduler.  Every bench but
``sched`` prints one JSON object with ``--json`` (else a table), its progress on stderr.

A bench's options are added to its parser when that bench is parsed or its help printed
(:class:`LateOptionsParser`): ``sched``'s choices come from modules that import PyTorch, an
optional dependency that no other command should wait for.
"""

import argparse
import io
import json
import sys
from pathlib import Path

from dlforge.sim.tools.progress import Progress

from ..blocks import BLOCKS, get_block
from .options import add_block_params, block_params, require_matplotlib, scale

__all__ = ["PLOTS", "LateOptionsParser", "add_commands", "cmd_bench", "cmd_bench_sched"]

#: The benches that take ``--plot``, and what it draws.
PLOTS = {"jpeg": "pixels per clock per file, by layout",
         "device": "pixels per clock per file, by layout",
         "conv": "utilisation per layer"}


class LateOptionsParser(argparse.ArgumentParser):
    """An argument parser whose options ``options(parser)`` adds when it is first used (to
    parse, or to print its help or usage), so that building the ``dlforge`` parser imports
    nothing a bench alone needs (``bench sched``: PyTorch)."""

    def __init__(self, *args, options=None, **kwargs):
        super().__init__(*args, **kwargs)
        self._late_options = options

    def _add_late_options(self):
        options, self._late_options = self._late_options, None
        if options is None:
            return
        try:
            options(self)
        except ImportError as exc:
            self.error(f"needs {exc.name or 'a package'}, which is not installed ({exc}); "
                       f"PyTorch: pip install torch, or the dlforge[torch] extra")

    def parse_known_args(self, args=None, namespace=None):
        """Add the options, then parse as argparse does."""
        self._add_late_options()
        return super().parse_known_args(args, namespace)

    def format_help(self):
        """Add the options, then the help as argparse writes it."""
        self._add_late_options()
        return super().format_help()

    def format_usage(self):
        """Add the options, then the usage line as argparse writes it."""
        self._add_late_options()
        return super().format_usage()


def cmd_bench(args):
    """Run the bench ``args.bench`` (its ``args.measure``), its progress on stderr; print its
    report as one JSON object with ``--json`` (else a table), draw ``--plot``.  Exit status 1
    when a result was wrong (or, for the loader, the host over its budget): a bench is also a
    check, so a script can rely on its status."""
    if getattr(args, "plot", None):
        require_matplotlib()                    # before a run of minutes, not after
    with Progress(f"dlforge bench {args.bench}") as progress:
        report, ok, text = args.measure(args, progress)
    if getattr(args, "plot", None):
        from dlforge.gen.bench.plot import plot_report
        plot_report(report, args.plot)
        print(f"plot: {args.plot}", file=sys.stderr)
    print(json.dumps(report, indent=2) if args.json else text)
    return 0 if ok else 1


def cmd_bench_sched(args):
    """Train stock PyTorch and the scheduled backward side by side
    (:func:`dlforge.gen.bench.sched.bench_sched`); print images per second of both and their
    ratio, or every figure with ``--json``."""
    from dlforge.gen.bench.sched import bench_sched
    with Progress("dlforge bench sched") as progress:
        progress.phase(f"{args.model} on {args.device}: stock PyTorch, then the "
                       f"scheduled backward")
        result = bench_sched(args.device, args.model, args.batch, args.steps,
                             args.world_size, args.trace, args.image_size, args.classes,
                             args.warmup, args.executor, args.bucket_mb, threads=args.threads)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{result['model']} on {result['device']}, batch {result['batch']} x "
          f"{result['world_size']} process(es), {result['steps']} steps, "
          f"{result['image_size']} px, executor {result['executor']}")
    print(f"  stock      {result['stock_images_per_s']:10.2f} images/s")
    print(f"  scheduled  {result['sched_images_per_s']:10.2f} images/s")
    print(f"  ratio      {result['ratio']:10.4f}  (scheduled / stock)")
    print(f"  max |param difference| after the steps: {result['max_param_abs_diff']:.3g}")
    if result["trace"]:
        print(f"  trace: {result['trace']}")
    return 0


# ---- what each bench runs: (args, progress) -> (report, ok, table) ----------------------------

def _takes_files(block):
    """Whether ``block``'s bench decodes JPEG files (its testbench parameters name a corpus):
    then it takes FILEs, ``--corpus`` and ``--limit``."""
    return "corpus" in block.bench[1]


def _block(args, progress, **tb_options):
    """A block's bench testcase in simulation (:func:`dlforge.gen.regression.run_bench`);
    ``tb_options``: testbench parameters set (None: removed)."""
    from dlforge.gen.regression import run_bench
    block = get_block(args.bench)
    params = block.full_params(block_params(block, args))
    component = block.build(**params)
    tb = block.tb_params(component) | block.bench[1]
    if _takes_files(block):
        if args.corpus:
            tb["corpus"] = args.corpus
        if args.files:
            missing = [f for f in args.files if not Path(f).is_file()]
            if missing:
                raise ValueError(f"no such file: {missing[0]}")
            tb.pop("corpus")
            tb["files"] = [str(Path(f).resolve()) for f in args.files]
        if args.limit:
            tb["limit"] = args.limit
    for key, value in tb_options.items():
        if value is None:
            tb.pop(key, None)
        else:
            tb[key] = value
    report = run_bench(block.name, params, tb, component=component, sim=args.sim,
                       check=not args.no_check, progress=progress,
                       clock_mhz=getattr(args, "clock", None))
    return report, report["passed"], _block_table(report)


def _block_table(report):
    from dlforge.gen.bench.table import format_report
    params = " ".join(f"{k}={v}" for k, v in report["parameters"].items())
    title = (f"bench {report['block']} ({params or 'defaults'}) on {report['simulator']}: "
             f"{'passed' if report['passed'] else 'FAILED'}")
    return format_report(
        report, title,
        headline=("checked", "files", "ok", "aggregate_pixels_per_clock", "at_clock", "cpu",
                  "pixels_per_clock_median", "pixels_per_clock_min", "mean_utilization",
                  "cycles_per_block", "samples_per_clock", "latency_cycles",
                  "symbols_per_clock_median", "symbols_per_clock_min", "failed"),
        skip=("block", "passed", "parameters", "simulator", "testbench", "testcase",
              "testbench_params", "config"),
        tables={"per_file": ["file", "mode", "layout", "status", "width", "height", "cycles",
                             "pixels_per_clock", "cycles_per_symbol", "bit_exact"],
                "layers": ["name", "macs", "tiles", "predicted_cycles", "cycles",
                           "utilization"]})


def _conv(args, progress):
    """The engine's layers fed directly (the conv block's bench) or, with ``--device sim``,
    through the simulated board's link: what a layer costs there."""
    names = args.layers.split(",") if args.layers else None
    if not args.device:
        return _block(args, progress, layers=args.model, names=names)
    from dlforge.gen.bench.device import bench_conv_device
    from dlforge.gen.bench.table import format_report
    report = bench_conv_device(args.model, names, progress=progress)
    return report, report["ok"], format_report(
        report, f"bench conv --device sim: {'ok' if report['ok'] else 'FAILED'}",
        headline=("network_utilization_device", "worst_device_vs_direct", "ok",
                  "checked", "failures"), skip=("board",))


def _device(args, progress):
    """JPEG files through the simulated board, each image checked."""
    from dlforge.gen.bench.device import bench_device, print_table
    report = bench_device(args.files or None, corpus=args.corpus, limit=args.limit,
                          cores=args.cores, link_bytes=args.link_bytes, conv=args.conv,
                          reference=not args.no_reference, transform=args.transform,
                          scale=args.scale, clock_mhz=args.clock, progress=progress,
                          **({"contexts": args.contexts} if args.contexts != 1 else {}))
    out = io.StringIO()
    print_table(report, out)
    return report, report["ok"], out.getvalue().rstrip("\n")


def _loader(args, progress):
    """The host's CPU per image on the device path; a wrong image fails it on any device, the
    host over its budget on the DMA link."""
    from dlforge.gen.bench.table import format_report
    on_dma = args.device == "sim:dma"
    if args.transform:
        from dlforge.gen.bench.transform import bench_transform
        progress.phase(f"loader with the {args.transform} transform on {args.device}")
        report = bench_transform(args.files or None, args.transform, args.device,
                                 passes=args.passes or 4, batches=args.batches)
        ok = not (report["mismatches"] or (on_dma and not report["within_5_percent"]))
        return report, ok, format_report(
            report, f"bench loader --transform {report['transform']} on {report['device']}: "
                    f"{'ok' if ok else 'FAILED'}",
            headline=("host_vs_cpu_pipeline", "within_5_percent", "host_cpu_s_per_image",
                      "cpu_pipeline_s_per_image", "images_per_s", "images", "mismatches",
                      "checked"))
    from dlforge.gen.bench.loader import bench_loader, bench_loader_both
    if on_dma:
        progress.phase("loader on the simulated board's DMA link, then TCP")
        report = bench_loader_both(args.files or None, passes=args.passes or 8,
                                   batches=args.batches)
    else:
        progress.phase(f"loader on {args.device}")
        report = bench_loader(args.files or None, device=args.device,
                              passes=args.passes or 8, batches=args.batches)
    wrong = report["mismatches"] or (report.get("tcp") or {}).get("mismatches")
    ok = not (wrong or (on_dma and not report["within_5_percent"]))
    return report, ok, format_report(
        report, f"bench loader on {report['device']}: {'ok' if ok else 'FAILED'}",
        headline=("host_vs_libjpeg", "within_5_percent", "host_cpu_s_per_image",
                  "libjpeg_cpu_s_per_image", "images", "ok", "mismatches", "checked"))


def _sim_board(args, progress):
    """Simulated cycles per second of wall time with the decoder cores busy."""
    from dlforge.gen.bench.sim_board import bench_sim_board
    from dlforge.gen.bench.table import format_report
    progress.phase("the simulated board's decoder cores, busy")
    report = bench_sim_board(cores=args.cores)
    return report, True, format_report(
        report, "bench sim-board: simulated cycles per second of wall time",
        headline=("busy_cycles_per_s", "cycles_per_s", "pixels", "busy_seconds",
                  "build_or_lookup_seconds"))


def _network(args, progress):
    """A whole network on a device (or, with ``--images``, decode -> infer), every output
    checked against the golden network model."""
    from dlforge.gen.bench.network import bench_network, bench_network_images
    from dlforge.gen.bench.table import format_report
    if args.images:
        report = bench_network_images(args.model, args.limit, args.device, progress=progress)
        return report, report["ok"], format_report(
            report, f"bench network --images --model {args.model}: "
            f"{'ok' if report['ok'] else 'FAILED'}",
            headline=("summary", "accuracy", "bit_exact", "checked", "failures"),
            skip=("run",))
    report = bench_network(args.model, args.limit, args.device, progress=progress)
    return report, report["ok"], format_report(
        report, f"bench network --model {args.model}: {'ok' if report['ok'] else 'FAILED'}",
        headline=("pipelined_vs_naive", "accuracy", "macs_per_image", "ok", "checked",
                  "failures"), skip=("pipelined", "naive"))


# ---- each bench's options -----------------------------------------------------------------------

def _files(p, what):
    p.add_argument("files", nargs="*", metavar="FILE", help=f"JPEG files to {what}")


def _limit(p, what="files"):
    p.add_argument("--limit", type=int, default=None, help=f"at most this many {what}")


def _mhz(text):
    """``--clock MHZ`` as argparse's type: a positive number (the bench's own rule)."""
    from dlforge.gen.bench.device import stated_clock
    try:
        return stated_clock(float(text))[0]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"a clock is a positive number of MHz, not {text!r}") from None


def _clock(p, what):
    from dlforge.gen.bench.device import ECP5_CORE_FMAX_MHZ, ECP5_PAIR_FMAX_MHZ
    p.add_argument("--clock", type=_mhz, default=None, metavar="MHZ",
                   help=f"the clock {what} reported at, beside libjpeg-turbo on one CPU "
                        f"core (default {ECP5_CORE_FMAX_MHZ:g}: the decoder core's measured "
                        f"ECP5 Fmax; {ECP5_PAIR_FMAX_MHZ:g} with --contexts 2)")


def _block_options(block):
    """The options of ``bench BLOCK``: the simulator, the check, files where the bench
    decodes them, ``--plot`` where it draws, and the block's own parameters."""
    def options(p):
        p.add_argument("--sim", choices=("verilator", "icarus"), default=None,
                       help="simulator (default: $SIM, else verilator)")
        p.add_argument("--no-check", action="store_true",
                       help="time only, without comparing each result with the golden model "
                            "(the report says checked: false)")
        if _takes_files(block):
            _files(p, "decode (default: --corpus)")
            p.add_argument("--corpus", choices=("quick", "full", "photos", "heavy", "shipped"),
                           default=None, help=f"JPEG corpus when no FILE is given (default "
                                              f"{block.bench[1]['corpus']}; heavy: quality-90 "
                                              f"photos of 0.2-0.3 MP written by libjpeg)")
            _limit(p)
        if block.name == "jpeg":
            _clock(p, "the core's megapixels per second are")
        if block.name == "conv":
            p.add_argument("--model", choices=("resnet18",), default="resnet18",
                           help="the network whose convolution layers run (default resnet18)")
            p.add_argument("--layers", default=None,
                           help="comma-separated layer names (default: every layer)")
            p.add_argument("--device", choices=("sim",), default=None,
                           help="sim: the layers through the simulated board's link (its "
                                "engine) instead of the engine alone; the block parameters "
                                "then do not apply")
        _common(p, block.name)
        add_block_params(p, block)
    return options


def _device_options(p):
    from dlforge.gen.bench.device import DEVICE_CORPORA
    from dlforge.sim.board.build import DEFAULTS
    _files(p, "decode (default: --corpus)")
    p.add_argument("--corpus", choices=DEVICE_CORPORA, default="photos",
                   help="JPEG files when no FILE is given: the 64 photos of the photo corpus, "
                        "the heavy corpus (quality-90 photos of 0.2-0.3 MP written by "
                        "libjpeg) or scikit-image's shipped files (default photos)")
    _limit(p)
    p.add_argument("--cores", type=int, default=None,
                   help=f"decoder cores of the simulated board (default {DEFAULTS['cores']})")
    p.add_argument("--link-bytes", type=int, default=None,
                   help=f"host link width in bytes a clock (default {DEFAULTS['link_bytes']})")
    p.add_argument("--contexts", type=int, choices=(1, 2), default=1,
                   help="files each core decodes at once: 2 builds C-slowed cores, two files "
                        "each at half a core's rate per clock (default 1)")
    p.add_argument("--conv", action="store_true",
                   help="the simulated board with the convolution engine")
    p.add_argument("--no-reference", action="store_true",
                   help="skip the one-core reference run (no efficiency, no per-core "
                        "rate)")
    p.add_argument("--transform", choices=("eval",), default=None,
                   help="the files again through torchvision's eval pipeline, resized by the "
                        "cores (keep_pace)")
    p.add_argument("--scale", type=scale, default=1, metavar="1/N",
                   help="the files again decoded at 1/2, 1/4 or 1/8 by the cores' reduced "
                        "IDCTs (with --transform eval: then resized), beside the full-size "
                        "decode")
    _clock(p, "the device's and one core's megapixels per second are")
    _common(p, "device")


def _loader_options(p):
    from dlforge.host.device.open import DEVICE_HELP
    _files(p, "stream (default: scikit-image's and a few photo-corpus files; with "
              "--transform: ImageNet-size photos)")
    p.add_argument("--device", default="sim:dma",
                   help="the device to measure the host path against (default sim:dma, "
                        f"with TCP beside it): {DEVICE_HELP}")
    p.add_argument("--transform", choices=("eval", "train"), default=None,
                   help="training-ready images (torchvision's pipeline) against the CPU "
                        "pipeline (Pillow decode + the same transform) on ImageNet-size "
                        "photos (default passes 4)")
    p.add_argument("--passes", type=int, default=None, metavar="N",
                   help="rounds of the files, streamed as one (default 8; 4 with --transform)")
    p.add_argument("--batches", type=int, default=3, metavar="N",
                   help="times the rounds are streamed; the median batch's figure counts "
                        "(default 3)")
    _common(p, "loader")


def _sim_board_options(p):
    p.add_argument("--cores", type=int, default=1, help="decoder cores kept busy (default 1)")
    _common(p, "sim-board")


def _network_options(p):
    from dlforge.gen.bench.network import MODELS
    from dlforge.host.device.open import DEVICE_HELP
    p.add_argument("--model", choices=MODELS, default="resnet18",
                   help="the whole network run: resnet18 (default), or digits: a CNN trained "
                        "in the run on scikit-learn's digits")
    _limit(p, "images (default 32 digits or 2 ResNet-18; with --images 32 or 8)")
    p.add_argument("--device", default="sim", help=f"(default sim) {DEVICE_HELP}")
    p.add_argument("--images", action="store_true",
                   help="decode -> infer: JPEG files through the device's decoder and "
                        "resampler into the network")
    _common(p, "network")


def _sched_options(p):
    from dlforge.host.sched.models import MODELS
    from dlforge.host.sched.split_backward import EXECUTORS
    p.add_argument("--device", default="cpu", help="cpu or cuda (cuda:N)")
    p.add_argument("--model", choices=MODELS, default="resnet18")
    p.add_argument("--batch", type=int, default=None, help="images per process and step")
    p.add_argument("--steps", type=int, default=None, help="timed steps (after --warmup)")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps first")
    p.add_argument("--world-size", type=int, default=1,
                   help="processes (gloo on CPU, nccl on CUDA with one GPU each)")
    p.add_argument("--image-size", type=int, default=None, help="pixels a side")
    p.add_argument("--classes", type=int, default=None, help="output classes")
    p.add_argument("--executor", choices=EXECUTORS, default="auto",
                   help="where weight gradients run (auto: side stream on CUDA, thread on CPU)")
    p.add_argument("--bucket-mb", type=float, default=25.0, help="all-reduce bucket size")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    p.add_argument("--trace", metavar="FILE", default=None,
                   help="write a Chrome/Perfetto trace JSON here")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")


def _common(p, name):
    if name in PLOTS:
        p.add_argument("--plot", metavar="FILE.png", default=None,
                       help=f"draw the figures (matplotlib): {PLOTS[name]}")
    p.add_argument("--json", action="store_true",
                   help="print the report as one JSON object (else a table)")


def add_commands(sub):
    """Register ``bench`` and its benches on the ``dlforge`` subparsers ``sub``."""
    what = ("measure a block's speed in simulation (every result checked in the same run), "
            "the simulated board, the host runtime, a network or the GPU scheduler")
    bench = sub.add_parser("bench", help=what + " (a table, or --json)",
                           description=what + "; `dlforge bench BENCH --help` for a bench's "
                                              "options")
    benches = bench.add_subparsers(dest="bench", required=True, metavar="BENCH",
                                   parser_class=LateOptionsParser)

    def add(name, help, options, measure=None, func=cmd_bench, description=None):
        p = benches.add_parser(name, help=help, description=description or help,
                               options=options)
        p.set_defaults(func=func, measure=measure)

    for name in BLOCKS():
        block = get_block(name)
        if block.bench is None:
            continue
        if name == "conv":
            add(name, "the convolution engine: each ResNet-18 layer's cycles and utilisation, "
                      "fed directly in simulation or through the simulated board's link "
                      "(--device sim)", _block_options(block), _conv)
        else:
            add(name, f"{block.summary}; its speed in simulation, every result checked",
                _block_options(block), _block)
    add("device", "the simulated board: JPEG files through its decoder cores, pixels per "
                  "clock at the host interface", _device_options, _device)
    add("loader", "the host's CPU time per image on the device path against libjpeg-turbo's "
                  "(or, with --transform, the CPU pipeline's)", _loader_options, _loader)
    add("sim-board", "the simulated board's speed: simulated cycles per second of wall time",
        _sim_board_options, _sim_board)
    add("sched", "the GPU scheduler against stock PyTorch: training images per second of "
                 "both, side by side (needs PyTorch)", _sched_options, func=cmd_bench_sched,
        description="Train stock PyTorch and the scheduled backward (input gradients first, "
                    "weight gradients and all-reduces overlapped) side by side; print images/s "
                    "of both.")
    add("network", "a whole network quantised and run on a device, the pipelined "
                   "integration against the naive one", _network_options, _network)
