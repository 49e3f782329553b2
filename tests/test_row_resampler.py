"""The resampler's horizontal pass (``rtl/resample/row_resampler.py``) against the golden
model (``sim/resample_model.py``, itself bit-exact to Pillow): rows shrunk and stretched,
bilinear and bicubic (negative weights), RGB, with the input and the output stalling at
random; and the table builder's checks."""

import numpy as np
import pytest
import skimage.data
from amaranth.sim import Simulator

from dlforge.rtl.resample.row_resampler import RowResampler, row_table
from dlforge.sim.resample_model import _pass, coefficients


def _run(image, out_width, filter="BILINEAR", taps=7, seed=0):
    """Rows of ``image`` (H, W, 3) through the gateware; the output rows as an array."""
    height, width = image.shape[:2]
    coeffs = coefficients(width, out_width, filter=filter)
    entries = row_table(coeffs, taps)
    dut = RowResampler(max_columns=512, taps=taps, channels=3)
    rng = np.random.default_rng(seed)
    pixels = [int(p[0]) | int(p[1]) << 8 | int(p[2]) << 16
              for p in image.reshape(-1, 3)]
    got = []

    async def load_and_feed(ctx):
        ctx.set(dut.out_width, out_width)
        for addr, (need, weights) in enumerate(entries):
            ctx.set(dut.table_addr, addr)
            ctx.set(dut.table_data, {"need": need, "weights": weights})
            ctx.set(dut.table_we, 1)
            await ctx.tick()
        ctx.set(dut.table_we, 0)
        await ctx.tick()
        for k, value in enumerate(pixels):
            while rng.random() < 0.3:                     # the source pauses
                ctx.set(dut.i.valid, 0)
                await ctx.tick()
            ctx.set(dut.i.valid, 1)
            ctx.set(dut.i.payload, {"pixel": value, "last": (k + 1) % width == 0})
            await ctx.tick().until(dut.i.ready)
        ctx.set(dut.i.valid, 0)

    async def collect(ctx):
        while len(got) < height * out_width:
            ready = int(rng.random() < 0.7)               # the sink pauses
            ctx.set(dut.o.ready, ready)
            await ctx.tick()
            if ready and ctx.get(dut.o.valid):
                pass
        ctx.set(dut.o.ready, 0)

    async def watch(ctx):
        async for _, _, valid, ready, payload in ctx.tick().sample(dut.o.valid, dut.o.ready,
                                                                   dut.o.payload):
            if valid and ready:
                got.append((payload.pixel, payload.last))
            if len(got) >= height * out_width:
                return

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(load_and_feed)
    sim.add_testbench(collect)
    sim.add_process(watch)
    sim.run_until(1e-6 * (len(entries) + 6 * len(pixels) + 6 * height * out_width + 1000))
    assert len(got) == height * out_width, "the pass stopped"
    lasts = [last for _, last in got]
    assert lasts == [(k + 1) % out_width == 0 for k in range(len(got))]
    values = np.array([[v & 255, v >> 8 & 255, v >> 16 & 255] for v, _ in got], np.uint8)
    return values.reshape(height, out_width, 3), _pass(image, 1, coeffs)


@pytest.mark.parametrize("filter", ["BILINEAR", "BICUBIC"])
@pytest.mark.parametrize("width,out_width", [(40, 17), (23, 23), (12, 31), (50, 22), (9, 1)])
def test_rows_match_the_golden_model(width, out_width, filter):
    image = skimage.data.astronaut()[100:104, 150:150 + width]
    taps = max(7, int(coefficients(width, out_width, filter=filter).count.max()))
    got, want = _run(np.ascontiguousarray(image), out_width, filter, taps=taps, seed=width)
    assert np.array_equal(got, want)


def test_the_table_refuses_too_many_taps():
    with pytest.raises(ValueError, match="needs 8 taps, the resampler has 7"):
        row_table(coefficients(100, 25), taps=7)
