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
