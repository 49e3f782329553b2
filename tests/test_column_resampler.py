"""The resampler's vertical pass (``rtl/resample/column_resampler.py``) against the golden
model (``sim/models/resample_model.py``, itself bit-exact to Pillow): images shrunk and stretched
vertically, bilinear and bicubic, RGB, beats of random lengths, input and output stalling
at random, two images in a row; and its rate: input rows keep coming while output rows are
made."""

import numpy as np
import pytest
import skimage.data
from amaranth.sim import Simulator

from dlforge.rtl.resample.column_resampler import ColumnResampler
from dlforge.rtl.resample.table import table_entries
from dlforge.sim.models.resample_model import _pass, coefficients

from amaranth_streams import send_beats
from resample_beats import collect_rows, image_payloads, rows_to_image


def _run(images, out_height, filter="BILINEAR", seed=0, stalls=True, lanes=4):
    """Each (H, W, 3) image of ``images`` (one size) through the gateware: (outputs,
    golden outputs, clocks from the first beat offered to the last row out)."""
    height, width = images[0].shape[:2]
    coeffs = coefficients(height, out_height, filter=filter)
    taps = max(3, int(coeffs.count.max()))
    entries = table_entries(coeffs, taps)
    dut = ColumnResampler(max_columns=64, max_rows=64, taps=taps, channels=3, lanes=lanes)
    rng = np.random.default_rng(seed)
    rows = []
    clocks = [0, 0]

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
                while len(rows) < n * out_height or len(rows[-1]) < width:
                    await ctx.tick()
                ctx.set(dut.restart, 1)
                await ctx.tick()
                ctx.set(dut.restart, 0)
            clocks[0] = clocks[0] or ticks
            await send_beats(ctx, dut.i, image_payloads(image, rng if stalls else None, lanes),
                             rng if stalls else None, gap_prob=0.3)

    ticks = 0

    async def clock(ctx):
        nonlocal ticks
        while True:
            await ctx.tick()
            ticks += 1
            if not clocks[1] and len(rows) == len(images) * out_height \
                    and len(rows[-1]) == width:
                clocks[1] = ticks

    async def drain(ctx):
        await collect_rows(ctx, dut.o, rows, rng, 0.7 if stalls else 1.0)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(feed)
    sim.add_testbench(drain, background=True)
    sim.add_testbench(clock, background=True)
    sim.run_until(1e-6 * (len(entries) + 8 * len(images) * (height + out_height) * width
                          + 1000))
    assert len(rows) == len(images) * out_height, "the pass stopped"
    got = rows_to_image(rows, width).reshape(len(images), out_height, width, 3)
    return got, [_pass(image, 0, coeffs) for image in images], clocks[1] - clocks[0]


@pytest.mark.parametrize("filter", ["BILINEAR", "BICUBIC"])
@pytest.mark.parametrize("height,out_height,width", [(30, 13, 6), (11, 11, 9), (9, 23, 5),
                                                     (17, 2, 7), (4, 1, 1)])
def test_images_match_the_golden_model(height, out_height, width, filter):
    photo = skimage.data.astronaut()
    images = [np.ascontiguousarray(photo[60 + 40 * n:60 + 40 * n + height, 200:200 + width])
              for n in range(2)]
    got, want, _ = _run(images, out_height, filter, seed=height)
    for g, w in zip(got, want):
        assert np.array_equal(g, w)


@pytest.mark.parametrize("lanes", [1, 2])
@pytest.mark.parametrize("height,out_height,width", [(30, 13, 6), (9, 23, 5)])
def test_fewer_lanes(height, out_height, width, lanes):
    photo = skimage.data.astronaut()
    images = [np.ascontiguousarray(photo[60:60 + height, 200:200 + width])]
    got, want, _ = _run(images, out_height, seed=height, lanes=lanes)
    assert np.array_equal(got[0], want[0])


@pytest.mark.parametrize("height,out_height", [(24, 24), (24, 16), (24, 9)])
def test_rows_come_in_while_rows_go_out(height, out_height):
    """A row of 32 pixels is 8 beats: shrinking or copying 24 rows takes about 24 x 8
    clocks, not the (24 + out rows) x 8 of a pass that alternates."""
    image = np.ascontiguousarray(skimage.data.astronaut()[100:100 + height, 300:332])
    got, want, clocks = _run([image], out_height, stalls=False)
    assert np.array_equal(got[0], want[0])
    assert clocks <= height * 9 + 3 * 9 + 10, clocks
