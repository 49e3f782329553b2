"""Helpers for amaranth.sim testbenches: push beats into a stream, collect beats from one."""

import random

__all__ = ["run_stream", "send_beats", "collect_beats"]


async def send_beats(ctx, port, beats, rng=None, gap_prob=0.0):
    """Offer each beat on stream ``port`` until it is taken; with ``rng``, idle clocks come
    before a beat with probability ``gap_prob`` each.  ``valid`` is low afterwards."""
    for beat in beats:
        while rng is not None and rng.random() < gap_prob:
            ctx.set(port.valid, 0)
            await ctx.tick()
        ctx.set(port.valid, 1)
        ctx.set(port.payload, beat)
        await ctx.tick().until(port.ready)
    ctx.set(port.valid, 0)


async def collect_beats(ctx, port, out, rng, ready_prob=1.0):
    """Forever: draw ``ready`` at random and append every beat taken to ``out``.  Values are
    sampled at the clock edge, so testbenches that drive the producer in the same clock
    cannot race this one (run it as a background testbench)."""
    while True:
        ctx.set(port.ready, rng.random() < ready_prob)
        _, _, valid, ready, payload = await ctx.tick().sample(port.valid, port.ready,
                                                              port.payload)
        if valid and ready:
            out.append(payload)


def run_stream(dut, beats_in, n_out, *, valid_prob=1.0, ready_prob=1.0, seed=0, max_cycles=None):
    """Simulate ``dut`` (with ``i``/``o`` streams); return (output payloads, output cycles)."""
    from amaranth.sim import Simulator

    rng = random.Random(seed)
    got, when = [], []
    max_cycles = max_cycles or 200 + 20 * (len(beats_in) + n_out)

    async def bench(ctx):
        sent, cycle, offering = 0, 0, False
        while len(got) < n_out:
            assert cycle < max_cycles, f"only {len(got)} of {n_out} beats after {cycle} clocks"
            if not offering and sent < len(beats_in) and rng.random() < valid_prob:
                offering = True
                ctx.set(dut.i.payload, beats_in[sent])
            ctx.set(dut.i.valid, offering)
            ctx.set(dut.o.ready, rng.random() < ready_prob)
            _, _, i_ready, o_valid, o_ready, o_payload = await ctx.tick().sample(
                dut.i.ready, dut.o.valid, dut.o.ready, dut.o.payload)
            if offering and i_ready:
                sent += 1
                offering = False
            if o_valid and o_ready:
                got.append(o_payload)
                when.append(cycle)
            cycle += 1

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return got, when
