"""One decoder core's results as reply frames: RGB bytes in ``JPEG_DATA`` frames, then one
``JPEG_END`` frame with the file's record.

Frames are ``link_bytes`` (W) bytes a beat: the pixel bytes are packed into W-byte words
as they come (a core beat of up to 12 bytes a clock at W >= 16, W bytes a clock below), so
one core's replier keeps pace with the core.

A frame leaves only when all its bytes are in one of this replier's two frame buffers (see
docs/protocol.md: holding the link for a core that still has to produce could deadlock); the
core fills one buffer while the other is sent, so the link never waits for a core that is
producing, and the core waits only when both buffers are full.  A file's frames are
numbered 0, 1, 2, ... (the header's ``seq``; the JPEG_END frame last), so that the host sees
a frame lost to a destroyed header.  Frames carry the
file's tag (the core runs with 16-bit tags, the frame tag itself).

``JPEG_END`` payload (``END_RECORD`` bytes, little-endian): status (1), 0 (1), width (2),
height (2), the core's cycles for the file (4), Huffman symbols (4).  A file that failed has
fewer (or no) pixel bytes; its status says why.
"""

import struct

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..jpeg.packets import HeaderLayout, OutputKind, TrailerLayout, output_layout
from .frame_rx import FrameHeader
from .protocol import MAX_PAYLOAD, TAG_BITS, Opcode, Status, payload_beats

__all__ = ["JpegReplier", "END_RECORD", "END_FORMAT", "parse_end"]

#: The JPEG_END record, for the host and the testbenches (the gateware packs the same fields
#: below): status, 0, width, height, the core's cycles, Huffman symbols.
END_FORMAT = struct.Struct("<BBHHII")
END_RECORD = END_FORMAT.size


def parse_end(payload):
    """(status, width, height, cycles, symbols) of a JPEG_END record."""
    status, _, width, height, cycles, symbols = END_FORMAT.unpack(payload)
    return status, width, height, cycles, symbols


class JpegReplier(wiring.Component):
    """Turns one core's output packet into reply frames, buffering whole frames so that the link
    the cores share never waits on a core that is still decoding."""

    def __init__(self, max_payload=MAX_PAYLOAD, link_bytes=1):
        if max_payload % link_bytes:
            self._MustUse__silence = True     # never elaborated: no unused-elaboratable warning
            raise ValueError("max_payload must be a multiple of link_bytes")
        self.max_payload, self.link_bytes = max_payload, link_bytes
        super().__init__({
            "i": In(stream.Signature(output_layout(TAG_BITS))),
            "header": Out(stream.Signature(FrameHeader)),
            "payload": Out(stream.Signature(8 * link_bytes)),
        })

    def elaborate(self, platform):
        m = Module()
        w = self.link_bytes
        shift = (w - 1).bit_length()
        words = self.max_payload // w             # W-byte words of one frame buffer
        # Two frame buffers: the core fills one while the other is sent, so one core's
        # pixels can keep the link busy (a single buffer is filled, then sent: half the rate).
        m.submodules.buffer = buffer = Memory(shape=8 * w, depth=2 * words, init=[])
        wp = buffer.write_port()
        rp = buffer.read_port()
        entry = data.StructLayout({"end": 1, "half": 1, "length": range(self.max_payload + 1),
                                   "tag": TAG_BITS, "seq": 8, "record": 8 * END_RECORD})
        number = Signal(8)                    # the file's next reply frame
        m.submodules.frames = frames = SyncFIFO(width=entry.size, depth=4)
        busy = Signal(2)                      # a half holds a frame not yet sent
        set_busy = Signal(2)
        clear_busy = Signal(2)
        m.d.sync += busy.eq((busy | set_busy) & ~clear_busy)

        # ---- Filling: pixel bytes packed into W-byte words of the free half ------------------
        chunk = min(12, w) if w >= 16 else w      # bytes taken a clock
        beat = Signal(output_layout(TAG_BITS))    # the core beat being taken apart (W < 16)
        rest = Signal(range(13))                  # its bytes still to take
        acc = Signal(8 * (w + chunk))             # bytes not yet written, first lowest
        used = Signal(range(max(w, 2)))           # ... how many (always less than a word)
        fill = Signal(range(words + 1))           # words written into the half
        half = Signal()
        tag = Signal(TAG_BITS)
        width = Signal(16)
        height = Signal(16)
        trailer = TrailerLayout(beat.data[:TrailerLayout.size])
        push = entry(Signal(entry.size))
        m.d.comb += frames.w_data.eq(push)
        room = ~busy.bit_select(half, 1) & frames.w_rdy

        def take_bytes(value, k):
            """Add ``k`` bytes of ``value`` (its lowest) to the accumulator; write a word when
            one is complete, and queue the half when it is full."""
            combined = Signal(8 * (w + chunk))
            total = Signal(range(w + chunk + 1))
            real = Signal(8 * chunk)            # (the lanes past a beat's pixels hold junk)
            m.d.comb += [real.eq(value[:8 * chunk]
                                 & ~(Const(-1, 8 * chunk) << (k << 3))[:8 * chunk]),
                         combined.eq(acc | (real << (used << 3))),
                         total.eq(used + k)]
            with m.If(total >= w):
                m.d.comb += [wp.addr.eq(Cat(fill[:max(words - 1, 1).bit_length()], half)
                                        if words > 1 else half),
                             wp.data.eq(combined[:8 * w]), wp.en.eq(1)]
                m.d.sync += [acc.eq(combined >> 8 * w), used.eq(total - w), fill.eq(fill + 1)]
                with m.If(fill + 1 == words):
                    m.d.comb += [push.end.eq(0), push.half.eq(half),
                                 push.length.eq(self.max_payload), push.tag.eq(tag),
                                 push.seq.eq(number),
                                 frames.w_en.eq(1), set_busy.bit_select(half, 1).eq(1)]
                    m.d.sync += [fill.eq(0), half.eq(~half), number.eq(number + 1)]
            with m.Else():
                m.d.sync += [acc.eq(combined), used.eq(total)]

        def start_trailer(p):
            m.d.sync += [beat.eq(p), tag.eq(p.tag)]
            m.next = "FLUSH"

        with m.FSM(name="fill"):
            with m.State("INPUT"):
                p = self.i.payload
                with m.If(p.kind == OutputKind.PIXELS):
                    if w >= 16:
                        m.d.comb += self.i.ready.eq(room)
                        with m.If(self.i.valid & room):
                            m.d.sync += tag.eq(p.tag)
                            take_bytes(p.data, p.count * 3)
                    else:
                        m.d.comb += self.i.ready.eq(1)
                        with m.If(self.i.valid):
                            m.d.sync += [beat.eq(p), tag.eq(p.tag), rest.eq(p.count * 3)]
                            m.next = "PIXELS"
                with m.Else():
                    m.d.comb += self.i.ready.eq(1)
                    with m.If(self.i.valid):
                        m.d.sync += [beat.eq(p), tag.eq(p.tag)]
                        with m.If(p.kind == OutputKind.HEADER):
                            h = HeaderLayout(p.data[:HeaderLayout.size])
                            m.d.sync += [width.eq(h.width), height.eq(h.height)]
                        with m.Else():
                            m.next = "FLUSH"
            if w < 16:
                with m.State("PIXELS"):
                    with m.If(room):
                        k = Mux(rest > w, w, rest)
                        take_bytes(beat.data, k)
                        m.d.sync += [beat.data.eq(beat.data >> 8 * w), rest.eq(rest - k)]
                        with m.If(rest <= w):
                            # the next pixel beat is taken with the last bytes of this one
                            nxt = self.i.payload
                            m.d.comb += self.i.ready.eq(nxt.kind == OutputKind.PIXELS)
                            with m.If(self.i.valid & (nxt.kind == OutputKind.PIXELS)):
                                m.d.sync += [beat.eq(nxt), tag.eq(nxt.tag),
                                             rest.eq(nxt.count * 3)]
                            with m.Else():
                                m.next = "INPUT"
            with m.State("FLUSH"):                # the partial word and the partial frame
                with m.If(room):
                    with m.If(used != 0):
                        m.d.comb += [wp.addr.eq(Cat(fill[:max(words - 1, 1).bit_length()], half)
                                                if words > 1 else half),
                                     wp.data.eq(acc[:8 * w]), wp.en.eq(1)]
                    with m.If((used != 0) | (fill != 0)):
                        m.d.comb += [push.end.eq(0), push.half.eq(half),
                                     push.length.eq((fill << shift) | used), push.tag.eq(tag),
                                     push.seq.eq(number),
                                     frames.w_en.eq(1), set_busy.bit_select(half, 1).eq(1)]
                        m.d.sync += [half.eq(~half), number.eq(number + 1)]
                    m.d.sync += [fill.eq(0), used.eq(0), acc.eq(0)]
                    m.next = "END"
            with m.State("END"):
                with m.If(frames.w_rdy):
                    m.d.sync += number.eq(0)
                    m.d.comb += [push.end.eq(1), push.tag.eq(tag), frames.w_en.eq(1),
                                 push.length.eq(END_RECORD), push.seq.eq(number),
                                 push.record.eq(Cat(trailer.status, Const(0, 8), width, height,
                                                    trailer.cycles, trailer.symbols))]
                    m.next = "INPUT"

        # ---- Sending: queued frames, oldest first ---------------------------------------------
        current = entry(Signal(entry.size))
        head = entry(frames.r_data)
        rd = Signal(range(words + 1))
        beats = Signal(range(words + 1))
        take = Signal()
        base = Signal(range(2 * words))
        m.d.comb += [take.eq(self.payload.valid & self.payload.ready),
                     base.eq(Mux(current.half, words, 0)), rp.addr.eq(base + rd + take)]
        with m.FSM(name="send"):
            with m.State("IDLE"):
                m.d.comb += [self.header.valid.eq(frames.r_rdy),
                             self.header.payload.opcode.eq(
                                 Mux(head.end, Opcode.JPEG_END, Opcode.JPEG_DATA)),
                             self.header.payload.status.eq(Status.OK),
                             self.header.payload.tag.eq(head.tag),
                             self.header.payload.length.eq(head.length),
                             self.header.payload.seq.eq(head.seq)]
                with m.If(frames.r_rdy & self.header.ready):
                    m.d.comb += [frames.r_en.eq(1), rp.addr.eq(Mux(head.half, words, 0))]
                    m.d.sync += [current.eq(head), rd.eq(0),
                                 beats.eq((head.length + w - 1) >> shift)]
                    m.next = "SEND"
            with m.State("SEND"):
                m.d.comb += self.payload.valid.eq(1)
                with m.If(current.end):
                    if payload_beats(END_RECORD, w) == 1:
                        m.d.comb += self.payload.payload.eq(current.record)
                    else:
                        m.d.comb += self.payload.payload.eq(
                            current.record.word_select(rd[:(payload_beats(END_RECORD, w) - 1)
                                                          .bit_length()], 8 * w))
                with m.Else():
                    m.d.comb += self.payload.payload.eq(rp.data)
                with m.If(take):
                    m.d.sync += rd.eq(rd + 1)
                    with m.If(rd + 1 == beats):
                        with m.If(~current.end):
                            m.d.comb += clear_busy.bit_select(current.half, 1).eq(1)
                        m.next = "IDLE"
        return m
