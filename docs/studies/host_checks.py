"""The host's per-file checks on the way to a device: the header pre-check
(:func:`dlforge.host.jpeg.precheck.precheck`) and the work estimate that picks a file's core
(:func:`dlforge.host.device.jpeg_work.decode_work`), in microseconds of CPU per file.

Both run for every file the loader sends, so they are part of the host's CPU per image.
The files are the 64 photos of the speed corpus and scikit-image's shipped JPEG files; each
function runs over all of them per round, and the figure is the minimum over rounds of
process time (the least disturbed by the rest of the machine).  ``--base PATH`` measures
another checkout of dlforge (e.g. ``git worktree add /tmp/base HEAD~1``) with the same files.

    .venv/bin/python docs/studies/host_checks.py [--base PATH] [--rounds N]
"""

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path


def _load_dlforge(base):
    """Import ``dlforge`` from the checkout at ``base`` instead of the installed one."""
    base = Path(base).resolve()
    spec = importlib.util.spec_from_file_location("dlforge", base / "__init__.py",
                                                  submodule_search_locations=[str(base)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["dlforge"] = module
    spec.loader.exec_module(module)


def _files():
    from dlforge.sim.corpus.jpeg_corpus import photo_corpus
    from dlforge.sim.corpus.photos import shipped_jpegs
    files = [f.data for f in photo_corpus()]
    files += [data for _, data in shipped_jpegs()]
    return files


def _per_file_us(function, files, rounds):
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        for data in files:
            function(data)
        best = min(best, time.process_time() - start)
    return round(best * 1e6 / len(files), 2)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help="the dlforge checkout to measure (default: this one)")
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    if args.base:
        _load_dlforge(args.base)
    from dlforge.host.device.jpeg_work import decode_work
    from dlforge.host.jpeg.precheck import precheck
    files = _files()
    print(json.dumps({"files": len(files), "rounds": args.rounds,
                      "precheck_us_per_file": _per_file_us(precheck, files, args.rounds),
                      "decode_work_us_per_file": _per_file_us(decode_work, files,
                                                              args.rounds)}, indent=1))


if __name__ == "__main__":
    main()
