"""cocotb regression of the generated crop-and-resize Verilog (rtl/resample/resampler.py)
against the golden model (sim/resample_model.py, bit-exact to Pillow 13).

Parameters arrive as JSON in DLFORGE_TB_PARAMS: taps, width and height of the input image (a
crop of scikit-image's astronaut), jobs (a list of [[left, top, right, bottom], [out_w,
out_h]]) or factors (the whole image shrunk by each that the taps allow), valid_prob and
ready_prob, seed.  Each job streams the image until the last output
pixel (the rows below the crop are not sent); the testbench loads both passes' tables, the
box and the sizes, pulses ``restart``, and records each job's clocks, from its first input
pixel to its last output pixel, and the crop's and the output's pixels per clock
(``metrics.json``).
"""

import json
import os
import random
from pathlib import Path

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, RisingEdge

from dlforge.rtl.resample.column_resampler import column_table
from dlforge.rtl.resample.row_resampler import WEIGHT_BITS, row_table
from dlforge.sim.cocotb_stream import start, stream_through
from dlforge.sim.resample_model import coefficients, crop_resize, vertical_first

PARAMS = json.loads(os.environ.get("DLFORGE_TB_PARAMS", "{}"))
TAPS = int(PARAMS.get("taps", 7))
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


@cocotb.test()
async def crop_then_resize(dut):
    await start(dut, sources=("i",), sinks=("o",))
    rng = random.Random(SEED)
    pixels = image()
    beats = [int(p[0]) | int(p[1]) << 8 | int(p[2]) << 16 | int((k + 1) % WIDTH == 0) << 24
             for k, p in enumerate(pixels.reshape(-1, 3))]
    row_need_bits = len(dut.row_table_data) - TAPS * WEIGHT_BITS
    column_need_bits = len(dut.column_table_data) - TAPS * WEIGHT_BITS
    metrics = []
    for box, size in JOBS:
        left, top, right, bottom = box
        (out_w, out_h), (crop_w, crop_h) = size, (right - left, bottom - top)
        await load_table(dut, "row_table", row_table(coefficients(crop_w, out_w), TAPS),
                         row_need_bits)
        await load_table(dut, "column_table",
                         column_table(coefficients(crop_h, out_h), TAPS), column_need_bits)
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
        got, stats = await stream_through(dut, beats, out_w * out_h, valid_prob=VALID,
                                          ready_prob=READY, rng=rng)
        await FallingEdge(dut.clk)
        dut.i__valid.value = 0              # (the rows below the crop are not needed)
        dut.o__ready.value = 0
        lasts = [(g >> 24) & 1 for g in got]
        assert lasts == [int((k + 1) % out_w == 0) for k in range(len(got))], \
            "row ends misplaced"
        out = np.array([[g & 255, g >> 8 & 255, g >> 16 & 255] for g in got],
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
