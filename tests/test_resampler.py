"""Crop then resize in gateware (``rtl/resample/resampler.py``): whole decoded images in,
torchvision's ``resized_crop`` out, bit-exact to the golden model (itself bit-exact to
Pillow 13), in both of Pillow's pass orders, with stalls both ways and two images in a row."""

import numpy as np
import pytest
import skimage.data
from amaranth.sim import Simulator
from PIL import Image

from dlforge.rtl.resample.column_resampler import column_table
from dlforge.rtl.resample.resampler import Resampler
from dlforge.rtl.resample.row_resampler import row_table
from dlforge.sim.resample_model import coefficients, crop_resize, vertical_first

TAPS = 9


def _run(image, jobs, seed=0):
    """``jobs``: (box, size) pairs, each run over the whole ``image`` (H, W, 3)."""
    height, width = image.shape[:2]
    dut = Resampler(max_columns=64, max_rows=64, taps=TAPS)
    rng = np.random.default_rng(seed)
    outputs = [[] for _ in jobs]
    current = [0]

    async def host(ctx):
        for n, (box, size) in enumerate(jobs):
            left, top, right, bottom = box
            (out_w, out_h), (crop_w, crop_h) = size, (right - left, bottom - top)
            if n:
                while len(outputs[n - 1]) < out_w_prev * out_h_prev:
                    await ctx.tick()
            current[0] = n
            for addr, (need, weights) in enumerate(row_table(coefficients(crop_w, out_w),
                                                             TAPS)):
                ctx.set(dut.row_table_addr, addr)
                ctx.set(dut.row_table_data, {"need": need, "weights": weights})
                ctx.set(dut.row_table_we, 1)
                await ctx.tick()
            ctx.set(dut.row_table_we, 0)
            for addr, (need, weights) in enumerate(column_table(coefficients(crop_h, out_h),
                                                                TAPS)):
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
            for k, p in enumerate(image.reshape(-1, 3)):
                while rng.random() < 0.2:
                    ctx.set(dut.i.valid, 0)
                    await ctx.tick()
                ctx.set(dut.i.valid, 1)
                ctx.set(dut.i.payload, {"pixel": int(p[0]) | int(p[1]) << 8 | int(p[2]) << 16,
                                        "last": (k + 1) % width == 0})
                await ctx.tick().until(dut.i.ready)
            ctx.set(dut.i.valid, 0)
            out_w_prev, out_h_prev = out_w, out_h

    total = sum(w * h for _, (w, h) in jobs)

    async def drain(ctx):
        while sum(map(len, outputs)) < total:
            ctx.set(dut.o.ready, int(rng.random() < 0.75))
            await ctx.tick()

    async def watch(ctx):
        async for _, _, valid, ready, payload in ctx.tick().sample(dut.o.valid, dut.o.ready,
                                                                   dut.o.payload):
            if valid and ready:
                outputs[current[0]].append((payload.pixel, payload.last))
            if sum(map(len, outputs)) >= total:
                return

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(host)
    sim.add_testbench(drain)
    sim.add_process(watch)
    sim.run_until(1e-6 * 20 * len(jobs) * (height * width + 2000))
    results = []
    for (box, (w, h)), got in zip(jobs, outputs):
        assert len(got) == w * h, "the resampler stopped"
        assert [last for _, last in got] == [(k + 1) % w == 0 for k in range(w * h)]
        results.append(np.array([[v & 255, v >> 8 & 255, v >> 16 & 255] for v, _ in got],
                                np.uint8).reshape(h, w, 3))
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
def test_generated_verilog_in_verilator(capsys):
    """``dlforge sim resample``: the cocotb testbench (sim/tb_resample.py) on the generated
    Verilog, crops shrunk and copied under random stalls, bit-exact to the model."""
    from dlforge.gen.cli import main
    assert main(["sim", "resample", "--max-columns", "128", "--max-rows", "128"]) == 0
