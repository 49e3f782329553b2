"""The DMA link's record ring parsed on the host alone: DmaLink hands on what
frame_parser.FrameDecoder finds in the same reply stream, frame for frame, however the engine cut
it into records (whole frames parsed where they lie in the ring, frames cut across records
through the buffer), damage included; payloads of whole frames are views of the ring."""

import ctypes
import mmap
import random

import pytest

from dlforge.host.link.dma import DmaLink
from dlforge.rtl.link import dma_layout as layout
from dlforge.rtl.link.protocol import BARRIER_TAG, LINK_WIDTHS, Opcode, Status, encode_frame
from dlforge.host.link.frame_parser import FrameDecoder

from test_frame_link import _damaged_stream


class RecordRing:
    """A DmaTransport's shape over anonymous memory: the record ring written here as the
    board's engine writes it, for a DmaLink to read."""
    reliable = flow_control = True
    name = "dma:memory"
    board_pid = 0

    def __init__(self, rec_size=1 << 22):
        sizes = dict(layout.DEFAULT_SIZES, rec_size=rec_size, arena_size=1 << 16)
        self.desc_off, self.src_off, self.rec_off, self.arena_off, _ = \
            layout.region_offsets(**sizes)
        self.desc_count, self.src_size = sizes["desc_count"], sizes["src_size"]
        self.rec_size, self.arena_size = rec_size, sizes["arena_size"]
        self.mm = mmap.mmap(-1, self.arena_off)
        self.arena_mm = mmap.mmap(-1, self.arena_size)
        self.index = {f: ctypes.c_uint64(0) for f in vars(layout.Field).values()
                      if isinstance(f, int)}
        self.index[layout.Field.BY_ADDRESS].value = 2       # the probe: answered at once

    def ring(self):
        pass

    def write(self, bodies):
        """BYTES records of ``bodies`` after the ones written before (no wrap)."""
        head = self.index[layout.Field.REC_HEAD].value
        for body in bodies:
            at = self.rec_off + head
            layout.RECORD_HEADER.pack_into(self.mm, at, layout.Rec.BYTES, len(body))
            self.mm[at + layout.RECORD_HEADER.size:at + layout.RECORD_HEADER.size + len(body)] \
                = body
            head += (layout.RECORD_HEADER.size + len(body) + 7) & ~7
        assert head <= self.rec_size
        self.index[layout.Field.REC_HEAD].value = head


def _link(w):
    frames = []
    ring = RecordRing()
    link = DmaLink(ring, lambda *f: frames.append((f[0], f[1], f[2], bytes(f[3]))),
                   lambda *placed: None, max_reply=1 << 14)
    link.link_bytes = w
    return ring, link, frames


def _records(wire, sizes):
    out, at = [], 0
    for n in sizes:
        if at >= len(wire):
            break
        out.append(wire[at:at + n])
        at += n
    return out + ([wire[at:]] if at < len(wire) else [])


@pytest.mark.parametrize("w", [1, 4, 32, 64])
@pytest.mark.parametrize("seed", [1, 2])
def test_records_parse_as_the_decoder_parses(w, seed):
    rng = random.Random(seed * 10 + w)
    wire, _ = _damaged_stream(rng, w)
    decoder = FrameDecoder(max_length=1 << 14, link_bytes=w)
    want = [(f.opcode, f.status, f.tag, f.payload) for f in decoder.feed(wire)]
    for sizes in ([len(wire)], [rng.randrange(1, 3 * w + 40) for _ in range(3000)],
                  [rng.randrange(1, 9000) for _ in range(100)]):
        ring, link, frames = _link(w)
        link.verify = True              # (the engine checks the CRCs; here the host does too)
        ring.write(_records(wire, sizes))
        link._records()
        assert frames == want
        assert (link.bad_headers, link.bad_payloads) == (decoder.bad_headers,
                                                         decoder.bad_payloads)
        assert link.bytes_in == len(wire)
        # what is left unparsed at the end of the stream (a partial beat, a last magic byte)
        assert link.dropped_bytes + (link.end - link.start) == decoder.dropped_bytes + \
            len(decoder.buffer)


@pytest.mark.parametrize("w", [1, 32])
def test_whole_frames_are_views_of_the_ring(w):
    ring, link, _ = _link(w)
    seen = []
    link.on_frame = lambda *f: seen.append(f[3])
    frames = [encode_frame(Opcode.READ_REGS, 5, bytes(range(8)), link_bytes=w),
              encode_frame(Opcode.JPEG_END, 300, bytes(14), link_bytes=w)]
    ring.write([frames[0] + frames[1]])
    link._records()
    assert [bytes(p) for p in seen] == [bytes(range(8)), bytes(14)]
    assert all(p.obj is ring.mm for p in seen)              # not copied out of the ring
    assert link.start == link.end == 0


def test_barrier_answers_go_to_the_pacing_not_on_frame():
    ring, link, frames = _link(32)
    answered = []
    link._on_barrier = lambda *f: answered.append(f)
    ring.write([encode_frame(Opcode.PING, BARRIER_TAG, b"\1\0\0\0", link_bytes=32),
                encode_frame(Opcode.PING, 7, b"x", link_bytes=32)])
    link._records()
    assert [f[2] for f in frames] == [7]
    assert [(f[0], f[1], bytes(f[2])) for f in answered] == [(Opcode.PING, Status.OK,
                                                              b"\1\0\0\0")]


@pytest.mark.parametrize("w", LINK_WIDTHS)
def test_a_frame_cut_across_records_is_whole_after_the_next(w):
    ring, link, frames = _link(w)
    frame = encode_frame(Opcode.JPEG_DATA, 300, bytes(range(200)), link_bytes=w)
    ring.write([frame[:17], frame[17:] + frame])
    link._records()
    assert [f[3] for f in frames] == [bytes(range(200))] * 2
    assert link.dropped_bytes == link.bad_headers == 0 and link.start == link.end == 0
