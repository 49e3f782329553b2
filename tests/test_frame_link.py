"""The host's frame link: frames both ways through a real socket, damage found and skipped; on
wide links, the protocol's padded frames both ways (against protocol.encode_frame and
FrameDecoder)."""

import random
import socket

import pytest

from dlforge.host.link.frame_link import FrameLink
from dlforge.host.link.transport import Transport
from dlforge.rtl.link.protocol import (LINK_WIDTHS, Opcode, Status, encode_frame, frame_bytes,
                                       header_beats)
from dlforge.host.link.frame_parser import FrameDecoder


class SocketEnd(Transport):
    def __init__(self, sock, reliable):
        self.sock, self.reliable, self.name = sock, reliable, "socketpair"
        sock.setblocking(False)
        self.rfd = self.wfd = sock.fileno()


def _pair(reliable=False, **kw):
    a, b = socket.socketpair()
    frames = []
    link = FrameLink(SocketEnd(a, reliable), lambda *f: frames.append(
        (f[0], f[1], f[2], bytes(f[3]))), **kw)
    return link, b, frames


def _pump_until(link, frames, n):
    for _ in range(200):
        if len(frames) >= n:
            return
        link.pump(0.01)


def test_requests_are_frames_the_device_decodes():
    link, device, _ = _pair()
    payload = bytes(range(256)) * 40
    link.queue(Opcode.JPEG_DATA, 300, memoryview(payload)[:5000], status=1)
    link.queue(Opcode.PING, 7)
    while link.sending:
        link.pump(0.01)
    got = FrameDecoder(max_length=8192).feed(device.recv(1 << 16))
    assert [(f.opcode, f.status, f.tag, f.payload) for f in got] == [
        (Opcode.JPEG_DATA, 1, 300, payload[:5000]), (Opcode.PING, 0, 7, b"")]
    device.close()
    link.transport.sock.close()


def test_replies_in_any_chunking_with_damage_skipped():
    rng = random.Random(1)
    link, device, frames = _pair(max_reply=1 << 16)
    good = [encode_frame(Opcode.JPEG_DATA, 256 + n, rng.randbytes(rng.randrange(0, 60000)),
                         max_payload=1 << 17) for n in range(6)]
    bad_header = bytearray(good[1])
    bad_header[6] ^= 0x40                           # the tag: the header CRC fails
    bad_payload = bytearray(good[3])
    bad_payload[20] ^= 1
    wire = b"junk" + good[0] + bytes(bad_header) + good[2] + bytes(bad_payload) + good[4] \
        + b"\x5a" + good[5]
    for i in range(0, len(wire), 3000):
        device.sendall(wire[i:i + 3000])
        link.pump(0.01)
    _pump_until(link, frames, 5)
    decoded = FrameDecoder(max_length=1 << 17)
    want = [(f.opcode, f.status, f.tag, f.payload) for f in decoded.feed(wire)]
    assert frames == want
    assert [f[2] for f in frames] == [256, 258, 259, 260, 261]
    assert [f[1] for f in frames] == [0, 0, Status.BAD_CRC, 0, 0]
    assert link.bad_headers >= 1 and link.bad_payloads == 1
    device.close()
    link.transport.sock.close()


def test_reliable_links_skip_the_payload_crc():
    link, device, frames = _pair(reliable=True)
    frame = bytearray(encode_frame(Opcode.JPEG_DATA, 256, b"pixels"))
    frame[13] ^= 1
    device.sendall(bytes(frame))
    _pump_until(link, frames, 1)
    assert frames[0][1] == Status.OK and link.bad_payloads == 0
    device.close()
    link.transport.sock.close()


# ---- pacing on links without flow control ---------------------------------------------------

class SerialLikeEnd(SocketEnd):
    flow_control = False


def _paced(**kw):
    a, b = socket.socketpair()
    frames = []
    link = FrameLink(SerialLikeEnd(a, False), lambda *f: frames.append(
        (f[0], f[1], f[2], bytes(f[3]))), **kw)
    return link, b, frames


def _device_reads(device, decoder, timeout=0.2):
    """The frames the 'device' end has received so far."""
    device.settimeout(timeout)
    got = []
    try:
        while True:
            chunk = device.recv(1 << 16)
            if not chunk:
                break
            got += decoder.feed(chunk)
    except (BlockingIOError, socket.timeout):
        pass
    return got


def test_paced_link_waits_for_the_barrier_after_each_data_frame():
    from dlforge.rtl.link.protocol import BARRIER_TAG
    link, device, frames = _paced()
    assert link.pace
    decoder = FrameDecoder(max_length=8192)
    link.queue(Opcode.JPEG_DATA, 300, b"a" * 1000)
    link.queue(Opcode.JPEG_END, 300, b"b" * 10)
    link.queue(Opcode.READ_REGS, 5, b"\0\0\1\0")       # a control request behind them
    for _ in range(5):
        link.pump(0.01)
    got = _device_reads(device, decoder)
    # the first data frame and its barrier only: the rest waits for the barrier's answer
    assert [(f.opcode, f.tag) for f in got] == [(Opcode.JPEG_DATA, 300), (Opcode.PING, 0)]
    barrier = got[1]
    assert barrier.tag == BARRIER_TAG and len(barrier.payload) == 4
    assert link.sending and link.barrier is not None
    # the device answers the barrier: the next data frame, its barrier and the control frame
    device.sendall(encode_frame(Opcode.PING, 0, barrier.payload))
    for _ in range(5):
        link.pump(0.01)
    got = _device_reads(device, decoder)
    assert [(f.opcode, f.tag) for f in got] == [(Opcode.JPEG_END, 300), (Opcode.PING, 0),
                                                (Opcode.READ_REGS, 5)]
    device.sendall(encode_frame(Opcode.READ_REGS, 5, b"\1\0\0\0")
                   + encode_frame(Opcode.PING, 0, got[1].payload))
    for _ in range(5):
        link.pump(0.01)
    assert frames == [(Opcode.READ_REGS, 0, 5, b"\1\0\0\0")]     # barrier answers kept back
    assert not link.sending and link.barrier is None and link.barriers == 2
    device.close()
    link.transport.sock.close()


def test_paced_link_asks_again_when_a_barrier_is_refused_or_lost():
    link, device, frames = _paced(barrier_retry=0.2, barrier_resends=2)
    decoder = FrameDecoder(max_length=8192)
    link.queue(Opcode.JPEG_DATA, 300, b"x" * 100)
    link.queue(Opcode.JPEG_DATA, 301, b"y" * 100)
    link.pump(0.01)
    first = _device_reads(device, decoder)[1]
    # refused (its payload arrived damaged): written again at once
    device.sendall(encode_frame(Opcode.ERROR, 0, bytes([Opcode.PING]), status=Status.BAD_CRC))
    link.pump(0.05)
    again = _device_reads(device, decoder)
    assert [(f.opcode, f.tag) for f in again] == [(Opcode.PING, 0)]
    assert again[0].payload != first.payload and link.barrier_refusals == 1
    # the answer to neither comes: after barrier_retry seconds of silence, once more
    link.pump(0.5)
    lost = _device_reads(device, decoder)
    assert [(f.opcode, f.tag) for f in lost] == [(Opcode.PING, 0)] and link.barrier_timeouts == 1
    # then no more (the caller's silence rule takes over); an answer to the first barrier
    # still releases the next data frame: it too was written after the data frame
    link.pump(0.5)
    assert _device_reads(device, decoder) == []
    device.sendall(encode_frame(Opcode.PING, 0, first.payload))
    link.pump(0.05)
    link.pump(0.05)
    got = _device_reads(device, decoder)
    assert [(f.opcode, f.tag) for f in got] == [(Opcode.JPEG_DATA, 301), (Opcode.PING, 0)]
    assert frames == []
    device.close()
    link.transport.sock.close()


def test_abandon_drops_waiting_frames_and_a_given_up_barrier():
    link, device, frames = _paced()
    decoder = FrameDecoder(max_length=8192)
    for tag in (300, 301, 302):
        link.queue(Opcode.JPEG_DATA, tag, b"z" * 50)
    link.pump(0.01)
    assert [f.tag for f in _device_reads(device, decoder)] == [300, 0]
    assert link.abandon() == 2 and link.barrier is not None
    link.queue(Opcode.PING, 9)                 # control frames pass a pending barrier
    link.queue(Opcode.JPEG_END, 303, b"c")     # a data frame waits for it
    link.pump(0.01)
    assert [(f.opcode, f.tag) for f in _device_reads(device, decoder)] == [(Opcode.PING, 9)]
    link.abandon(barrier=True)                 # e.g. the ping's answer came: nothing left
    link.queue(Opcode.JPEG_END, 304, b"d")
    link.pump(0.01)
    assert [(f.opcode, f.tag) for f in _device_reads(device, decoder)] == [(Opcode.JPEG_END, 304),
                                                                           (Opcode.PING, 0)]
    device.close()
    link.transport.sock.close()


def test_links_with_flow_control_are_not_paced():
    link, device, _ = _pair()
    assert not link.pace
    for tag in (300, 301):
        link.queue(Opcode.JPEG_DATA, tag, b"q" * 100)
    while link.sending:
        link.pump(0.01)
    got = FrameDecoder(max_length=8192).feed(device.recv(1 << 16))
    assert [f.tag for f in got] == [300, 301] and link.barriers == 0
    device.close()
    link.transport.sock.close()


# ---- wide links: frames padded to whole beats -----------------------------------------------

class MemoryEnd(Transport):
    """A transport over two byte lists: what the host wrote, and what the 'device' sends in
    chunks of whatever sizes the test chose."""
    name = "memory"

    def __init__(self, reliable=False, chunks=()):
        self.reliable = reliable
        self.written = bytearray()
        self.chunks = list(chunks)

    def send(self, data):
        self.written += data
        return len(data)

    def recv_into(self, buffer):
        if not self.chunks:
            return 0
        chunk = self.chunks.pop(0)
        if len(chunk) > len(buffer):                # the rest at the next read
            chunk, rest = chunk[:len(buffer)], chunk[len(buffer):]
            self.chunks.insert(0, rest)
        buffer[:len(chunk)] = chunk
        return len(chunk)

    def wait(self, want_write, timeout):
        return False


def _received(link_bytes, wire, chunk_sizes, verify=True, max_reply=1 << 14):
    chunks, i = [], 0
    for n in chunk_sizes:
        if i >= len(wire):
            break
        chunks.append(wire[i:i + n])
        i += n
    chunks.append(wire[i:])
    frames = []
    link = FrameLink(MemoryEnd(not verify, chunks), lambda *f: frames.append(
        (f[0], f[1], f[2], bytes(f[3]))), max_reply=max_reply, verify=verify,
        buffer_bytes=1 << 16)
    link.link_bytes = link_bytes
    while link.transport.chunks:
        link.pump()
    return link, frames


@pytest.mark.parametrize("w", LINK_WIDTHS)
def test_queued_frames_are_the_protocols_bytes(w):
    """What the link writes is encode_frame's bytes exactly, for every payload length mod W
    (the pads, the CRC over the padded payload)."""
    link = FrameLink(MemoryEnd(), lambda *f: None, link_bytes=w)
    for length in list(range(0, 3 * w + 2)) + [4095, 4096]:
        payload = bytes((length * 7 + k) & 0xFF for k in range(length))
        for view in (payload, memoryview(payload)):
            parts = link._frame(Opcode.JPEG_DATA, 300 + length, view, 0x31)
            got = b"".join(parts)
            assert got == encode_frame(Opcode.JPEG_DATA, 300 + length, payload, status=0x31,
                                       max_payload=1 << 16, link_bytes=w)
            assert len(got) == frame_bytes(length, w)
            if length:                      # the payload itself, not a copy
                assert any(p.obj is payload for p in parts)


@pytest.mark.parametrize("w", LINK_WIDTHS)
def test_requests_through_the_pump_decode_at_their_width(w):
    link = FrameLink(MemoryEnd(), lambda *f: None)
    link.link_bytes = w                         # set after construction, as AcceleratorDevice does
    payload = bytes(range(256)) * 20
    sent = [(Opcode.JPEG_DATA, 300 + n, payload[:n * 37 % 5000], n & 0xF1) for n in range(20)]
    for op, tag, data, status in sent:
        link.queue(op, tag, memoryview(data), status)
    link.queue(Opcode.PING, 7)
    link.pump()
    decoder = FrameDecoder(max_length=8192, link_bytes=w)
    got = decoder.feed(bytes(link.transport.written))
    assert [(f.opcode, f.tag, f.payload, f.status) for f in got] == \
        [(op, tag, data, status) for op, tag, data, status in sent] + [(Opcode.PING, 7, b"", 0)]
    assert decoder.dropped_bytes == 0 and not decoder.buffer


def _damaged_stream(rng, w, count=40):
    """Frames of every payload length mod W with whole garbage beats between some of them,
    some headers and some payloads (or their pads) damaged; and the tags expected back."""
    wire, expect = bytearray(), []
    for n in range(count):
        length = rng.choice([n % w, w * rng.randrange(0, 40) + n % w, rng.randrange(0, 3000)])
        frame = bytearray(encode_frame(Opcode.JPEG_DATA, 256 + n, rng.randbytes(length),
                                       status=(n % 16) << 4, max_payload=1 << 14, link_bytes=w))
        kind = rng.random()
        if kind < 0.15:
            frame[rng.randrange(2, 12)] ^= 1 << rng.randrange(8)    # the header CRC fails
        else:
            expect.append((256 + n, kind >= 0.3))
        if 0.15 <= kind < 0.3:
            # a payload byte, a pad byte or a CRC byte: the CRC over the padded payload fails
            at = header_beats(w) * w
            frame[rng.randrange(at, at + -(-length // w) * w + 4)] ^= 1 << rng.randrange(8)
        if rng.random() < 0.3:
            garbage = bytearray(rng.randbytes(w * rng.randrange(1, 4)))
            if w > 2 and rng.random() < 0.5:
                garbage[1:3] = b"\x5a\xa5"      # a magic off the beat boundary: not a frame
            wire += garbage
        wire += frame
    return bytes(wire), expect


@pytest.mark.parametrize("w", LINK_WIDTHS)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_replies_at_every_width_in_any_chunking_with_damage_skipped(w, seed):
    """The host parses what frame_parser.FrameDecoder parses, frame for frame, whatever the
    chunking of the received bytes: damaged headers skipped a beat at a time, damaged
    payloads delivered as BAD_CRC, garbage beats dropped."""
    rng = random.Random(seed * 100 + w)
    wire, expect = _damaged_stream(rng, w)
    want = [(f.opcode, f.status, f.tag, f.payload)
            for f in FrameDecoder(max_length=1 << 14, link_bytes=w).feed(wire)]
    assert [(f[2], f[1] != Status.BAD_CRC) for f in want] == expect
    assert not all(good for _, good in expect)
    for sizes in ([len(wire)], [1] * 5000, [rng.randrange(1, 3 * w + 40) for _ in range(4000)],
                  [rng.randrange(1, 9000) for _ in range(100)]):
        link, frames = _received(w, wire, sizes)
        assert frames == want
        assert link.bad_payloads == sum(f[1] == Status.BAD_CRC for f in want)


@pytest.mark.parametrize("w", LINK_WIDTHS)
def test_wide_replies_on_reliable_links_skip_the_payload_crc(w):
    frame = bytearray(encode_frame(Opcode.JPEG_DATA, 256, b"pixels", link_bytes=w))
    frame[header_beats(w) * w] ^= 1
    link, frames = _received(w, bytes(frame) * 2, [5, 100], verify=False)
    assert [f[1] for f in frames] == [Status.OK] * 2 and link.bad_payloads == 0


@pytest.mark.parametrize("w", [w for w in LINK_WIDTHS if w > 1])
def test_wide_links_hunt_only_on_beat_boundaries(w):
    """A whole frame that starts off a beat boundary is not a frame on a wide link (the
    receiver never looks there); the next aligned one is."""
    good = encode_frame(Opcode.PING, 300, b"abc", link_bytes=w)
    wire = bytes(w) + b"\0" + good + bytes(w - 1) + good
    link, frames = _received(w, wire, [7] * 1000)
    assert [f[2] for f in frames] == [300]
    assert link.dropped_bytes == w + w + len(good)


def test_a_too_long_header_skips_one_beat():
    w = 16
    frame = bytearray(encode_frame(Opcode.JPEG_DATA, 300, bytes(100), max_payload=1 << 14,
                                   link_bytes=w))
    link, frames = _received(w, bytes(frame) + encode_frame(Opcode.PING, 301, link_bytes=w),
                             [3] * 100, max_reply=50)
    assert [f[2] for f in frames] == [301] and link.bad_headers == 1


def test_link_width_must_be_one_the_protocol_knows():
    link = FrameLink(MemoryEnd(), lambda *f: None)
    with pytest.raises(ValueError, match="link_bytes"):
        link.link_bytes = 3
    assert link.link_bytes == 1


def test_beats_count_from_the_first_byte_received_across_a_width_change():
    """Bytes taken before the width was set still count: the beats are the stream's."""
    frames = []
    link = FrameLink(MemoryEnd(False, [b"junk\x5a\xa5"]), lambda *f: frames.append(f[2]))
    link.pump()                                 # six bytes at W = 1: nothing
    good = encode_frame(Opcode.PING, 300, b"hi", link_bytes=4)
    link.link_bytes = 4
    link.transport.chunks = [b"\x5a\xa5" + good[:9], good[9:] + good]
    link.pump()
    assert frames == [300, 300]
