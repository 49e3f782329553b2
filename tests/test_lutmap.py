"""The fixed-shape logic helpers compute what they stand for: a one-hot pick, an OR, a shift."""

import random

from amaranth import Module, Signal
from amaranth.sim import Simulator

from dlforge.rtl.jpeg.lutmap import any_of, select, shift_left


def test_lutmap_helpers():
    m = Module()
    sel, dat, val, amt = Signal(9), Signal(45), Signal(12), Signal(3)
    picked = select(m, [(sel[i], dat[5 * i:5 * i + 5]) for i in range(9)], "picked")
    anyone = any_of(m, list(sel), "any")
    shifted = shift_left(m, val, amt, "shifted")
    rng = random.Random(1)

    async def bench(ctx):
        for _ in range(200):
            s, d = rng.getrandbits(9), rng.getrandbits(45)
            v, a = rng.getrandbits(12), rng.getrandbits(3)
            ctx.set(sel, s), ctx.set(dat, d), ctx.set(val, v), ctx.set(amt, a)
            want = 0
            for i in range(9):
                if s >> i & 1:
                    want |= d >> (5 * i) & 31
            assert ctx.get(picked) == want
            assert ctx.get(anyone) == int(s != 0)
            assert ctx.get(shifted) == (v << a) & 0xFFF

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
