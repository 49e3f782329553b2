"""cocotb regression of the generated crop-and-resize Verilog (rtl/resample/resampler.py)
against the golden model (sim/models/resample_model.py, bit-exact to Pillow 13).

Parameters arrive as JSON in DLFORGE_TB_PARAMS: taps, lanes, width and height of the input
image (a crop of scikit-image's astronaut), jobs (a list of [[left, top, right, bottom],
[out_w, out_h]]) or factors (the whole image shrunk by each that the taps allow), valid_prob
and ready_prob, seed.  Each job streams the image as the raster stage does (rows in beats of
``lanes`` pixels) until the last output row (the rows below the crop are not sent); the
testbench loads both passes' tables, the box and the sizes, pulses ``restart``, and records
each job's clocks, from its first input beat to its last output beat, and the crop's and the
output's pixels per clock (``metrics.json``).
"""

import json
import os
import random
from pathlib import Path

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, RisingEdge

from dlforge.rtl.resample.beats import pack_beat, row_beats, unpack_beat
from dlforge.rtl.resample.table import WEIGHT_BITS, table_entries
from dlforge.sim.tb.streams import start, stream_through
from dlforge.sim.models.resample_model import coefficients, crop_resize, vertical_first

PARAMS = json.loads(os.environ.get("DLFORGE_TB_PARAMS", "{}"))
TAPS = int(PARAMS.get("taps", 7))
LANES = int(PARAMS.get("lanes", 4))
WIDTH, HEIGHT = int(PARAMS.get("width", 48)), int(PARAMS.get("height", 36))
JOBS = PARAMS.get("jobs", [[[4, 2, 44, 34], [17, 13]], [[0, 0, 48, 36], [48, 36]]])
if "factors" in PARAMS:
    # the whole image shrunk by each factor the taps allow (bilinear by f: 2 ceil(f) + 1)
    JOBS = [[[0, 0, WIDTH, HEIGHT], [max(1, round(WIDTH / f)), max(1, round(HEIGHT / f))]]
            for f in PARAMS["factors"] if 2 * -(-f // 1) + 1 <= TAPS]
VALID, READY = float(PARAMS.get("valid_prob", 0.8)), float(PARAMS.get("ready_prob", 0.8))
SEED = int(PARAMS.get("seed", 1))


def pack_entry(need, weights, need_bits):
    value = need
    for k, w in enumerate(weights):
        value |= (w & ((1 << WEIGHT_BITS) - 1)) << (need_bits + WEIGHT_BITS * k)
    return value


def image():
    import skimage.data
    return np.ascontiguousarray(skimage.data.astronaut()[140:140 + HEIGHT, 170:170 + WIDTH])


async def load_table(dut, prefix, entries, need_bits):
    for addr, (need, weights) in enumerate(entries):
        await FallingEdge(dut.clk)
        getattr(dut, f"{prefix}_addr").value = addr
        getattr(dut, f"{prefix}_data").value = pack_entry(need, weights, need_bits)
        getattr(dut, f"{prefix}_we").value = 1
    await FallingEdge(dut.clk)
    getattr(dut, f"{prefix}_we").value = 0


def rows_out(height):
    """``stream_through``'s ``done``: true once ``height`` beats with ``last`` are out."""
    seen = [0, 0]                           # beats looked at, rows ended among them

    def done(got):
        for g in got[seen[0]:]:
            seen[1] += unpack_beat(g, lanes=LANES)[1]
        seen[0] = len(got)
        return seen[1] >= height
    return done


@cocotb.test()
async def crop_then_resize(dut):
    await start(dut, sources=("i",), sinks=("o",))
    rng = random.Random(SEED)
    pixels = image()
    beats = [pack_beat(run, last, lanes=LANES) for run, last in row_beats(pixels, lanes=LANES)]
    row_need_bits = len(dut.row_table_data) - TAPS * WEIGHT_BITS
    column_need_bits = len(dut.column_table_data) - TAPS * WEIGHT_BITS
    metrics = []
    for box, size in JOBS:
        left, top, right, bottom = box
        (out_w, out_h), (crop_w, crop_h) = size, (right - left, bottom - top)
        await load_table(dut, "row_table", table_entries(coefficients(crop_w, out_w), TAPS),
                         row_need_bits)
        await load_table(dut, "column_table",
                         table_entries(coefficients(crop_h, out_h), TAPS), column_need_bits)
        await FallingEdge(dut.clk)
        for name, value in (("left", left), ("top", top), ("crop_width", crop_w),
                            ("crop_height", crop_h), ("out_width", out_w),
                            ("out_height", out_h)):
            getattr(dut, name).value = value
        order = vertical_first((0, 0, crop_w, crop_h), (out_w, out_h), 13)
        dut.vertical_first.value = int(order)
        dut.restart.value = 1
        await RisingEdge(dut.clk)
        await FallingEdge(dut.clk)
        dut.restart.value = 0
        got, stats = await stream_through(
            dut, beats, 0, valid_prob=VALID, ready_prob=READY, rng=rng,
            done=rows_out(out_h))
        await FallingEdge(dut.clk)
        dut.i__valid.value = 0              # (the rows below the crop are not needed)
        dut.o__ready.value = 0
        rows, row = [], []
        for g in got:
            run, last = unpack_beat(g, lanes=LANES)
            assert 1 <= len(run) <= LANES, f"a beat of {len(run)} pixels"
            row += run
            if last:
                rows.append(row)
                row = []
        assert [len(r) for r in rows] == [out_w] * out_h, "row ends misplaced"
        out = np.array([[g & 255, g >> 8 & 255, g >> 16 & 255] for r in rows for g in r],
                       np.uint8).reshape(out_h, out_w, 3)
        want = crop_resize(pixels, tuple(box), (out_w, out_h), pillow=13)
        bad = np.argwhere(out != want)
        assert bad.size == 0, f"{box} -> {size}: {len(bad)} values differ, first {bad[0]}"
        metrics.append({"box": box, "size": size, "vertical_first": order,
                        "cycles": stats.cycles,
                        "crop_pixels_per_clock": round(crop_w * crop_h / stats.cycles, 4),
                        "output_pixels_per_clock": round(out_w * out_h / stats.cycles, 4)})
    Path("metrics.json").write_text(json.dumps({"jobs": metrics, "checked":
                                                "bit-exact to the golden model (Pillow 13)"},
                                               indent=1))
