"""The frame sender's bytes are exactly the protocol's encoding of its frames, whatever the
gaps in the payload and the back-pressure on the link."""

import random

from amaranth.sim import Simulator

from amaranth_streams import collect_beats, send_beats

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
            await send_beats(ctx, dut.header, [{"opcode": op, "status": status, "tag": tag,
                                                "length": len(payload)}])
            await send_beats(ctx, dut.payload, payload, rng, gap_prob=0.2)

    async def sink(ctx):
        # sampled at the edge: the payload passes straight through from the source
        await collect_beats(ctx, dut.o, out, rng, ready_prob=0.7)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(source)
    sim.add_testbench(sink, background=True)
    sim.run_until(1e-8 * (len(expected) * 4 + 1000))
    assert bytes(out) == expected
