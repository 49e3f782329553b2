"""The resampler's vertical pass (``rtl/resample/column_resampler.py``) against the golden
model (``sim/resample_model.py``, itself bit-exact to Pillow): images shrunk and stretched
vertically, bilinear and bicubic, RGB, input and output stalling at random, two images in a
row; and the table builder's buffer weights."""

import numpy as np
import pytest
import skimage.data
from amaranth.sim import Simulator

from dlforge.rtl.resample.column_resampler import ColumnResampler, column_table
from dlforge.sim.resample_model import _pass, coefficients


def _run(images, out_height, filter="BILINEAR", seed=0):
    """Each (H, W, 3) image of ``images`` (one size) through the gateware."""
    height, width = images[0].shape[:2]
    coeffs = coefficients(height, out_height, filter=filter)
    taps = max(3, int(coeffs.count.max()))
    entries = column_table(coeffs, taps)
    dut = ColumnResampler(max_columns=64, max_rows=64, taps=taps, channels=3)
    rng = np.random.default_rng(seed)
    got = []
    total = len(images) * out_height * width

    async def feed(ctx):
        for addr, (need, weights) in enumerate(entries):
            ctx.set(dut.table_addr, addr)
            ctx.set(dut.table_data, {"need": need, "weights": weights})
            ctx.set(dut.table_we, 1)
            await ctx.tick()
        ctx.set(dut.table_we, 0)
        ctx.set(dut.width, width)
        ctx.set(dut.out_height, out_height)
        for n, image in enumerate(images):
            if n:                                         # the previous image is out first
                await ctx.tick().until(dut.o.valid == 0)
                while len(got) < n * out_height * width:
                    await ctx.tick()
                ctx.set(dut.restart, 1)
                await ctx.tick()
                ctx.set(dut.restart, 0)
            for k, p in enumerate(image.reshape(-1, 3)):
                while rng.random() < 0.3:
                    ctx.set(dut.i.valid, 0)
                    await ctx.tick()
                ctx.set(dut.i.valid, 1)
                ctx.set(dut.i.payload, {"pixel": int(p[0]) | int(p[1]) << 8 | int(p[2]) << 16,
                                        "last": (k + 1) % width == 0})
                await ctx.tick().until(dut.i.ready)
            ctx.set(dut.i.valid, 0)

    async def drain(ctx):
        while len(got) < total:
            ctx.set(dut.o.ready, int(rng.random() < 0.7))
            await ctx.tick()

    async def watch(ctx):
        async for _, _, valid, ready, payload in ctx.tick().sample(dut.o.valid, dut.o.ready,
                                                                   dut.o.payload):
            if valid and ready:
                got.append((payload.pixel, payload.last))
            if len(got) >= total:
                return

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(feed)
    sim.add_testbench(drain)
    sim.add_process(watch)
    sim.run_until(1e-6 * (len(entries) + 8 * len(images) * (height + out_height) * width
                          + 1000))
    assert len(got) == total, "the pass stopped"
    assert [last for _, last in got] == [(k + 1) % width == 0 for k in range(total)]
    values = np.array([[v & 255, v >> 8 & 255, v >> 16 & 255] for v, _ in got], np.uint8)
    return values.reshape(len(images), out_height, width, 3), \
        [_pass(image, 0, coeffs) for image in images]


@pytest.mark.parametrize("filter", ["BILINEAR", "BICUBIC"])
@pytest.mark.parametrize("height,out_height", [(30, 13), (11, 11), (9, 23), (17, 2)])
def test_images_match_the_golden_model(height, out_height, filter):
    photo = skimage.data.astronaut()
    images = [np.ascontiguousarray(photo[60 + 40 * n:60 + 40 * n + height, 200:206])
              for n in range(2)]
    got, want = _run(images, out_height, filter, seed=height)
    for g, w in zip(got, want):
        assert np.array_equal(g, w)


def test_buffer_weights_follow_the_rows_they_hold():
    entries = column_table(coefficients(20, 7), taps=9)
    for need, weights in entries:
        assert sum(weights) in range((1 << 22) - 9, (1 << 22) + 10)
        assert weights[(need + 1) % 9] == 0       # that buffer holds row need - 8: no tap
    with pytest.raises(ValueError, match="needs"):
        column_table(coefficients(100, 10), taps=9)
