"""A core's result packets become reply frames: the RGB bytes in order in frames of at most
max_payload bytes, then the file's record; under back-pressure, files back to back."""

import random
import struct

import pytest
from amaranth.sim import Simulator

from amaranth_streams import send_beats

from dlforge.rtl.jpeg.packets import HeaderLayout, OutputKind, TrailerLayout, output_layout
from dlforge.rtl.link.jpeg_reply import END_RECORD, JpegReplier
from dlforge.rtl.link.protocol import Opcode

LAYOUT = output_layout(16)


def _beats(tag, width, height, pixels, status, cycles, symbols, rng):
    header = HeaderLayout.const({"width": width, "height": height}).as_value().value
    beats = [{"kind": OutputKind.HEADER, "data": header, "count": 0, "tag": tag, "last": 0}]
    pos = 0
    while pos < len(pixels) // 3:
        count = min(rng.choice([4, 4, 4, 1, 2, 3]), len(pixels) // 3 - pos)
        chunk = pixels[3 * pos:3 * (pos + count)]
        chunk += rng.randbytes(12 - len(chunk))          # the lanes past count: junk
        beats.append({"kind": OutputKind.PIXELS, "data": int.from_bytes(chunk, "little"),
                      "count": count, "tag": tag, "last": 0})
        pos += count
    trailer = TrailerLayout.const({"status": status, "cycles": cycles,
                                   "symbols": symbols}).as_value().value
    beats.append({"kind": OutputKind.TRAILER, "data": trailer, "count": 0, "tag": tag,
                  "last": 1})
    return beats


@pytest.mark.parametrize("w", [1, 4, 8, 16, 32])
def test_files_become_frames(w):
    """At every link width: the frame's beats hold its bytes, the last beat padded."""
    rng = random.Random(4 + w)
    max_payload = 32 if w < 32 else 64
    files = []
    for n, px in enumerate([0, 1, 10, 32, 33, 64, 50]):        # 32 px = 96 bytes: exact fills
        files.append((1000 + n, rng.randrange(1, 99), rng.randrange(1, 99), rng.randbytes(3 * px),
                      rng.randrange(256), rng.getrandbits(32), rng.getrandbits(32)))
    beats = [b for f in files for b in _beats(*f, rng)]
    dut = JpegReplier(max_payload, w)
    frames = []

    async def source(ctx):
        await send_beats(ctx, dut.i, [LAYOUT.const(beat) for beat in beats], rng, gap_prob=0.3)

    async def sink(ctx):
        current = None
        while True:
            ctx.set(dut.header.ready, rng.random() < 0.6)
            ctx.set(dut.payload.ready, rng.random() < 0.7)
            _, _, hv, hr, h, pv, pr, p = await ctx.tick().sample(
                dut.header.valid, dut.header.ready, dut.header.payload,
                dut.payload.valid, dut.payload.ready, dut.payload.payload)
            if hv and hr:
                assert current is None or len(current[3]) == -(-current[2] // w) * w, \
                    "header mid-frame"
                current = [int(h.opcode), int(h.tag), int(h.length), bytearray()]
                frames.append(current)
            if pv and pr:
                current[3] += int(p).to_bytes(w, "little")

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(source)
    sim.add_testbench(sink, background=True)
    sim.run_until(1e-8 * 20000)
    assert all(len(f[3]) == -(-f[2] // w) * w and f[2] <= max_payload for f in frames)
    for f in frames:
        f[3] = f[3][:f[2]]
    for tag, width, height, pixels, status, cycles, symbols in files:
        mine = [f for f in frames if f[1] == tag]
        assert [f[0] for f in mine] == [Opcode.JPEG_DATA] * (len(mine) - 1) + [Opcode.JPEG_END]
        assert b"".join(bytes(f[3]) for f in mine[:-1]) == pixels
        assert bytes(mine[-1][3]) == struct.pack("<BBHHII", status, 0, width, height, cycles,
                                                 symbols)
        assert len(mine[-1][3]) == END_RECORD
    assert [f[1] for f in frames] == sorted(f[1] for f in frames)     # files in order


@pytest.mark.parametrize("w", [1, 4, 32])
def test_one_core_keeps_the_link_busy(w):
    """Two frame buffers: a frame is sent while the next fills, so a long image leaves at
    nearly the link's rate (one buffer would give half), or the core's 12 bytes a clock at
    a wide link."""
    rng = random.Random(5)
    max_payload = 64 if w < 32 else 256
    pixels = rng.randbytes(3 * 400)
    beats = _beats(77, 20, 20, pixels, 0, 1, 2, rng)
    dut = JpegReplier(max_payload, w)
    got = bytearray()
    done = []

    async def source(ctx):
        await send_beats(ctx, dut.i, [LAYOUT.const(beat) for beat in beats], rng, gap_prob=0.0)

    async def sink(ctx):
        ctx.set(dut.header.ready, 1)
        ctx.set(dut.payload.ready, 1)
        clocks = 0
        ends = 0
        while not ends:
            _, _, hv, h, pv, p = await ctx.tick().sample(
                dut.header.valid, dut.header.payload, dut.payload.valid, dut.payload.payload)
            clocks += 1
            if hv and h.opcode == Opcode.JPEG_END:
                ends += 1
            if pv:
                got.extend(int(p).to_bytes(w, "little"))
        done.append(clocks)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(source)
    sim.add_testbench(sink)
    sim.run()
    assert bytes(got[:len(pixels)]) == pixels
    ideal = len(pixels) / min(w, 12)           # the link's rate, or the core's 4 pixels a clock
    assert done[0] < 1.25 * ideal + 40, (done[0], ideal)
