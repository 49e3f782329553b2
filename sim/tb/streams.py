"""Drive one valid/ready input stream and drain one output stream of a cocotb DUT, cycle by cycle.

One coroutine does both sides so that every clock costs two simulator round trips, which keeps
long regressions (hundreds of thousands of beats) fast.  Source and sink follow the stream
rules: the source holds a beat until it is taken; the sink's ready is random when asked.
"""

import random

from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

__all__ = ["StreamStats", "stream_through", "start", "reset", "send_beats"]


class StreamStats:
    """Clock counts of a run, from the first input beat accepted."""

    def __init__(self):
        self.cycles = 0
        self.first_in = None
        self.first_out = None
        self.last_out = None
        self.out_cycles = []   # cycle of every output beat, relative to first_in
        self.in_stalls = 0     # clocks an offered input beat was refused

    def as_dict(self):
        return {"cycles": self.cycles, "first_in": self.first_in, "first_out": self.first_out,
                "last_out": self.last_out, "in_stalls": self.in_stalls}


async def start(dut, sources=(), sinks=(), period_ns=10):
    """Start the clock, idle every source (valid low) and sink (ready low), then reset."""
    from cocotb.clock import Clock
    import cocotb

    cocotb.start_soon(Clock(dut.clk, period_ns, unit="ns").start())
    for name in sources:
        getattr(dut, f"{name}__valid").value = 0
    for name in sinks:
        getattr(dut, f"{name}__ready").value = 0
    await reset(dut)


async def reset(dut, cycles=2):
    dut.rst.value = 1
    for _ in range(cycles):
        await RisingEdge(dut.clk)
    await FallingEdge(dut.clk)
    dut.rst.value = 0


async def stream_through(dut, beats_in, n_out, *, inp="i", out="o", valid_prob=1.0,
                         ready_prob=1.0, rng=None, max_cycles=None, record_cycles=False,
                         done=None):
    """Send ``beats_in`` (ints) into stream ``inp``; collect ``n_out`` beats from ``out``
    (or, with ``done``, until ``done(beats collected)`` is true).

    ``ready_prob`` may be a function of the clock count, to script stalls.
    """
    finished = done or (lambda got: len(got) >= n_out)
    rng = rng or random.Random(0)
    i_valid, i_ready, i_payload = (getattr(dut, f"{inp}__{s}") for s in ("valid", "ready", "payload"))
    o_valid, o_ready, o_payload = (getattr(dut, f"{out}__{s}") for s in ("valid", "ready", "payload"))
    if max_cycles is None:
        max_cycles = 1000 + 50 * (len(beats_in) + n_out)
    stats = StreamStats()
    got = []
    sent = 0
    offering = False
    cycle = 0
    while not finished(got):
        if cycle >= max_cycles:
            raise TimeoutError(f"{len(got)} of {n_out} output beats after {cycle} clocks "
                               f"({sent} of {len(beats_in)} input beats taken)")
        await FallingEdge(dut.clk)
        # A source may only start offering between beats; once offered, a beat stays.
        if not offering and sent < len(beats_in) and (valid_prob >= 1 or rng.random() < valid_prob):
            offering = True
            i_payload.value = beats_in[sent]
        i_valid.value = int(offering)
        p_ready = ready_prob(cycle) if callable(ready_prob) else ready_prob
        take = p_ready >= 1 or (p_ready > 0 and rng.random() < p_ready)
        o_ready.value = int(take)
        await ReadOnly()
        if offering and i_ready.value:
            if stats.first_in is None:
                stats.first_in = cycle
            sent += 1
            offering = False
        elif offering:
            stats.in_stalls += 1
        if take and o_valid.value:
            got.append(int(o_payload.value))
            rel = cycle - (stats.first_in or 0)
            if stats.first_out is None:
                stats.first_out = rel
            stats.last_out = rel
            if record_cycles:
                stats.out_cycles.append(rel)
        cycle += 1
    stats.cycles = cycle
    await FallingEdge(dut.clk)
    i_valid.value = 0
    o_ready.value = 0
    return got, stats


async def send_beats(dut, name, beats, keep_going=lambda: True):
    """Offer ``beats`` on stream ``name`` one by one; give up when ``keep_going()`` is false."""
    valid, ready, payload = (getattr(dut, f"{name}__{s}") for s in ("valid", "ready", "payload"))
    for beat in beats:
        await FallingEdge(dut.clk)
        valid.value = 1
        payload.value = beat
        await ReadOnly()
        while not ready.value:
            if not keep_going():
                return
            await FallingEdge(dut.clk)
            await ReadOnly()
    await FallingEdge(dut.clk)
    valid.value = 0
