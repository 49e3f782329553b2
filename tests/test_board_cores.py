"""The Board's core choice, credit and interleaving, and its link width, against a fake device
in pure Python (no simulator): the device checks every rule as the frames arrive."""

import random
import struct

import numpy as np
import pytest

from dlforge.host.device.board import Board
from dlforge.host.link.errors import DeviceGone, DeviceUnreachable
from dlforge.host.link.transport import Transport
from dlforge.rtl.jpeg.status import JpegStatus
from dlforge.rtl.link.jpeg_reply import END_FORMAT as _RECORD
from dlforge.rtl.link.protocol import (CORE_SHIFT, LINK_WIDTHS, REQUEST_CLOSE, REQUEST_FAST,
                                       VERSION,
                                       FrameDecoder, Opcode, Register, Status, encode_frame)



def _pixels(data):
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
            pixels = _pixels(data)
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


def _files(rng, count, sizes=(100, 5000)):
    return [rng.randbytes(rng.randrange(*sizes)) for _ in range(count)]


def _decode(board, files, fast=False):
    results = list(board.decode_jpegs((n, data, fast) for n, data in enumerate(files)))
    assert [r.key for r in results] == list(range(len(files)))
    for data, r in zip(files, results):
        assert r.status == JpegStatus.OK, r
        assert r.pixels.tobytes() == _pixels(data)
    return results


@pytest.mark.parametrize("w", LINK_WIDTHS)
def test_files_spread_over_the_cores_within_their_credit(w):
    rng = random.Random(w)
    device = FakeDevice(cores=3, input_fifo=6000, link_bytes=w)
    board = Board(device, timeout=2.0)
    assert board.info()["link_bytes"] == w and board.info()["input_fifo"] == 6000
    files = _files(rng, 40) + [rng.randbytes(9000)] + _files(rng, 5)    # one above the FIFO
    _decode(board, files)
    assert device.violations == []
    cores = {device.files[tag] for tag in device.files}
    assert cores == {0, 1, 2}
    assert max(device.peak) <= 9000 + w and sorted(device.peak)[0] <= 6000
    assert board._outstanding == [0, 0, 0] and not board._attempts


def test_the_first_files_reach_every_core_early_and_the_least_loaded_core_gets_the_next():
    device = FakeDevice(cores=3, input_fifo=1 << 20, max_payload=1024)
    board = Board(device, timeout=2.0)
    files = [bytes([n]) * 4000 for n in range(3)] + [bytes([9]) * 100]
    _decode(board, files, fast=True)
    # four chunks each: the first three frames go to three different cores
    first = device.log[:3]
    assert sorted(core for _, core, _ in first) == [0, 1, 2]
    assert len({tag for _, _, tag in first}) == 3
    # the small fourth file went to a core with the fewest bytes outstanding: all equal,
    # so the first; and after its own file's frames, in order
    tags = {device.log[0][2] + n: n for n in range(4)}
    per_core = {}
    for _, core, tag in device.log:
        per_core.setdefault(core, []).append(tags[tag])
    assert [list(dict.fromkeys(v)) for _, v in sorted(per_core.items())] == [[0, 3], [1], [2]]
    assert device.violations == []


def test_fast_upsampling_and_the_core_share_the_status_byte():
    device = FakeDevice(cores=2, input_fifo=1 << 20)
    board = Board(device, timeout=2.0)
    seen = []
    original = device._jpeg

    def spy(f):
        seen.append(f.status)
        original(f)
    device._jpeg = spy
    _decode(board, [b"x" * 10, b"y" * 10], fast=True)
    assert sorted(seen) == [REQUEST_FAST, REQUEST_FAST | 1 << CORE_SHIFT]


def test_a_file_larger_than_the_fifo_waits_for_an_idle_core():
    device = FakeDevice(cores=2, input_fifo=3000, max_payload=1024)
    board = Board(device, timeout=2.0)
    files = [b"a" * 2500, b"b" * 2500, b"c" * 8000, b"d" * 100]
    _decode(board, files)
    assert device.violations == []
    # the big file was alone in its core
    assert max(device.peak) == 8000


@pytest.mark.parametrize("w", [1, 16])
@pytest.mark.parametrize("refused", [0, 3, 5, 9, 14])
def test_a_refused_frame_voids_closes_each_core_and_resubmits(refused, w):
    """A refused JPEG frame (a final frame too) voids every attempt; each core that had files
    in flight gets a closer on its own core; every file still comes back right."""
    rng = random.Random(refused)
    device = FakeDevice(cores=3, input_fifo=5000, max_payload=1024, refuse={refused},
                        link_bytes=w)
    board = Board(device, timeout=2.0)
    files = _files(rng, 12, (500, 3000))
    _decode(board, files)
    assert board.resubmissions >= 1
    assert board._outstanding == [0, 0, 0] and not board._attempts
    # no file's frames ever went to two cores (closers included: the same tag, same core)
    assert not [v for v in device.violations if "cores" in v or "core 3" in v]


def test_link_width_from_the_transport_or_the_caller_and_checked_against_the_device():
    with pytest.raises(DeviceUnreachable, match="8-byte link .* link_bytes=8"):
        Board(FakeDevice(link_bytes=4, report_width=8), timeout=1.0)
    # a device from before LINK_WIDTH (0.1): bytes, no credit reported, files back to back
    old = FakeDevice(cores=2, link_bytes=1, report_width=0, max_payload=1024,
                     version=VERSION & ~0xFFFF | 1)
    old.regs[Register.INPUT_FIFO] = 0
    board = Board(old, timeout=1.0)
    assert board.link_bytes == 1 and board.input_fifo == 0
    _decode(board, [b"z" * 3000] * 4)
    tags = [tag for _, _, tag in old.log]
    assert tags == sorted(tags) and old.violations == []
    device = FakeDevice(link_bytes=16)
    del device.link_bytes                               # the transport does not say
    board = Board(device, timeout=1.0, link_bytes=16)
    assert board.link.link_bytes == 16
    with pytest.raises(ValueError, match="link_bytes"):
        Board(FakeDevice(), link_bytes=3)


def test_a_refused_final_frame_left_open_is_closed_on_its_own_core():
    """The final frame of a file on core 1 refused: only a final frame to core 1 ends the
    packet it left open there; the host's closer for core 1 does."""
    device = FakeDevice(cores=2, input_fifo=1 << 20, max_payload=1024)
    # files 0 and 1, two chunks each, interleaved: 0a 1a 0b 1b -> 1b (core 1's final) refused
    device.refuse = {3}
    board = Board(device, timeout=2.0)
    files = [b"p" * 2000, b"q" * 2000]
    results = _decode(board, files)
    assert len(results) == 2
    closers = [entry for entry in device.log[3:] if entry[0] == Opcode.JPEG_END
               and entry[2] in (device.log[0][2], device.log[1][2])]
    assert {core for _, core, _ in closers} == {0, 1}
    assert np.array_equal(results[1].pixels.reshape(-1), np.frombuffer(_pixels(files[1]),
                                                                       np.uint8))


class PacedFakeDevice(FakeDevice):
    flow_control = False        # a UART board: the host paces, a barrier PING per data frame


def test_paced_links_interleave_and_keep_the_credit_too():
    device = PacedFakeDevice(cores=2, input_fifo=4000, max_payload=512)
    board = Board(device, timeout=2.0)
    assert board.link.pace
    _decode(board, _files(random.Random(5), 12, (200, 3000)))
    assert device.violations == [] and board.link.barriers >= len(device.log)


@pytest.mark.parametrize("lost", [0, 1, 4, 7])
def test_a_lost_reply_frame_and_the_file_is_decoded_again(lost):
    """Reply frames count 0, 1, 2, ... per file: a lost data frame leaves a gap (or a
    JPEG_END numbered too low), a lost JPEG_END the silence rule's ping; either way the
    file is decoded again and every result is right."""
    rng = random.Random(lost)
    device = FakeDevice(cores=2, input_fifo=1 << 20, reply_payload=512, lose={lost})
    board = Board(device, timeout=1.0)
    _decode(board, _files(rng, 4, (300, 900)))
    assert board.resubmissions >= 1


def test_a_gap_refusal_voids_and_resubmits():
    """Status.GAP (a request frame lost before this one): every attempt voided, closers sent,
    the files decoded again, all right."""
    rng = random.Random(9)
    device = FakeDevice(cores=3, input_fifo=5000, max_payload=1024, gaps={4})
    board = Board(device, timeout=2.0)
    _decode(board, _files(rng, 8, (500, 3000)))
    assert board.resubmissions >= 1


def test_engine_reply_frames_are_numbered_and_a_lost_one_is_named():
    """The engine numbers its reply frames like the cores: results come back whole, and a
    frame lost on the way is reported as lost as soon as the rest is in, not as a silent
    device at the timeout."""
    device = FakeDevice(engine=True)
    board = Board(device, timeout=30.0)
    raw = bytes(range(256)) * 12                    # three frames of words at 1024 bytes
    want = b"".join(bytes(reversed(raw[i:i + 1024])) for i in range(0, len(raw), 1024))
    assert board.conv_exchange(raw, len(raw)) == want
    assert board.conv_exchange(raw, len(raw)) == want      # the numbers run on
    device.conv_lose = {device.conv_frames + 1}
    with pytest.raises(DeviceGone, match="reply frame was lost"):
        board.conv_exchange(raw, len(raw))


def test_the_longest_files_read_ahead_go_first_to_the_least_loaded_cores():
    """The host reads files ahead and sends the longest first (here: the largest, as these
    are not JPEG files), each to the core with the least work in flight, at most three
    files a core; results still come back in the caller's order."""
    device = FakeDevice(cores=2, input_fifo=1 << 20, max_payload=1 << 14)
    board = Board(device, timeout=2.0)
    sizes = [300, 100, 9000, 200, 5000, 4000, 50, 60]
    files = [bytes([n]) * size for n, size in enumerate(sizes)]
    arrivals = []                       # (file, core) as the device takes their frames
    original = device._jpeg

    def spy(f):
        arrivals.append((f.payload[0], f.status >> CORE_SHIFT))
        original(f)
    device._jpeg = spy
    _decode(board, files)
    sent = [sizes[n] for n in dict.fromkeys(n for n, _ in arrivals)]
    core = dict(arrivals)
    # the first window (three files a core) holds the six largest, 9000 and 5000 on the two
    # idle cores and 4000 on the one with less work (5000's); the two smallest come last,
    # the larger first
    assert sorted(sent[:6]) == [100, 200, 300, 4000, 5000, 9000] and sent[6:] == [60, 50]
    assert sent[:2] == [9000, 5000] and core[2] != core[4] and core[5] == core[4]
    assert device.violations == []
