"""The frame sender: a header and its payload beats in, link beats (``link_bytes`` W bytes a
clock) out.

The header comes first (its ``length`` says how many payload bytes follow, in
``ceil(length / W)`` beats), so a frame goes out as it is produced: the header section (magic,
fields, their CRC-16, padding), the payload beats with their CRC-32 computed on the way (the
lanes past ``length`` in the last beat are sent as zeros), the CRC section.  No buffering;
the producer must deliver exactly that many payload beats (``last`` is not needed).  Layout:
:mod:`.protocol`.
"""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .crc import CRC16, CRC32, Crc, crc_of
from .frame_rx import FrameHeader
from .protocol import (FIELDS_BYTES, HCRC_AT, HEADER_BYTES, LINK_WIDTHS, MAGIC, TRAILER_BYTES,
                       header_beats, trailer_beats)

__all__ = ["FrameSender", "tail_mask"]


def tail_mask(m, length, link_bytes, name="tail_mask"):
    """A mask of the real bytes of a frame's last payload beat (all ones when the length is a
    multiple of W), from the frame's ``length``."""
    w = link_bytes
    mask = Signal(8 * w, name=name)
    if w == 1:
        m.d.comb += mask.eq(0xFF)
        return mask
    rest = length[:(w - 1).bit_length()]
    m.d.comb += mask.eq(Const(-1, 8 * w))
    for k in range(1, w):
        with m.If(rest == k):
            m.d.comb += mask.eq((1 << 8 * k) - 1)
    return mask


class FrameSender(wiring.Component):
    """Puts the device's replies in the link's frame format (header, CRCs, padding) as they are
    produced, so that sending a reply needs no buffer here."""

    def __init__(self, link_bytes=1):
        if link_bytes not in LINK_WIDTHS:
            self._MustUse__silence = True     # never elaborated: no unused-elaboratable warning
            raise ValueError(f"link_bytes must be one of {LINK_WIDTHS}, not {link_bytes}")
        self.link_bytes = link_bytes
        super().__init__({
            "header": In(stream.Signature(FrameHeader)),
            "payload": In(stream.Signature(8 * link_bytes)),
            "o": Out(stream.Signature(8 * link_bytes)),
            "frames": Out(32),
            "done": Out(1),         # a frame's last beat left this clock
        })

    def elaborate(self, platform):
        if self.link_bytes == 1:
            return self._elaborate_bytes()
        m = Module()
        w = self.link_bytes
        hb, tb = header_beats(w), trailer_beats(w)
        m.submodules.pcrc = pcrc = Crc(CRC32, w)
        fields = self.header.payload.as_value()
        # The header section, computed when the header is taken and sent a beat at a time;
        # the payload is a down-counter of beats compared with constants only (an adder into
        # a wide comparison limited the iCE40 build to 10 MHz).
        section = Signal(8 * w * hb)
        count = Signal(range(max(hb, tb) + 1))
        left = Signal(32)
        mask = Signal(8 * w)
        length = Signal(32)
        sent = self.o.valid & self.o.ready
        last_mask = tail_mask(m, length, w)
        m.d.comb += pcrc.data.eq(self.o.payload)

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.header.ready.eq(1)
                with m.If(self.header.valid):
                    n = self.header.payload.length
                    shift = (w - 1).bit_length()
                    magic = Const(int.from_bytes(MAGIC, "little"), 8 * len(MAGIC))
                    m.d.sync += [section.eq(Cat(magic, fields,
                                                crc_of(CRC16, fields, FIELDS_BYTES))),
                                 length.eq(n), left.eq((n + w - 1) >> shift), count.eq(0)]
                    m.d.comb += pcrc.clear.eq(1)
                    m.next = "HEADER"
            with m.State("HEADER"):
                m.d.comb += self.o.valid.eq(1)
                m.d.comb += self.o.payload.eq(section[:8 * w])
                with m.If(sent):
                    m.d.sync += [section.eq(section >> 8 * w), count.eq(count + 1)]
                    with m.If(count == hb - 1):
                        m.d.sync += count.eq(0)
                        with m.If(left == 0):
                            m.next = "CRC"
                        with m.Else():
                            m.next = "PAYLOAD"
            with m.State("PAYLOAD"):
                m.d.comb += [mask.eq(Mux(left == 1, last_mask, Const(-1, 8 * w))),
                             self.o.valid.eq(self.payload.valid),
                             self.o.payload.eq(self.payload.payload & mask),
                             self.payload.ready.eq(self.o.ready), pcrc.valid.eq(sent)]
                with m.If(sent):
                    m.d.sync += left.eq(left - 1)
                    with m.If(left == 1):
                        m.next = "CRC"
            with m.State("CRC"):
                m.d.comb += self.o.valid.eq(1)
                if tb == 1:
                    m.d.comb += self.o.payload.eq(pcrc.value)
                else:
                    m.d.comb += self.o.payload.eq(pcrc.value.word_select(count[:2], 8 * w))
                with m.If(sent):
                    m.d.sync += count.eq(count + 1)
                    with m.If(count == tb - 1):
                        m.d.comb += self.done.eq(1)
                        m.d.sync += [count.eq(0), self.frames.eq(self.frames + 1)]
                        m.next = "IDLE"
        return m

    def _elaborate_bytes(self):
        """W = 1: the header's CRC-16 computed byte by byte on the way (short paths for the
        UART boards' iCE40 clock)."""
        m = Module()
        m.submodules.hcrc = hcrc = Crc(CRC16)
        m.submodules.pcrc = pcrc = Crc(CRC32)
        fields = Signal(8 * FIELDS_BYTES)
        # A byte index inside the header and trailer, and a payload down-counter: compared
        # with constants only, so no adder feeds a wide comparison (that chain limited the
        # iCE40 build to 10 MHz).
        count = Signal(range(max(FIELDS_BYTES, TRAILER_BYTES)))
        left = Signal(32)
        sent = self.o.valid & self.o.ready
        m.d.comb += [hcrc.data.eq(self.o.payload), pcrc.data.eq(self.o.payload)]

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.header.ready.eq(1)
                with m.If(self.header.valid):
                    m.d.sync += [fields.eq(self.header.payload),
                                 left.eq(self.header.payload.length), count.eq(0)]
                    m.d.comb += hcrc.clear.eq(1)
                    m.next = "MAGIC0"
            with m.State("MAGIC0"):
                m.d.comb += [self.o.valid.eq(1), self.o.payload.eq(MAGIC[0])]
                with m.If(sent):
                    m.next = "MAGIC1"
            with m.State("MAGIC1"):
                m.d.comb += [self.o.valid.eq(1), self.o.payload.eq(MAGIC[1])]
                with m.If(sent):
                    m.next = "FIELDS"
            with m.State("FIELDS"):
                m.d.comb += [self.o.valid.eq(1), self.o.payload.eq(fields[:8]),
                             hcrc.valid.eq(sent)]
                with m.If(sent):
                    m.d.sync += [fields.eq(fields >> 8), count.eq(count + 1)]
                    with m.If(count == FIELDS_BYTES - 1):
                        m.d.sync += count.eq(0)
                        m.next = "HCRC"
            with m.State("HCRC"):
                m.d.comb += [self.o.valid.eq(1),
                             self.o.payload.eq(hcrc.value.word_select(count[0], 8))]
                with m.If(sent):
                    m.d.sync += count.eq(count + 1)
                    with m.If(count == HEADER_BYTES - HCRC_AT - 1):
                        m.d.sync += count.eq(0)
                        m.d.comb += pcrc.clear.eq(1)
                        with m.If(left == 0):
                            m.next = "CRC"
                        with m.Else():
                            m.next = "PAYLOAD"
            with m.State("PAYLOAD"):
                m.d.comb += [self.o.valid.eq(self.payload.valid),
                             self.o.payload.eq(self.payload.payload),
                             self.payload.ready.eq(self.o.ready), pcrc.valid.eq(sent)]
                with m.If(sent):
                    m.d.sync += left.eq(left - 1)
                    with m.If(left == 1):
                        m.next = "CRC"
            with m.State("CRC"):
                m.d.comb += [self.o.valid.eq(1), self.o.payload.eq(pcrc.value.word_select(
                    count[:2], 8))]
                with m.If(sent):
                    m.d.sync += count.eq(count + 1)
                    with m.If(count == TRAILER_BYTES - 1):
                        m.d.comb += self.done.eq(1)
                        m.d.sync += [count.eq(0), self.frames.eq(self.frames + 1)]
                        m.next = "IDLE"
        return m
