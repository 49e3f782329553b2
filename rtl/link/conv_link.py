"""The convolution engine on the link: ``CONV_WORDS`` payload beats (``link_bytes`` W bytes)
regrouped into the engine's link words (``word_bytes``: whole beats, parts of a beat, or a
beat itself when the widths agree), and its result words sent back as ``CONV_WORDS`` reply
frames.

The host sends a layer's link words (rtl/conv/descriptor.py) as the payloads of
``CONV_WORDS`` frames, each a whole number of words.  Results leave from a ring of two
frames' room (as the decoder replies leave from two frame buffers) in frames that never span
two tiles: a frame ends at a tile's last word or at ``max_payload`` bytes.  Reply frames carry the tag of the latest
``CONV_WORDS`` request; the host matches results by order and count (it knows each tile's
result words).
"""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .frame_rx import FrameHeader
from .protocol import MAX_PAYLOAD, TAG_BITS, Opcode, Status

__all__ = ["WordRegroup", "ConvReplier"]


class WordRegroup(wiring.Component):
    """Link beats of ``link_bytes`` in, engine words of ``word_bytes`` out, lowest bytes first.

    W < word: W-byte beats packed into a word; W = word: passed on; W > word: a beat split
    into its words, ``words`` of them (1..W/word: a frame's last beat may hold fewer).  A
    continuous input gives a word a clock (the engine's rate) whatever the widths.
    """

    def __init__(self, link_bytes, word_bytes):
        self.link_bytes, self.word_bytes = link_bytes, word_bytes
        per = max(link_bytes // word_bytes, 1)
        super().__init__({"i": In(stream.Signature(8 * link_bytes)),
                          "words": In(range(per + 1)),
                          "o": Out(stream.Signature(8 * word_bytes))})

    def elaborate(self, platform):
        m = Module()
        w, lb = self.link_bytes, self.word_bytes
        if w == lb:
            wiring.connect(m, wiring.flipped(self.i), wiring.flipped(self.o))
        elif w < lb:
            n = lb // w
            word = Signal(8 * lb)
            count = Signal(range(n + 1))
            full = count == n
            m.d.comb += [self.o.valid.eq(full), self.o.payload.eq(word),
                         self.i.ready.eq(~full | self.o.ready)]
            with m.If(self.o.valid & self.o.ready):
                m.d.sync += count.eq(0)
            with m.If(self.i.valid & self.i.ready):
                position = Signal(range(n))
                m.d.comb += position.eq(Mux(full, 0, count))
                m.d.sync += [word.word_select(position, 8 * w).eq(self.i.payload),
                             count.eq(position + 1)]
        else:
            n = w // lb
            k = Signal(range(n))
            m.d.comb += [self.o.valid.eq(self.i.valid),
                         self.o.payload.eq(self.i.payload.word_select(k, 8 * lb))]
            with m.If(self.o.valid & self.o.ready):
                m.d.sync += k.eq(k + 1)
                with m.If(k + 1 >= self.words):
                    m.d.comb += self.i.ready.eq(1)
                    m.d.sync += k.eq(0)
        return m


class ConvReplier(wiring.Component):
    """Engine result words (``data``, ``last``) in, reply frames of ``link_bytes`` beats out.

    The words go into a ring of two frames' room (``2 * max_payload`` bytes): a frame is
    queued when its tile ends or it holds ``max_payload`` bytes, and is sent while the
    engine goes on filling the ring behind it, so the engine waits only when two frames'
    worth of results are still to leave (a one-frame buffer made it wait for every frame to
    be sent: 8-9 % of a 1x1 layer's time on the default board).
    """

    def __init__(self, word_bytes, max_payload=MAX_PAYLOAD, link_bytes=1):
        row = max(word_bytes, link_bytes)
        if max_payload % row:
            self._MustUse__silence = True     # never elaborated: no unused-elaboratable warning
            raise ValueError("max_payload must be a multiple of the link word and link width")
        self.word_bytes, self.max_payload, self.link_bytes = word_bytes, max_payload, link_bytes
        super().__init__({
            "i": In(stream.Signature(data.StructLayout({"data": 8 * word_bytes, "last": 1}))),
            "tag": In(TAG_BITS),
            "header": Out(stream.Signature(FrameHeader)),
            "payload": Out(stream.Signature(8 * link_bytes)),
        })

    def elaborate(self, platform):
        m = Module()
        lb, w = self.word_bytes, self.link_bytes
        row_bytes = max(lb, w)
        per_row = row_bytes // lb                 # words in a ring row (W > word: several)
        sub = row_bytes // w                      # beats in a row (W < word: several)
        frame_rows = self.max_payload // row_bytes
        frame_words = self.max_payload // lb
        rows = 2 * frame_rows
        m.submodules.ring = ring = Memory(shape=8 * row_bytes, depth=rows, init=[])
        wp = ring.write_port()
        rp = ring.read_port()
        entry = data.StructLayout({"words": range(frame_words + 1),
                                   "rows": range(frame_rows + 1), "tag": TAG_BITS})
        m.submodules.frames = frames = SyncFIFOBuffered(width=entry.size, depth=4)

        def advance(pointer):
            return Mux(pointer == rows - 1, 0, pointer + 1)

        used = Signal(range(rows + 1))            # rows written and not yet sent
        wrote = Signal()
        freed = Signal()
        m.d.sync += used.eq(used + wrote - freed)

        # ---- Filling: words gathered into rows, a row written when full or at a frame's end
        wr = Signal(range(rows))
        words = Signal(range(frame_words + 1))    # words of the frame being filled
        written = Signal(range(frame_rows + 1))   # ... and its rows in the ring
        gather = Signal(8 * row_bytes)
        slot = Signal(range(max(per_row, 2)))
        row = Signal(8 * row_bytes)
        m.d.comb += [row.eq(gather), row.word_select(slot, 8 * lb).eq(self.i.payload.data)]
        end = self.i.payload.last | (words + 1 == frame_words)
        push = entry(frames.w_data)
        m.d.comb += [self.i.ready.eq((used != rows) & frames.w_rdy),
                     wp.addr.eq(wr), wp.data.eq(row),
                     push.words.eq(words + 1), push.rows.eq(written + 1), push.tag.eq(self.tag)]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [words.eq(words + 1), gather.eq(row), slot.eq(slot + 1)]
            with m.If(end | (slot == per_row - 1)):
                m.d.comb += [wp.en.eq(1), wrote.eq(1)]
                m.d.sync += [wr.eq(advance(wr)), written.eq(written + 1), gather.eq(0),
                             slot.eq(0)]
            with m.If(end):
                m.d.comb += frames.w_en.eq(1)
                m.d.sync += [words.eq(0), written.eq(0)]

        # ---- Sending: the oldest queued frame, a row (``sub`` beats) at a time -------------
        rd = Signal(range(rows))
        left = Signal(range(frame_rows + 1))      # rows of the frame still to send
        part = Signal(range(max(sub, 2)))
        number = Signal(8)                        # frames sent, mod 256 (the header's seq)
        head = entry(frames.r_data)
        taken = self.payload.valid & self.payload.ready
        row_done = taken & (part == sub - 1)
        m.d.comb += [rp.addr.eq(Mux(row_done, advance(rd), rd)), freed.eq(row_done)]
        with m.FSM():
            with m.State("HEADER"):
                m.d.comb += [self.header.valid.eq(frames.r_rdy),
                             self.header.payload.opcode.eq(Opcode.CONV_WORDS),
                             self.header.payload.status.eq(Status.OK),
                             self.header.payload.tag.eq(head.tag),
                             self.header.payload.length.eq(head.words * lb),
                             self.header.payload.seq.eq(number)]
                with m.If(self.header.valid & self.header.ready):
                    m.d.comb += frames.r_en.eq(1)
                    m.d.sync += [left.eq(head.rows), part.eq(0), number.eq(number + 1)]
                    m.next = "SEND"
            with m.State("SEND"):
                m.d.comb += self.payload.valid.eq(1)
                if sub == 1:
                    m.d.comb += self.payload.payload.eq(rp.data)
                else:
                    m.d.comb += self.payload.payload.eq(rp.data.word_select(part, 8 * w))
                with m.If(taken):
                    m.d.sync += part.eq(part + 1)
                    with m.If(row_done):
                        m.d.sync += [part.eq(0), rd.eq(advance(rd)), left.eq(left - 1)]
                        with m.If(left == 1):
                            m.next = "HEADER"
        return m
