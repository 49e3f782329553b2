"""The frame receiver: intact frames come out whole and in order under back-pressure; a
damaged payload is reported with its tag and never comes out; a damaged header is dropped and
the next frame is found."""

import random

import pytest
from amaranth.sim import Simulator

from amaranth_streams import send_beats

from dlforge.rtl.link.frame_rx import FrameReceiver
from dlforge.rtl.link.protocol import (HEADER_BYTES, MAGIC, Status, encode_frame, header_beats,
                                       payload_beats)

_NO_MAGIC = [b for b in range(256) if b != MAGIC[0]]


def _run(stream, max_payload, seed, expected_frames, expected_errors, w=1):
    rng = random.Random(seed)
    dut = FrameReceiver(max_payload, w)
    stream = [int.from_bytes(stream[k:k + w], "little") for k in range(0, len(stream), w)]
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
                    current.extend(int(beat.data).to_bytes(w, "little"))
                if beat.last:
                    frames.append((int(h.opcode), int(h.status), int(h.tag),
                                   bytes(current[:int(h.length)])))
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


@pytest.mark.parametrize("w", [1, 4, 8, 16, 32, 64])
def test_frames_with_damage(w):
    """Garbage (whole beats at W > 1: a DMA stream moves beats), bit flips in headers and
    payloads, payload lengths of every remainder mod W."""
    rng = random.Random(3 + w)
    stream = bytearray(rng.choice(_NO_MAGIC) for _ in range(7 if w == 1 else w))
    want_frames, want_errors, header_damage = [], [], 0
    lengths = [0, 1, 5, 64, 256] + list(range(w, 2 * w))
    for n in range(40):
        opcode, tag, status = rng.randrange(1, 0x30), rng.randrange(1 << 16), rng.randrange(3)
        payload = bytes(rng.choice(_NO_MAGIC) for _ in range(rng.choice(lengths)))
        frame = bytearray(encode_frame(opcode, tag, payload, status, link_bytes=w))
        fault = rng.random() if n else 1.0
        start = header_beats(w) * w
        if fault < 0.15:          # a payload or CRC byte (padding included): reported by tag
            covered = start + payload_beats(len(payload), w) * w + 4
            frame[rng.randrange(start, covered)] ^= 1 << rng.randrange(8)
            want_errors.append((Status.BAD_CRC, opcode, tag))
        elif fault < 0.3:         # a header byte after the magic: dropped silently
            frame[rng.randrange(2, HEADER_BYTES)] ^= 1 << rng.randrange(8)
            header_damage += 1
        else:
            want_frames.append((opcode, status, tag, payload))
        stream += frame
        if rng.random() < 0.2:
            garbage = rng.randint(1, 9) * (1 if w == 1 else w)
            stream += bytes(rng.choice(_NO_MAGIC) for _ in range(garbage))
    assert want_errors and header_damage
    counters = _run(bytes(stream), 256, 4, want_frames, want_errors, w)
    assert counters["header"] >= header_damage


@pytest.mark.parametrize("w", [1, 32])
def test_oversize_length_is_a_header_error(w):
    good = encode_frame(0x10, 7, b"abc", link_bytes=w)
    big = encode_frame(0x10, 8, bytes(300), link_bytes=w)     # above this receiver's 256
    assert _run(big + good, 256, 5, [(0x10, 0, 7, b"abc")], [], w)["header"] == 1


@pytest.mark.parametrize("w", [1, 4, 32])
def test_back_to_back_frames_leave_a_beat_a_clock(w):
    """With the link and the output always ready, checked frames come out as fast as they
    arrive: a beat a clock, less only the frames' header and CRC beats and a clock or two
    per frame (a replay that held back for its FIFO's latency gave three beats in four)."""
    payload = 64 * w
    frames = [encode_frame(0x10, n, bytes([n]) * payload, max_payload=payload, link_bytes=w)
              for n in range(6)]
    stream = b"".join(frames)
    beats = [int.from_bytes(stream[k:k + w], "little") for k in range(0, len(stream), w)]
    dut = FrameReceiver(payload, w)
    taken = []

    async def feed(ctx):
        await send_beats(ctx, dut.i, beats)

    async def drain(ctx):
        ctx.set(dut.o.ready, 1)
        clock = 0
        while True:
            _, _, valid = await ctx.tick().sample(dut.o.valid)
            if valid:
                taken.append(clock)
            clock += 1

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(feed)
    sim.add_testbench(drain, background=True)
    sim.run_until(1e-8 * (len(beats) + 200))
    per_frame = len(frames[0]) // w
    assert len(taken) == 6 * (payload // w)
    # from the first beat out to the last: the frames' own beats and 3 clocks a frame at most
    assert taken[-1] - taken[0] + 1 <= 5 * (per_frame + 3) + payload // w
