"""The frame sender's bytes are exactly the protocol's encoding of its frames, whatever the
gaps in the payload and the back-pressure on the link."""

import random

import pytest
from amaranth.sim import Simulator

from amaranth_streams import collect_beats, send_beats

from dlforge.rtl.link.frame_tx import FrameSender
from dlforge.rtl.link.protocol import encode_frame


@pytest.mark.parametrize("w", [1, 4, 8, 16, 32, 64])
def test_bytes_equal_the_protocol_encoding(w):
    """Also at every link width and every payload length mod W: the producer's padding
    lanes hold junk, which the sender must send as zeros."""
    rng = random.Random(2 + w)
    lengths = [0, 1, 3, 50, 300] + list(range(w, 2 * w))
    frames = [(rng.randrange(256), rng.randrange(4), rng.randrange(1 << 16),
               rng.randbytes(rng.choice(lengths))) for _ in range(25)]
    expected = b"".join(encode_frame(op, tag, payload, status, link_bytes=w)
                        for op, status, tag, payload in frames)
    dut = FrameSender(w)
    out = []

    async def source(ctx):
        for op, status, tag, payload in frames:
            await send_beats(ctx, dut.header, [{"opcode": op, "status": status, "tag": tag,
                                                "length": len(payload)}])
            padded = payload + rng.randbytes(-len(payload) % w)
            beats = [int.from_bytes(padded[k:k + w], "little") for k in range(0, len(padded), w)]
            await send_beats(ctx, dut.payload, beats, rng, gap_prob=0.2)

    async def sink(ctx):
        # sampled at the edge: the payload passes straight through from the source
        beats = []
        out.append(beats)
        await collect_beats(ctx, dut.o, beats, rng, ready_prob=0.7)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(source)
    sim.add_testbench(sink, background=True)
    sim.run_until(1e-8 * (len(expected) * 4 // w + 1000))
    assert b"".join(int(b).to_bytes(w, "little") for b in out[0]) == expected
