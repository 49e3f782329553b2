"""The host's frame link: frames both ways through a real socket, damage found and skipped."""

import random
import socket

from dlforge.host.link import FrameLink
from dlforge.host.transport import Transport
from dlforge.rtl.link.protocol import FrameDecoder, Opcode, Status, encode_frame


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
    from dlforge.host.link import BARRIER_TAG
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
