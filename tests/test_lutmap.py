"""The fixed-shape logic helpers compute what they stand for: a one-hot pick, a pick at a
thermometer's first set bit, an OR, a shift."""

import random

from amaranth import Module, Signal
from amaranth.sim import Simulator

from dlforge.rtl.jpeg.lutmap import any_of, first_of, select, shift_left


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


def test_first_of_picks_the_value_at_a_thermometers_first_set_bit():
    m = Module()
    therm, dat = Signal(16), Signal(16 * 11)
    words = first_of(m, list(therm), [dat[11 * i:11 * i + 11] for i in range(16)], "first")
    rng = random.Random(2)

    async def bench(ctx):
        for first in [16] + [rng.randrange(17) for _ in range(200)]:    # 16: no bit set
            t = ((1 << 16) - 1) >> first << first & 0xFFFF
            d = rng.getrandbits(16 * 11)
            ctx.set(therm, t), ctx.set(dat, d)
            want = d >> (11 * first) & 0x7FF if first < 16 else 0
            assert ctx.get(words[0]) | ctx.get(words[1]) == want

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
