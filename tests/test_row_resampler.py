"""The resampler's horizontal pass (``rtl/resample/row_resampler.py``) against the golden
model (``sim/models/resample_model.py``, itself bit-exact to Pillow): rows shrunk, copied and
stretched, bilinear and bicubic (negative weights), RGB, beats of random lengths, with the
input and the output stalling at random; and its rate: a beat a clock when nothing
stalls."""

import numpy as np
import pytest
import skimage.data
from amaranth.sim import Simulator

from dlforge.rtl.resample.row_resampler import RowResampler
from dlforge.rtl.resample.table import table_entries
from dlforge.sim.models.resample_model import _pass, coefficients

from amaranth_streams import send_beats
from resample_beats import collect_rows, image_payloads, rows_to_image


def _run(image, out_width, filter="BILINEAR", taps=7, seed=0, stalls=True, lanes=4):
    """Rows of ``image`` (H, W, 3) through the gateware: (output, golden, clocks)."""
    height, width = image.shape[:2]
    coeffs = coefficients(width, out_width, filter=filter)
    entries = table_entries(coeffs, taps)
    dut = RowResampler(max_columns=512, taps=taps, channels=3, lanes=lanes)
    rng = np.random.default_rng(seed)
    beats = image_payloads(image, rng if stalls else None, lanes)
    rows, clocks = [], [0, 0]

    async def feed(ctx):
        ctx.set(dut.out_width, out_width)
        for addr, (need, weights) in enumerate(entries):
            ctx.set(dut.table_addr, addr)
            ctx.set(dut.table_data, {"need": need, "weights": weights})
            ctx.set(dut.table_we, 1)
            await ctx.tick()
        ctx.set(dut.table_we, 0)
        await ctx.tick()
        clocks[0] = ctx.get(count)
        await send_beats(ctx, dut.i, beats, rng if stalls else None, gap_prob=0.3)

    count = 0

    async def clock(ctx):
        nonlocal count
        while True:
            await ctx.tick()
            count += 1
            if len(rows) == height and len(rows[-1]) == out_width and not clocks[1]:
                clocks[1] = count

    async def drain(ctx):
        await collect_rows(ctx, dut.o, rows, rng, 0.7 if stalls else 1.0)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(feed)
    sim.add_testbench(drain, background=True)
    sim.add_testbench(clock, background=True)
    sim.run_until(1e-6 * (len(entries) + 6 * len(beats) + 6 * height * out_width + 1000))
    assert len(rows) == height, "the pass stopped"
    return rows_to_image(rows, out_width), _pass(image, 1, coeffs), clocks[1] - clocks[0]


@pytest.mark.parametrize("filter", ["BILINEAR", "BICUBIC"])
@pytest.mark.parametrize("width,out_width", [(40, 17), (23, 23), (12, 31), (50, 22), (9, 1),
                                             (3, 2), (1, 5)])
def test_rows_match_the_golden_model(width, out_width, filter):
    image = skimage.data.astronaut()[100:104, 150:150 + width]
    taps = max(7, int(coefficients(width, out_width, filter=filter).count.max()))
    got, want, _ = _run(np.ascontiguousarray(image), out_width, filter, taps=taps, seed=width)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("lanes", [1, 2])
@pytest.mark.parametrize("width,out_width", [(40, 17), (12, 31), (9, 3)])
def test_fewer_lanes(width, out_width, lanes):
    image = np.ascontiguousarray(skimage.data.astronaut()[100:103, 150:150 + width])
    got, want, _ = _run(image, out_width, seed=width, lanes=lanes)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("lanes", [1, 4])
@pytest.mark.parametrize("width,out_width", [(64, 64), (64, 40), (64, 22)])
def test_a_beat_a_clock(width, out_width, lanes):
    """Copying and shrinking take the raster's beats as they come: a row of 64 pixels in
    16 beats of 4 costs 16 clocks and about one between rows."""
    image = np.ascontiguousarray(skimage.data.astronaut()[200:206, 100:100 + width])
    got, want, clocks = _run(image, out_width, stalls=False, lanes=lanes)
    assert np.array_equal(got, want)
    assert clocks <= 6 * (width // lanes + 2) + 4, clocks
