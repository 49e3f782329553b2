"""The convolution engine on the link: ``CONV_WORDS`` payload beats (``link_bytes`` W bytes)
regrouped into the engine's link words (``word_bytes``: whole beats, parts of a beat, or a
beat itself when the widths agree), and its result words sent back as ``CONV_WORDS`` reply
frames.

The host sends a layer's link words (rtl/conv/descriptor.py) as the payloads of
``CONV_WORDS`` frames, each a whole number of words.  Results leave from a one-frame buffer
(as the decoder replies do) in frames that never span two tiles: a frame ends at a tile's
last word or when the buffer is full.  Reply frames carry the tag of the latest
``CONV_WORDS`` request; the host matches results by order and count (it knows each tile's
result words).
"""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .frame_rx import FrameHeader
from .protocol import MAX_PAYLOAD, Opcode, Status

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
    """Engine result words (``data``, ``last``) in, reply frames of ``link_bytes`` beats out."""

    def __init__(self, word_bytes, max_payload=MAX_PAYLOAD, link_bytes=1):
        row = max(word_bytes, link_bytes)
        if max_payload % row:
            self._MustUse__silence = True     # never elaborated: no unused-elaboratable warning
            raise ValueError("max_payload must be a multiple of the link word and link width")
        self.word_bytes, self.max_payload, self.link_bytes = word_bytes, max_payload, link_bytes
        super().__init__({
            "i": In(stream.Signature(data.StructLayout({"data": 8 * word_bytes, "last": 1}))),
            "tag": In(16),
            "header": Out(stream.Signature(FrameHeader)),
            "payload": Out(stream.Signature(8 * link_bytes)),
        })

    def elaborate(self, platform):
        m = Module()
        lb, w = self.word_bytes, self.link_bytes
        row_bytes = max(lb, w)
        per_row = row_bytes // lb                 # words in a buffer row (W > word: several)
        sub = row_bytes // w                      # beats in a row (W < word: several)
        rows = self.max_payload // row_bytes
        m.submodules.buffer = buffer = Memory(shape=8 * row_bytes, depth=rows, init=[])
        wp = buffer.write_port()
        rp = buffer.read_port()
        words = Signal(range(self.max_payload // lb + 1))
        filled = Signal(range(rows + 1))          # rows written
        gather = Signal(8 * row_bytes)            # words of the row being filled
        slot = Signal(range(max(per_row, 2)))
        rd = Signal(range(rows + 1))
        part = Signal(range(max(sub, 2)))
        advance = Signal()                        # the last beat of a row was taken
        frame_tag = Signal(16)
        number = Signal(8)                        # frames sent, mod 256 (the header's seq)
        taken = self.payload.valid & self.payload.ready
        m.d.comb += [advance.eq(taken & (part == sub - 1)), rp.addr.eq(rd + advance)]

        with m.FSM():
            with m.State("FILL"):
                row = Signal(8 * row_bytes)
                m.d.comb += row.eq(gather)
                m.d.comb += row.word_select(slot, 8 * lb).eq(self.i.payload.data)
                m.d.comb += [self.i.ready.eq(1), wp.addr.eq(filled), wp.data.eq(row)]
                with m.If(self.i.valid):
                    end = self.i.payload.last | (words + 1 == self.max_payload // lb)
                    m.d.sync += [words.eq(words + 1), gather.eq(row), slot.eq(slot + 1)]
                    with m.If(end | (slot == per_row - 1)):
                        m.d.comb += wp.en.eq(1)
                        m.d.sync += [filled.eq(filled + 1), gather.eq(0), slot.eq(0)]
                    with m.If(end):
                        m.d.sync += frame_tag.eq(self.tag)      # held while the header waits
                        m.next = "HEADER"
            with m.State("HEADER"):
                m.d.comb += [self.header.valid.eq(1),
                             self.header.payload.opcode.eq(Opcode.CONV_WORDS),
                             self.header.payload.status.eq(Status.OK),
                             self.header.payload.tag.eq(frame_tag),
                             self.header.payload.length.eq(words * lb),
                             self.header.payload.seq.eq(number), rp.addr.eq(0)]
                with m.If(self.header.ready):
                    m.d.sync += [rd.eq(0), part.eq(0), number.eq(number + 1)]
                    m.next = "SEND"
            with m.State("SEND"):
                m.d.comb += self.payload.valid.eq(1)
                if sub == 1:
                    m.d.comb += self.payload.payload.eq(rp.data)
                else:
                    m.d.comb += self.payload.payload.eq(rp.data.word_select(part, 8 * w))
                with m.If(taken):
                    m.d.sync += part.eq(part + 1)
                    # a frame's last row may hold fewer words: its beats end with its bytes
                    last_beat = (rd + 1 == filled) & (
                        ((part + 1) * w >= (words * lb - rd * row_bytes)) if sub > 1 else 1)
                    with m.If(advance | last_beat):
                        m.d.sync += [part.eq(0), rd.eq(rd + 1)]
                        with m.If(rd + 1 == filled):
                            m.d.sync += [words.eq(0), filled.eq(0)]
                            m.next = "FILL"
        return m
