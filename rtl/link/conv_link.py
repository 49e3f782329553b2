"""The convolution engine on the link: ``CONV_WORDS`` payload bytes packed into the engine's
link words, and its result words sent back as ``CONV_WORDS`` reply frames.

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

__all__ = ["WordPacker", "ConvReplier"]


class WordPacker(wiring.Component):
    """Bytes in, ``link_bytes``-byte little-endian words out."""

    def __init__(self, link_bytes):
        self.link_bytes = link_bytes
        super().__init__({"i": In(stream.Signature(8)),
                          "o": Out(stream.Signature(8 * link_bytes))})

    def elaborate(self, platform):
        m = Module()
        n = self.link_bytes
        word = Signal(8 * n)
        count = Signal(range(n + 1))
        full = count == n
        m.d.comb += [self.o.valid.eq(full), self.o.payload.eq(word),
                     self.i.ready.eq(~full | self.o.ready)]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += count.eq(0)
        with m.If(self.i.valid & self.i.ready):
            position = Signal(range(n))
            m.d.comb += position.eq(Mux(full, 0, count))
            m.d.sync += [word.word_select(position, 8).eq(self.i.payload),
                         count.eq(position + 1)]
        return m


class ConvReplier(wiring.Component):
    """Engine result words (``data``, ``last``) in, reply frames out."""

    def __init__(self, link_bytes, max_payload=MAX_PAYLOAD):
        if max_payload % link_bytes:
            self._MustUse__silence = True     # never elaborated: no unused-elaboratable warning
            raise ValueError("max_payload must be a multiple of link_bytes")
        self.link_bytes, self.max_payload = link_bytes, max_payload
        super().__init__({
            "i": In(stream.Signature(data.StructLayout({"data": 8 * link_bytes, "last": 1}))),
            "tag": In(16),
            "header": Out(stream.Signature(FrameHeader)),
            "payload": Out(stream.Signature(8)),
        })

    def elaborate(self, platform):
        m = Module()
        lb = self.link_bytes
        depth = self.max_payload // lb
        m.submodules.buffer = buffer = Memory(shape=8 * lb, depth=depth, init=[])
        wp = buffer.write_port()
        rp = buffer.read_port()
        words = Signal(range(depth + 1))
        rd = Signal(range(depth + 1))
        byte = Signal(range(lb))
        advance = Signal()                     # the last byte of a word was taken
        frame_tag = Signal(16)
        taken = self.payload.valid & self.payload.ready
        m.d.comb += [advance.eq(taken & (byte == lb - 1)), rp.addr.eq(rd + advance)]

        with m.FSM():
            with m.State("FILL"):
                m.d.comb += [self.i.ready.eq(1), wp.addr.eq(words), wp.data.eq(self.i.payload.data),
                             wp.en.eq(self.i.valid)]
                with m.If(self.i.valid):
                    m.d.sync += words.eq(words + 1)
                    with m.If(self.i.payload.last | (words + 1 == depth)):
                        m.d.sync += frame_tag.eq(self.tag)      # held while the header waits
                        m.next = "HEADER"
            with m.State("HEADER"):
                m.d.comb += [self.header.valid.eq(1),
                             self.header.payload.opcode.eq(Opcode.CONV_WORDS),
                             self.header.payload.status.eq(Status.OK),
                             self.header.payload.tag.eq(frame_tag),
                             self.header.payload.length.eq(words * lb), rp.addr.eq(0)]
                with m.If(self.header.ready):
                    m.d.sync += [rd.eq(0), byte.eq(0)]
                    m.next = "SEND"
            with m.State("SEND"):
                m.d.comb += [self.payload.valid.eq(1),
                             self.payload.payload.eq(rp.data.word_select(byte, 8))]
                with m.If(taken):
                    m.d.sync += byte.eq(byte + 1)
                    with m.If(advance):
                        m.d.sync += [byte.eq(0), rd.eq(rd + 1)]
                        with m.If(rd + 1 == words):
                            m.d.sync += words.eq(0)
                            m.next = "FILL"
        return m
