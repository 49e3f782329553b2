"""The ``dlforge`` command: one entry point for generating, simulating, benchmarking, building.

The commands are defined by family in :mod:`dlforge.gen.commands`; this module assembles them
and runs ``main()`` (the console script).
"""

import argparse
import sys

from .commands import axi, bench, blocks, boards, infer, runtime

__all__ = ["build_parser", "main"]

#: The command families in the order ``dlforge --help`` lists their commands.
FAMILIES = (blocks, bench, runtime, infer, boards, axi)


def build_parser():
    """The ``dlforge`` parser: every family's commands as subcommands."""
    parser = argparse.ArgumentParser(prog="dlforge", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for family in FAMILIES:
        family.add_commands(sub)
    return parser


def main(argv=None):
    """Run ``dlforge ARGV``; the exit status.  A command's own error (a bad parameter, a
    missing file, a device that refuses) is one ``dlforge: error:`` line and status 2."""
    argv = sys.argv[1:] if argv is None else list(argv)
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
