"""Crop then resize in gateware (``rtl/resample/resampler.py``): whole decoded images in,
torchvision's ``resized_crop`` out, bit-exact to the golden model (itself bit-exact to
Pillow 13), in both of Pillow's pass orders, with stalls both ways and two images in a row."""

import numpy as np
import pytest
import skimage.data
from amaranth.sim import Simulator
from PIL import Image

from dlforge.rtl.resample.resampler import Resampler
from dlforge.rtl.resample.table import table_entries
from dlforge.sim.models.resample_model import coefficients, crop_resize, vertical_first

from amaranth_streams import send_beats
from resample_beats import collect_rows, image_payloads, rows_to_image

TAPS = 9


def _run(image, jobs, seed=0, lanes=4):
    """``jobs``: (box, size) pairs, each run over the whole ``image`` (H, W, 3)."""
    height, width = image.shape[:2]
    dut = Resampler(max_columns=64, max_rows=64, taps=TAPS, lanes=lanes)
    rng = np.random.default_rng(seed)
    rows = []                       # every job's output rows, one after the other

    async def host(ctx):
        for n, (box, size) in enumerate(jobs):
            left, top, right, bottom = box
            (out_w, out_h), (crop_w, crop_h) = size, (right - left, bottom - top)
            if n:
                while len(rows) < done_rows or len(rows[-1]) < out_w_prev:
                    await ctx.tick()
            done_rows = sum(h for _, (_, h) in jobs[:n + 1])
            across = table_entries(coefficients(crop_w, out_w), TAPS)
            down = table_entries(coefficients(crop_h, out_h), TAPS)
            for addr, (need, weights) in enumerate(across):
                ctx.set(dut.row_table_addr, addr)
                ctx.set(dut.row_table_data, {"need": need, "weights": weights})
                ctx.set(dut.row_table_we, 1)
                await ctx.tick()
            ctx.set(dut.row_table_we, 0)
            for addr, (need, weights) in enumerate(down):
                ctx.set(dut.column_table_addr, addr)
                ctx.set(dut.column_table_data, {"need": need, "weights": weights})
                ctx.set(dut.column_table_we, 1)
                await ctx.tick()
            ctx.set(dut.column_table_we, 0)
            for name, value in (("left", left), ("top", top), ("crop_width", crop_w),
                                ("crop_height", crop_h), ("out_width", out_w),
                                ("out_height", out_h)):
                ctx.set(getattr(dut, name), value)
            ctx.set(dut.vertical_first, vertical_first((0, 0, crop_w, crop_h), size, 13))
            ctx.set(dut.restart, 1)
            await ctx.tick()
            ctx.set(dut.restart, 0)
            # beats of random lengths for the first job, the raster's runs of 4 after
            await send_beats(ctx, dut.i, image_payloads(image, rng if n == 0 else None, lanes),
                             rng, gap_prob=0.2)
            out_w_prev, out_h_prev = out_w, out_h

    async def drain(ctx):
        await collect_rows(ctx, dut.o, rows, rng, 0.75)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(host)
    sim.add_testbench(drain, background=True)
    sim.run_until(1e-6 * 20 * len(jobs) * (height * width + 2000))
    results, at = [], 0
    for box, (w, h) in jobs:
        assert len(rows) >= at + h, "the resampler stopped"
        results.append(rows_to_image(rows[at:at + h], w))
        at += h
    return results


@pytest.mark.slow
@pytest.mark.parametrize("jobs", [
    [((2, 1, 22, 19), (9, 8)), ((0, 0, 24, 20), (24, 20))],         # horizontal first; copy
    [((3, 0, 15, 20), (10, 5)), ((4, 2, 20, 18), (19, 23))],        # vertical first; upscale
    [((0, 4, 24, 16), (7, 12)), ((7, 7, 8, 9), (5, 3))],            # a 1-pixel-wide crop
], ids=["down-copy", "vfirst-up", "odd"])
def test_crop_then_resize_matches_pillow(jobs):
    image = np.ascontiguousarray(skimage.data.astronaut()[150:170, 180:204])
    orders = [vertical_first((0, 0, b[2] - b[0], b[3] - b[1]), s, 13) for b, s in jobs]
    assert orders == [False, False] or orders[0]           # (the cases cover both orders)
    got = _run(image, jobs, seed=len(jobs) + sum(orders))
    for (box, size), out in zip(jobs, got):
        want = crop_resize(image, box, size, pillow=13)
        assert np.array_equal(out, want), (box, size)
        if int(Image.__version__.split(".")[0]) >= 13:
            pil = np.asarray(Image.fromarray(image).crop(box).resize(size, Image.BILINEAR))
            assert np.array_equal(out, pil)


@pytest.mark.slow
def test_one_lane():
    """The ECP5-sized resampler (a pixel a clock), both orders."""
    image = np.ascontiguousarray(skimage.data.astronaut()[150:170, 180:204])
    jobs = [((2, 1, 22, 19), (9, 8)), ((3, 0, 15, 20), (10, 5))]
    for (box, size), out in zip(jobs, _run(image, jobs, seed=5, lanes=1)):
        assert np.array_equal(out, crop_resize(image, box, size, pillow=13)), (box, size)


@pytest.mark.verilator
@pytest.mark.slow
def test_generated_verilog_in_verilator(capsys):
    """``dlforge sim resample``: the cocotb testbench (sim/tb/resample.py) on the generated
    Verilog, crops shrunk and copied under random stalls, bit-exact to the model."""
    from dlforge.gen.cli import main
    assert main(["sim", "resample", "--max-columns", "128", "--max-rows", "128"]) == 0
