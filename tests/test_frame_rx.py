"""The frame receiver: intact frames come out whole and in order under back-pressure; a
damaged payload is reported with its tag and never comes out; a damaged header is dropped and
the next frame is found."""

import random

from amaranth.sim import Simulator

from amaranth_streams import send_beats

from dlforge.rtl.link.frame_rx import FrameReceiver
from dlforge.rtl.link.protocol import HEADER_BYTES, MAGIC, Status, encode_frame

_NO_MAGIC = [b for b in range(256) if b != MAGIC[0]]


def _run(stream, max_payload, seed, expected_frames, expected_errors):
    rng = random.Random(seed)
    dut = FrameReceiver(max_payload)
    frames, errors, current, counters = [], [], bytearray(), {}

    async def feed(ctx):
        await send_beats(ctx, dut.i, stream, rng, gap_prob=0.2)

    async def drain(ctx):
        while True:
            ready = rng.random() < 0.7
            ctx.set(dut.o.ready, ready)
            ctx.set(dut.err.ready, rng.random() < 0.5)
            if ctx.get(dut.o.valid) and ready:
                beat = ctx.get(dut.o.payload)
                h = beat.header
                if int(h.length):
                    current.append(int(beat.data))
                if beat.last:
                    frames.append((int(h.opcode), int(h.status), int(h.tag), bytes(current)))
                    current.clear()
            counters.update(crc=ctx.get(dut.crc_errors), header=ctx.get(dut.header_errors),
                            frames=ctx.get(dut.frames))
            if ctx.get(dut.err.valid) and ctx.get(dut.err.ready):
                e = ctx.get(dut.err.payload)
                errors.append((int(e.status), int(e.opcode), int(e.tag)))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(feed)
    sim.add_testbench(drain, background=True)
    sim.run_until(1e-8 * (len(stream) * 6 + 2000))
    assert frames == expected_frames
    assert errors == expected_errors
    assert counters["crc"] == len(expected_errors)
    assert counters["frames"] == len(expected_frames)
    return counters


def test_frames_with_damage():
    rng = random.Random(3)
    stream = bytearray(rng.choice(_NO_MAGIC) for _ in range(7))
    want_frames, want_errors, header_damage = [], [], 0
    for n in range(40):
        opcode, tag, status = rng.randrange(1, 0x30), rng.randrange(1 << 16), rng.randrange(3)
        payload = bytes(rng.choice(_NO_MAGIC) for _ in range(rng.choice([0, 1, 5, 64, 256])))
        frame = bytearray(encode_frame(opcode, tag, payload, status))
        fault = rng.random() if n else 1.0
        if fault < 0.15:          # a payload or CRC byte: reported by tag
            frame[rng.randrange(HEADER_BYTES, len(frame))] ^= 1 << rng.randrange(8)
            want_errors.append((Status.BAD_CRC, opcode, tag))
        elif fault < 0.3:         # a header byte after the magic: dropped silently
            frame[rng.randrange(2, HEADER_BYTES)] ^= 1 << rng.randrange(8)
            header_damage += 1
        else:
            want_frames.append((opcode, status, tag, payload))
        stream += frame
        if rng.random() < 0.2:
            stream += bytes(rng.choice(_NO_MAGIC) for _ in range(rng.randint(1, 9)))
    assert want_errors and header_damage
    counters = _run(bytes(stream), 256, 4, want_frames, want_errors)
    assert counters["header"] >= header_damage


def test_oversize_length_is_a_header_error():
    good = encode_frame(0x10, 7, b"abc")
    big = encode_frame(0x10, 8, bytes(300))          # above this receiver's 256
    assert _run(big + good, 256, 5, [(0x10, 0, 7, b"abc")], [])["header"] == 1
