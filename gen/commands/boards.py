"""The commands for real boards: ``build`` (a bitstream and its report) and ``program``."""

import json
import sys

from dlforge.sim.tools.progress import Progress

__all__ = ["add_commands", "cmd_build", "cmd_program"]


def cmd_build(args):
    """Build a board's bitstream with the YoWASP tools and print its report (Fmax, timing,
    resources against the device's capacity); exit 1 if it does not fit or misses the clock,
    the report printed all the same, so a failed build still says why."""
    from dlforge.boards.build import BuildFailed, build_board
    with Progress(f"dlforge build {args.board}") as progress:
        try:
            report = build_board(args.board, cores=args.cores, freq_mhz=args.freq,
                                 out_dir=args.output, seed=args.seed, engine=args.engine,
                                 max_width=args.max_width, small_ram=args.small_ram,
                                 contexts=args.contexts, progress=progress)
            failed = None
        except BuildFailed as exc:
            report, failed = exc.report, str(exc)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print_report(report)
    if failed:
        print(f"dlforge: error: {failed}", file=sys.stderr)
        return 1
    return 0


def _print_report(r):
    files = r['preset'].get('files_per_core', 1)
    print(f"board       {r['board']} ({r['device']}), {r['preset']['cores']} decoder core(s)"
          f"{f' of {files} files at once' if files > 1 else ''}, "
          f"engine {r['preset']['engine'] or 'none'}")
    print(f"clock       {r['target_mhz']} MHz target (asked {r['requested_mhz']}), "
          f"{r['fmax_mhz']} MHz reached: timing {'met' if r['meets_timing'] else 'NOT met'}")
    print(f"uart        {r['baud']} baud (clock / {r['uart_divisor']})")
    for key in ("luts", "ffs", "bram", "dsp"):
        used, avail = r["capacity"].get(key, (r[key], None))
        share = f" of {avail} ({100 * used / avail:.0f} %)" if avail and used is not None else ""
        print(f"{key:<11} {used}{share}")
    print(f"bitstream   {r['bitstream'] or '(none)'}")
    print(f"seconds     {r['seconds']}")


def cmd_program(args):
    """Load a bitstream (default: the board's last ``dlforge build``) into the board with
    openFPGALoader, into its configuration RAM or, with ``--flash``, its SPI flash."""
    from dlforge.boards.program import program_board
    print(program_board(args.board, args.bitstream, flash=args.flash))
    return 0


def add_commands(sub):
    """Register ``build`` and ``program`` on the ``dlforge`` subparsers ``sub``."""
    from dlforge.boards.presets import BOARDS
    from dlforge.rtl.small_ram import SMALL_RAMS
    names = tuple(BOARDS)
    build = sub.add_parser("build", help="bitstream for a board with the YoWASP tools: Fmax, "
                                         "timing and resources (fails if it does not fit or "
                                         "misses the clock)")
    build.add_argument("--board", required=True, choices=names)
    build.add_argument("--cores", type=int, default=None,
                       help="JPEG decoder cores (default: the board's preset)")
    build.add_argument("--freq", type=float, default=None, metavar="MHZ",
                       help="system clock (default: the board's preset); the PLL's nearest")
    build.add_argument("--engine", default=None, metavar="RxCxS|none",
                       help="convolution engine: rows x columns x int8 lanes, or none "
                            "(default: the board's preset)")
    build.add_argument("--max-width", type=int, default=None,
                       help="the cores' widest image, a multiple of 16 (default: the board's "
                            "preset); their line memories, most of a core's block RAM, "
                            "scale with it")
    build.add_argument("--small-ram", default=None, choices=SMALL_RAMS,
                       help="the cores' FIFOs, small tables and corner turns in block or LUT "
                            "RAM (default: the board's preset)")
    build.add_argument("--contexts", type=int, default=None, choices=(1, 2),
                       help="files per core: 2 builds each core C-slowed, decoding two files "
                            "at once (default: the board's preset, 1)")
    build.add_argument("--seed", type=int, default=1, help="placer seed")
    build.add_argument("-o", "--output", default=None,
                       help="build folder (default build/boards/BOARD)")
    build.add_argument("--json", action="store_true")
    build.set_defaults(func=cmd_build)
    program = sub.add_parser("program", help="load a bitstream into a board (openFPGALoader)")
    program.add_argument("--board", required=True, choices=names)
    program.add_argument("--bitstream", default=None,
                         help="default: the last `dlforge build` of this board")
    program.add_argument("--flash", action="store_true",
                         help="write the SPI flash (kept over power cycles) instead of the "
                              "FPGA's configuration RAM (the iCEBreaker always uses flash)")
    program.set_defaults(func=cmd_program)
