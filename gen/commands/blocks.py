"""``dlforge gen|sim|synth BLOCK``: a registered block's Verilog, its cocotb regression, its
out-of-context synthesis.  Each command has one subcommand per block (``dlforge gen --help``
lists them), which takes the command's options and that block's parameters only
(:data:`dlforge.gen.blocks.BLOCKS`)."""

import json
import sys

from dlforge.sim.tools.progress import Progress

from ..blocks import BLOCKS, get_block
from .options import add_block_params, block_params, require_matplotlib

__all__ = ["add_commands", "cmd_gen", "cmd_sim", "cmd_synth"]


def cmd_gen(args):
    """Write the block's Verilog and manifest.json (ports, payload layouts, parameters):
    what a user wiring the block into a shell reads instead of our source."""
    from ..verilog import generate
    block = get_block(args.block)
    path, info = generate(block.name, args.output, **block_params(block, args))
    if args.json:
        print(json.dumps({"verilog": str(path), "manifest": info}, indent=2))
    else:
        print(f"wrote {path} and {path.parent / 'manifest.json'} "
              f"(top {info['top']}, {len(info['ports'])} ports)")
    return 0


def cmd_sim(args):
    """Run the block's cocotb regression against its golden model: the parameters given, or
    every parameter set the block's regression covers; a table (or JSON) of what was checked,
    exit 1 if any set failed."""
    from dlforge.sim.tools.runner import default_simulator
    from ..regression import run_regression
    block = get_block(args.block)
    chosen = block_params(block, args)
    if chosen:
        param_sets = [chosen]
    else:
        param_sets = list(block.regression) or [block.defaults()]
    options = {}
    if args.blocks is not None:
        options["blocks"] = args.blocks
    if args.seed is not None:
        options["seed"] = args.seed
    with Progress(f"dlforge sim {block.name}") as progress:
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
    """Synthesise, place and route the block out of context (YoWASP yosys + nextpnr): its
    resources and Fmax, what a parameter costs before a whole board is built (xcup:
    synthesis only, a projection)."""
    from dlforge.boards.ooc import DEVICES, synthesize
    block = get_block(args.block)
    params = block.full_params(block_params(block, args))
    top = block.module_name(params)
    out_dir = args.output or f"build/synth/{top}-{args.device}"
    if args.plot:
        require_matplotlib()
        if DEVICES[args.device][1] is None:
            raise ValueError(f"--plot draws Fmax, which {args.device} (synthesis only) "
                             f"has not")
    with Progress(f"dlforge synth {block.name}") as progress:
        progress.phase("elaborating")
        # The two-file core's netlist runs the WebAssembly yosys out of memory in its last
        # renaming pass every time (boards.ooc.autoname_trapped), so it is skipped from the
        # start rather than after a whole synthesis (about 6 minutes of 25).
        figures = synthesize(block.build(**params), top, out_dir, device=args.device,
                             freq_mhz=args.freq, seed=args.seed, progress=progress,
                             placer=args.placer, autoname=params.get("contexts", 1) < 2)
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


def _table(rows):
    """``dlforge sim``'s rows as an aligned table."""
    head = ("parameters", "sim", "tests", "result", "blocks checked", "latency", "clk/block",
            "blocks/clk", "samples/clk")
    lines = []
    for row in rows:
        m = row["metrics"]
        checked = (m.get("random_blocks", 0) + m.get("full_rate_blocks", 0)
                   + m.get("stall_blocks", 0))
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


def _gen_options(p):
    p.add_argument("-o", "--output", required=True, help="output folder")
    p.add_argument("--json", action="store_true", help="print the manifest as JSON")


def _sim_options(p):
    p.add_argument("--sim", choices=("verilator", "icarus"), default=None,
                   help="simulator (default: $SIM, else verilator)")
    p.add_argument("--waves", action="store_true", help="record FST waveforms (also WAVES=1)")
    p.add_argument("--blocks", type=int, default=None,
                   help="how many random and edge-case items the testbench checks")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--gate-level", action="store_true",
                   help="simulate yosys' ECP5 netlist (synth_ecp5) with the cell models "
                        "instead of the RTL (default simulator then: icarus)")
    p.add_argument("--json", action="store_true", help="print results as JSON")
    p.add_argument("-v", "--verbose", action="store_true", help="show simulator output")


def _synth_options(p):
    from dlforge.boards.ooc import DEVICES, PLACERS
    p.add_argument("--device", choices=tuple(DEVICES), default="ecp5-85f")
    p.add_argument("--freq", type=float, default=100.0, help="target clock in MHz")
    p.add_argument("--seed", type=int, default=1, help="placer seed")
    p.add_argument("--placer", choices=("heap", "static"), default=None,
                   help="nextpnr's placer (default: " + ", ".join(
                       f"{placer} on {family}" for family, placer in PLACERS.items()) + ")")
    p.add_argument("-o", "--output", default=None, help="work folder (default build/synth/...)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--plot", metavar="FILE.png", default=None,
                   help="draw Fmax against the target (matplotlib)")


def _per_block(sub, command, help, options, func):
    """``dlforge COMMAND BLOCK``: a subcommand per block, each with the command's
    ``options`` and the block's own parameters."""
    parser = sub.add_parser(command, help=help, description=help)
    blocks = parser.add_subparsers(dest="block", required=True, metavar="BLOCK")
    for name in BLOCKS():
        block = get_block(name)
        p = blocks.add_parser(name, help=block.summary,
                              description=f"{help}: {name}, {block.summary}")
        options(p)
        add_block_params(p, block)
        p.set_defaults(func=func)


def add_commands(sub):
    """Register ``gen``, ``sim`` and ``synth`` on the ``dlforge`` subparsers ``sub``."""
    _per_block(sub, "gen", "write a block's Verilog and manifest.json", _gen_options, cmd_gen)
    _per_block(sub, "sim", "run a block's cocotb regression", _sim_options, cmd_sim)
    _per_block(sub, "synth", "out-of-context synthesis, place and route of a block (YoWASP "
                             "yosys + nextpnr): resources and Fmax; xcup (UltraScale+): "
                             "synthesis only, a projection", _synth_options, cmd_synth)
