"""The link control plane against the host's frame codec: pings echo, registers read and
write, every refusal is an ERROR frame with the request's tag, data frames reach the data path
whole and its replies go out framed; damaged frames never act."""

import random
import struct

import pytest
from amaranth.sim import Simulator

from amaranth_streams import send_beats

from dlforge.rtl.link.control import LinkControl
from dlforge.rtl.link.protocol import Opcode, Register, Status, encode_frame, frame_bytes
from dlforge.host.link.frame_parser import FrameDecoder

DATA_OP = Opcode.JPEG_DATA


WIDTHS = [1, 4, 8, 32, 64]


def beats_of(data, w):
    return [int.from_bytes(data[k:k + w], "little") for k in range(0, len(data), w)]


def run(requests, regs, seed=1, ready_prob=0.8, w=1, events=None):
    """Send ``requests`` (frames for a link of ``w`` bytes); return the decoded response
    frames, the data-path frames and the number of reset pulses.  ``events`` (a dict, if
    given) collects the register writes, the data-frame starts and, at each ``data_sent``
    pulse, how many response bytes had left by the end of that clock."""
    rng = random.Random(seed)
    dut = LinkControl(data_opcodes=[DATA_OP], max_payload=256, link_bytes=w)
    stream = b"".join(requests)
    out = bytearray()
    data_frames, current = [], bytearray()
    resets = []

    async def feed(ctx):
        for n, value in enumerate(regs):
            ctx.set(dut.regs[n], value)
        await send_beats(ctx, dut.i, beats_of(stream, w))

    async def sink(ctx):
        # Values sampled at the clock edge: what was really transferred, whatever order the
        # testbenches ran in during the clock.
        while True:
            ctx.set(dut.o.ready, rng.random() < ready_prob)
            _, _, valid, ready, byte, reset, written, reg, value, start, sent = \
                await ctx.tick().sample(dut.o.valid, dut.o.ready, dut.o.payload, dut.reset,
                                        dut.written, dut.write_reg, dut.write_value,
                                        dut.data_start, dut.data_sent)
            if valid and ready:
                out.extend(int(byte).to_bytes(w, "little"))
            if reset:
                resets.append(1)
            if events is not None:
                if written:
                    events.setdefault("writes", []).append((int(reg), int(value)))
                if start:
                    events["starts"] = events.get("starts", 0) + 1
                if sent:
                    events.setdefault("sent_at", []).append(len(out))

    async def data_path(ctx):
        # Take a data frame, then answer it: opcode and tag back, payload reversed.
        pending = []
        while True:
            if not pending:
                ctx.set(dut.data.ready, 1)
                if ctx.get(dut.data.valid):
                    beat = ctx.get(dut.data.payload)
                    if int(beat.header.length):
                        current.extend(int(beat.data).to_bytes(w, "little"))
                    if beat.last:
                        h = beat.header
                        got = bytes(current[:int(h.length)])
                        data_frames.append((int(h.tag), got))
                        pending = [("header", {"opcode": int(h.opcode), "status": 0,
                                               "tag": int(h.tag), "length": len(got)})]
                        pending += [("byte", b) for b in beats_of(bytes(reversed(got)), w)]
                        current.clear()
                await ctx.tick()
                continue
            ctx.set(dut.data.ready, 0)
            kind, value = pending[0]
            port = dut.reply_header if kind == "header" else dut.reply
            ctx.set(dut.reply_header.valid, kind == "header")
            ctx.set(dut.reply.valid, kind == "byte")
            ctx.set(port.payload, value)
            _, _, taken = await ctx.tick().sample(port.ready)
            if taken:
                pending.pop(0)
                if not pending:
                    ctx.set(dut.reply_header.valid, 0)
                    ctx.set(dut.reply.valid, 0)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(feed)
    sim.add_testbench(sink, background=True)
    sim.add_testbench(data_path, background=True)
    sim.run_until(1e-8 * (len(stream) * 6 + 3000))
    frames = FrameDecoder(link_bytes=w).feed(bytes(out))
    return [(f.opcode, f.status, f.tag, f.payload) for f in frames], data_frames, len(resets)


@pytest.mark.parametrize("w", WIDTHS)
def test_ping_registers_and_refusals(w):
    def frame(*args):
        return encode_frame(*args, link_bytes=w)
    regs = [0x1000 + 7 * n for n in range(64)]
    damaged = bytearray(frame(Opcode.PING, 9, b"hello"))
    header = -(-12 // w) * w
    damaged[header + 1] ^= 0x10                          # a payload byte: CRC fails
    requests = [
        frame(Opcode.PING, 1, b"abc"),
        frame(Opcode.PING, 2),
        frame(Opcode.READ_REGS, 3, struct.pack("<HH", 5, 3)),
        frame(Opcode.READ_REGS, 10, struct.pack("<HH", 17, 20)),   # several beats' worth
        frame(Opcode.WRITE_REG, 4, struct.pack("<HI", Register.RESET, 1)),
        bytes(damaged),
        frame(0x55, 5, b"xyz"),                          # unknown opcode
        frame(Opcode.READ_REGS, 6, b"\x00"),             # wrong size
        frame(Opcode.READ_REGS, 7, struct.pack("<HH", 60, 10)),   # past the last register
        frame(Opcode.WRITE_REG, 8, struct.pack("<HI", 3, 99)),
    ]
    events = {}
    responses, _, resets = run(requests, regs, w=w, events=events)
    assert events.get("writes") == [(Register.RESET, 1), (3, 99)]
    assert "starts" not in events and "sent_at" not in events      # no data frames
    # (a refusal for a bad CRC is raised as the frame ends, and may overtake answers to
    # frames before it that are still queued: order by tag)
    assert sorted(responses, key=lambda r: r[2]) == sorted([
        (Opcode.PING, Status.OK, 1, b"abc"),
        (Opcode.PING, Status.OK, 2, b""),
        (Opcode.READ_REGS, Status.OK, 3, struct.pack("<3I", *regs[5:8])),
        (Opcode.READ_REGS, Status.OK, 10, struct.pack("<20I", *regs[17:37])),
        (Opcode.WRITE_REG, Status.OK, 4, b""),
        (Opcode.ERROR, Status.BAD_CRC, 9, bytes([Opcode.PING])),
        (Opcode.ERROR, Status.BAD_OPCODE, 5, b"\x55"),
        (Opcode.ERROR, Status.BAD_REQUEST, 6, bytes([Opcode.READ_REGS])),
        (Opcode.ERROR, Status.BAD_REQUEST, 7, bytes([Opcode.READ_REGS])),
        (Opcode.WRITE_REG, Status.OK, 8, b""),
    ], key=lambda r: r[2])
    assert resets == 1


@pytest.mark.parametrize("w", WIDTHS)
def test_data_frames_reach_the_data_path_and_replies_go_out(w):
    rng = random.Random(5)
    payloads = [rng.randbytes(rng.choice([0, 1, 30, 256, 255, 65])) for _ in range(8)]
    requests = []
    for n, payload in enumerate(payloads):
        requests.append(encode_frame(DATA_OP, 100 + n, payload, link_bytes=w))
        requests.append(encode_frame(Opcode.PING, 200 + n, b"p", link_bytes=w))
    events = {}
    responses, data_frames, _ = run(requests, [0] * 64, seed=6, w=w, events=events)
    assert data_frames == [(100 + n, p) for n, p in enumerate(payloads)]
    replies = [r for r in responses if r[0] == DATA_OP]
    assert replies == [(DATA_OP, 0, 100 + n, bytes(reversed(p))) for n, p in enumerate(payloads)]
    assert [r[2] for r in responses if r[0] == Opcode.PING] == [200 + n for n in range(8)]
    # the span signals: a start per data frame (none for the pings), and a data_sent pulse
    # on the clock each data reply's last byte left (none for the pings' answers)
    assert events["starts"] == len(payloads)
    ends, position = [], 0
    for opcode, _, _, payload in responses:
        position += frame_bytes(len(payload), w)
        if opcode == DATA_OP:
            ends.append(position)
    assert events["sent_at"] == ends


@pytest.mark.parametrize("w", [1, 32])
def test_replies_go_out_while_a_data_frame_waits(w):
    """The data path takes no new frame until its reply is out (as a decoder core whose
    output is full stops reading): back-to-back data frames must not deadlock the link."""
    # A long frame, then a short one that is checked and waiting when the long one ends.
    payloads = [bytes([n]) * (200 if n % 2 == 0 else 1) for n in range(6)]
    requests = [encode_frame(DATA_OP, 300 + n, p, link_bytes=w) for n, p in enumerate(payloads)]
    responses, data_frames, _ = run(requests, [0] * 64, seed=7, w=w)
    assert data_frames == [(300 + n, p) for n, p in enumerate(payloads)]
    assert [(r[2], r[3]) for r in responses] == [(300 + n, bytes(reversed(p)))
                                                 for n, p in enumerate(payloads)]
