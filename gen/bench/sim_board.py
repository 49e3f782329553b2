"""`dlforge bench sim-board`: the simulated board's clock cycles per second of wall time while
its decoder cores are busy (how long a simulated run takes, not how fast the device is)."""

import os
import time
from pathlib import Path

from dlforge.host.link.raw_link import connect
from dlforge.rtl.link.protocol import Opcode, file_requests
from dlforge.sim.board.build import DEFAULTS, build_board
from dlforge.sim.board.process import SimBoard
from dlforge.sim.corpus import photos

__all__ = ["bench_sim_board"]


def bench_sim_board(cores=1, conv=False, images=None, repeat=1, **build_params):
    """Simulated clock cycles per second with the JPEG decoders busy.

    Starts a TCP board, sends ``images`` (JPEG files as bytes or paths; default: the real
    JPEG files scikit-image ships, see :func:`dlforge.sim.corpus.jpeg_corpus.shipped_jpegs`)
    ``repeat`` times, reads the replies up to each file's ``JPEG_END``, stops the board and
    returns its figures: cycles, busy_seconds, cycles_per_s, busy_cycles_per_s, ... and the
    configuration.
    """
    if images is None:
        named = photos.shipped_jpegs()
        if not named:
            raise RuntimeError("no JPEG files to send: install scikit-image")
    else:
        named = [(Path(x).name, Path(x).read_bytes()) if isinstance(x, (str, os.PathLike))
                 else (f"image{k}", bytes(x)) for k, x in enumerate(images)]
    params = dict(DEFAULTS, cores=cores, conv=conv) | build_params
    built = time.monotonic()
    exe = build_board(**params)
    build_s = time.monotonic() - built
    files = [(name, data) for _ in range(repeat) for name, data in named]
    # (file n to core n % cores, each file's frames back to back)
    requests = b"".join(b"".join(file_requests(100 + n, data, params["max_payload"],
                                               link_bytes=params.get("link_bytes", 1),
                                               core=n % max(cores, 1)))
                        for n, (_, data) in enumerate(files))
    board = SimBoard("tcp", **params)
    board.executable = exe
    with board:
        with connect(board.device) as link:
            frames = link.exchange(requests, lambda fr: sum(
                f.opcode == Opcode.JPEG_END for f in fr) >= len(files), timeout=3600)
    stats = board.stats or {}
    ends = {f.tag: f.payload for f in frames if f.opcode == Opcode.JPEG_END}
    results = []
    for n, (name, _) in enumerate(files):
        record = ends.get(100 + n, b"")
        status, width, height, cycles = (record[0], int.from_bytes(record[2:4], "little"),
                                         int.from_bytes(record[4:6], "little"),
                                         int.from_bytes(record[6:10], "little")) \
            if len(record) >= 10 else (None, 0, 0, 0)
        results.append({"file": name, "status": status, "width": width, "height": height,
                        "decoder_cycles": cycles})
    return {"benchmark": "sim-board", "parameters": params, "executable": str(exe),
            "build_or_lookup_seconds": round(build_s, 1), "files": results,
            "pixels": sum(r["width"] * r["height"] for r in results),
            **{k: stats.get(k) for k in ("cycles", "seconds", "cycles_per_s", "busy_cycles",
                                          "busy_seconds", "busy_cycles_per_s", "bytes_in",
                                          "bytes_out")}}
