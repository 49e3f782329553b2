"""A fake accelerator in pure Python behind a transport (no simulator), for the tests of the
host's device handle, its JPEG scheduler and the engine exchange: it checks every rule of the
host's core choice, credit and interleaving as the frames arrive."""

import struct

from dlforge.host.link.transport import Transport
from dlforge.rtl.jpeg.status import JpegStatus
from dlforge.rtl.link.jpeg_reply import END_FORMAT as _RECORD
from dlforge.host.link.frame_parser import FrameDecoder
from dlforge.rtl.link.protocol import (CORE_SHIFT, REQUEST_CLOSE, REQUEST_FAST, VERSION, Opcode,
                                       Register, Status, encode_frame)


def fake_pixels(data):
    """The fake decoder's 'image' of a file: its bytes as one row of RGB pixels."""
    return bytes(data) * 3


class FakeDevice(Transport):
    """A device behind a transport: control requests answered at once, JPEG files decoded by
    ``cores`` fake cores one file per core per tick (a tick: the host waiting on the link),
    replies interleaved between the cores a frame at a time.  ``refuse``: indices (in arrival
    order) of JPEG frames to refuse as damaged, not acting on them."""
    name = "fake"
    reliable = False
    flow_control = True

    def __init__(self, cores=3, input_fifo=6000, link_bytes=1, max_payload=1024,
                 reply_payload=2048, report_width=None, refuse=(), version=VERSION,
                 lose=(), gaps=(), engine=False):
        self.link_bytes = link_bytes
        self.cores, self.fifo, self.w = cores, input_fifo, link_bytes
        self.max_payload, self.reply_payload = max_payload, reply_payload
        self.regs = [0] * 64
        self.regs[Register.VERSION] = version
        self.regs[Register.CORES] = cores
        self.regs[Register.MAX_WIDTH] = self.regs[Register.MAX_HEIGHT] = 4096
        self.regs[Register.MAX_PAYLOAD] = max_payload
        self.regs[Register.REPLY_PAYLOAD] = reply_payload
        self.regs[Register.LINK_WIDTH] = link_bytes if report_width is None else report_width
        self.regs[Register.INPUT_FIFO] = input_fifo
        if engine:                          # a fake engine: each word frame answered reversed
            self.regs[Register.ARRAY] = 0x08080808
            self.regs[Register.LINK_BYTES] = 32
        self.conv_frames = 0                # engine reply frames sent, numbered as the device's
        self.conv_lose = set()              # ... and the ones lost on the way
        self.decoder = FrameDecoder(max_length=max_payload, link_bytes=link_bytes)
        self.out = bytearray()
        self.refuse = set(refuse)
        self.lose = set(lose)               # reply frames (in sending order) lost on the way
        self.gaps = set(gaps)               # JPEG frames answered with Status.GAP
        self.replies = 0
        self.jpeg_frames = 0
        self.open = [None] * cores          # per core: [tag, bytearray, fast] of the open packet
        self.done = [[] for _ in range(cores)]      # complete packets waiting to be decoded
        self.held = [0] * cores             # bytes of files not yet answered, per core
        self.files = {}                     # tag -> core, for the one-core-per-file rule
        self.log = []                       # (opcode, core, tag) of the JPEG frames taken
        self.peak = [0] * cores
        self.violations = []

    # ---- the transport ------------------------------------------------------------------
    def send(self, data):
        before = self.decoder.bad_payloads
        frames = self.decoder.feed(bytes(data))
        for f in frames:
            # (the decoder marks a bad payload with status BAD_CRC, which is also the fast bit
            # of a JPEG request: the host never sends damage, so count instead)
            self._request(f, self.decoder.bad_payloads != before and f.status == Status.BAD_CRC)
        return len(data)

    def recv_into(self, buffer):
        n = min(len(buffer), len(self.out))
        buffer[:n] = self.out[:n]
        del self.out[:n]
        return n

    def wait(self, want_write, timeout):
        return self._tick()

    def _reply(self, opcode, tag, payload=b"", status=0, seq=0):
        self.out += encode_frame(opcode, tag, payload, status=status, max_payload=1 << 20,
                                 link_bytes=self.w, seq=seq)

    # ---- the device ---------------------------------------------------------------------
    def _padded(self, n):
        return n + -n % self.w

    def _request(self, f, damaged=False):
        if damaged:
            self._reply(Opcode.ERROR, f.tag, bytes([f.opcode]), Status.BAD_CRC)
        elif f.opcode == Opcode.PING:
            self._reply(Opcode.PING, f.tag, f.payload)
        elif f.opcode == Opcode.READ_REGS:
            first, count = struct.unpack("<HH", f.payload)
            self._reply(Opcode.READ_REGS, f.tag,
                        struct.pack(f"<{count}I", *self.regs[first:first + count]))
        elif f.opcode == Opcode.WRITE_REG:
            self._reply(Opcode.WRITE_REG, f.tag)
        elif f.opcode in (Opcode.JPEG_DATA, Opcode.JPEG_END):
            self._jpeg(f)
        elif f.opcode == Opcode.CONV_WORDS:
            n = self.conv_frames
            self.conv_frames += 1
            if n not in self.conv_lose:
                self._reply(Opcode.CONV_WORDS, f.tag, bytes(reversed(f.payload)), seq=n & 0xFF)

    def _jpeg(self, f):
        n = self.jpeg_frames
        self.jpeg_frames += 1
        if n in self.refuse:
            self._reply(Opcode.ERROR, f.tag, bytes([f.opcode]), Status.BAD_CRC)
            return
        if n in self.gaps:                  # as the device does: refused, and taken
            self._reply(Opcode.ERROR, f.tag, bytes([f.opcode]), Status.GAP)
        core = f.status >> CORE_SHIFT
        self.log.append((f.opcode, core, f.tag))
        if core >= self.cores:
            self.violations.append(f"tag {f.tag}: core {core} of {self.cores}")
            return
        # a file's chunks come numbered 0, 1, 2, ...; a closer (REQUEST_CLOSE) repeats the
        # last one's number
        want = 0 if self.open[core] is None else self.open[core][4]
        if f.seq != want & 0xFF and not f.status & REQUEST_CLOSE:
            self.violations.append(f"tag {f.tag}: frame {f.seq}, expected {want}")
        if self.files.setdefault(f.tag, core) != core:
            self.violations.append(f"tag {f.tag} on cores {self.files[f.tag]} and {core}")
        packet = self.open[core]
        if packet is None:
            # a new file on this core: the host's credit rule
            packet = self.open[core] = [f.tag, bytearray(), bool(f.status & REQUEST_FAST), 0, 0]
        elif packet[0] != f.tag and not self.refuse:
            self.violations.append(f"core {core}: tag {f.tag} inside tag {packet[0]}'s file")
        packet[1] += f.payload
        packet[3] += self._padded(len(f.payload))
        packet[4] = f.seq + 1
        self.held[core] += self._padded(len(f.payload))
        alone = self.held[core] == packet[3]
        if self.held[core] > self.fifo and not alone:
            self.violations.append(f"core {core}: {self.held[core]} bytes held > {self.fifo}")
        self.peak[core] = max(self.peak[core], self.held[core])
        if f.opcode == Opcode.JPEG_END:
            self.done[core].append(packet)
            self.open[core] = None

    def _tick(self):
        """Each core decodes one complete file; the replies of the cores interleave a frame
        at a time.  Whether anything happened."""
        lanes = []
        for core in range(self.cores):
            if not self.done[core]:
                continue
            tag, data, fast, held, _ = self.done[core].pop(0)
            self.held[core] -= held
            pixels = fake_pixels(data)
            # (a file's reply frames numbered 0, 1, 2, ... as the device's)
            frames = [(Opcode.JPEG_DATA, tag, pixels[i:i + self.reply_payload], 0, n)
                      for n, i in enumerate(range(0, len(pixels), self.reply_payload))]
            record = _RECORD.pack(JpegStatus.OK, 0, len(data), 1, 100 + fast, 0)
            lanes.append(frames + [(Opcode.JPEG_END, tag, record, 0, len(frames))])
        moved = bool(lanes) or bool(self.out)
        while lanes:
            for lane in list(lanes):
                frame = lane.pop(0)
                if self.replies not in self.lose:       # (its header destroyed)
                    self._reply(*frame)
                self.replies += 1
                if not lane:
                    lanes.remove(lane)
        return moved


def decode_all(accelerator, files, fast=False):
    """Decode ``files`` on ``accelerator`` and check every reply: in order, each OK and
    the fake decoder's image of its file."""
    results = list(accelerator.decode_jpegs((n, data, fast) for n, data in enumerate(files)))
    assert [r.key for r in results] == list(range(len(files)))
    for data, r in zip(files, results):
        assert r.status == JpegStatus.OK, r
        assert r.pixels.tobytes() == fake_pixels(data)
    return results
