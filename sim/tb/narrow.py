"""cocotb regression of the lane narrower (rtl/stream_pipe.Narrow): order kept, nothing lost.

Also the smallest testbench of the project, so the runner's own tests use it.  Parameters:
in_lanes, out_lanes, beats, and ``claim_out_lanes`` (what the testbench believes the output
width is; a wrong claim must make it fail, which the runner tests rely on).
"""

import json
import os
import random

import cocotb

from dlforge.sim.tb.streams import start, stream_through

PARAMS = json.loads(os.environ.get("DLFORGE_TB_PARAMS", "{}"))
IN_LANES = int(PARAMS.get("in_lanes", 8))
OUT_LANES = int(PARAMS.get("claim_out_lanes", PARAMS.get("out_lanes", 2)))
BEATS = int(PARAMS.get("beats", 200))


@cocotb.test()
async def order_and_backpressure(dut):
    await start(dut, sources=("i",), sinks=("o",))
    rng = random.Random(PARAMS.get("seed", 3))
    elements = [rng.randrange(256) for _ in range(BEATS * IN_LANES)]
    beats = [sum(e << (8 * k) for k, e in enumerate(elements[b * IN_LANES:(b + 1) * IN_LANES]))
             for b in range(BEATS)]
    n_out = len(elements) // OUT_LANES
    got, stats = await stream_through(dut, beats, n_out, valid_prob=0.7, ready_prob=0.7, rng=rng)
    out = [(g >> (8 * k)) & 0xFF for g in got for k in range(OUT_LANES)]
    assert out == elements, "narrowed stream differs from the input"
    path = "metrics.json"
    with open(path, "w") as f:
        json.dump({"elements": len(elements), "cycles": stats.cycles}, f)
