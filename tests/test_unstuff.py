"""The unstuffer: stuffing, fill bytes, restart and end markers, the end of the packet."""

import pytest
from amaranth.sim import Simulator

from dlforge.rtl.jpeg.syntax import Marker
from dlforge.rtl.jpeg.unstuff import TokenKind as K, Unstuffer


def tokens_of(stream_bytes, restart_after=None):
    dut = Unstuffer()
    got = []

    async def feed(ctx):
        for i, b in enumerate(stream_bytes):
            ctx.set(dut.i.valid, 1)
            ctx.set(dut.i.payload, {"byte": b, "last": i == len(stream_bytes) - 1})
            await ctx.tick().until(dut.i.ready | dut.stopped)
            if ctx.get(dut.stopped) and not ctx.get(dut.i.ready):
                break
        ctx.set(dut.i.valid, 0)

    async def collect(ctx):
        ctx.set(dut.o.ready, 1)
        for _ in range(4 * len(stream_bytes) + 20):
            _, _, valid, payload = await ctx.tick().sample(dut.o.valid, dut.o.payload)
            if valid:
                got.append((K(payload.kind), int(payload.value)))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(feed, background=True)
    sim.add_testbench(collect)
    sim.run()
    return got


def test_stuffing_fill_and_markers():
    stream = (b"\x12\xff\x00\x34\xff" + Marker.RST3.bytes + b"\x56" + Marker.EOI.bytes
              + b"\x99")                                  # a stuffed FF, a fill byte before RST3
    assert tokens_of(stream) == [
        (K.DATA, 0x12), (K.DATA, 0xFF), (K.DATA, 0x34), (K.RESTART, 3), (K.DATA, 0x56),
        (K.END, Marker.EOI)]          # nothing after the end marker is taken


@pytest.mark.parametrize("tail, last_token", [(b"\x56", (K.DATA, 0x56)), (b"\xff", None),
                                              (Marker.RST0.bytes, (K.RESTART, 0))])
def test_end_of_packet_inside_the_scan(tail, last_token):
    got = tokens_of(b"\x12" + tail)
    assert got[-1] == (K.EOF, 0)
    if last_token:
        assert got[-2] == last_token
