"""The frame sender's bytes are exactly the protocol's encoding of its frames, whatever the
gaps in the payload and the back-pressure on the link."""

import random

from amaranth.sim import Simulator

from dlforge.rtl.link.frame_tx import FrameSender
from dlforge.rtl.link.protocol import encode_frame


def test_bytes_equal_the_protocol_encoding():
    rng = random.Random(2)
    frames = [(rng.randrange(256), rng.randrange(4), rng.randrange(1 << 16),
               rng.randbytes(rng.choice([0, 1, 3, 50, 300]))) for _ in range(25)]
    expected = b"".join(encode_frame(op, tag, payload, status)
                        for op, status, tag, payload in frames)
    dut = FrameSender()
    out = bytearray()

    async def source(ctx):
        for op, status, tag, payload in frames:
            ctx.set(dut.header.valid, 1)
            ctx.set(dut.header.payload, {"opcode": op, "status": status, "tag": tag,
                                         "length": len(payload)})
            await ctx.tick().until(dut.header.ready)
            ctx.set(dut.header.valid, 0)
            for byte in payload:
                while rng.random() < 0.2:
                    ctx.set(dut.payload.valid, 0)
                    await ctx.tick()
                ctx.set(dut.payload.valid, 1)
                ctx.set(dut.payload.payload, byte)
                await ctx.tick().until(dut.payload.ready)
            ctx.set(dut.payload.valid, 0)

    async def sink(ctx):
        while True:
            ready = rng.random() < 0.7
            ctx.set(dut.o.ready, ready)
            if ready and ctx.get(dut.o.valid):
                out.append(ctx.get(dut.o.payload))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(source)
    sim.add_testbench(sink, background=True)
    sim.run_until(1e-8 * (len(expected) * 4 + 1000))
    assert bytes(out) == expected
