"""The frame sender: a header and its payload bytes in, link bytes out.

The header comes first (its ``length`` is the number of payload beats that follow), so a frame
goes out as it is produced: magic, the header fields with their CRC-16 computed on the way,
the payload with its CRC-32 computed on the way, the four CRC bytes.  No buffering; the
producer must deliver exactly ``length`` payload beats (``last`` on the final one is not
needed).  Layout: :mod:`.protocol`.
"""

from amaranth import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .crc import CRC16, CRC32, Crc
from .frame_rx import FrameHeader
from .protocol import MAGIC

__all__ = ["FrameSender"]


class FrameSender(wiring.Component):
    header: In(stream.Signature(FrameHeader))
    payload: In(stream.Signature(8))
    o: Out(stream.Signature(8))
    frames: Out(32)

    def elaborate(self, platform):
        m = Module()
        m.submodules.hcrc = hcrc = Crc(CRC16)
        m.submodules.pcrc = pcrc = Crc(CRC32)
        fields = Signal(64)
        # A byte index inside the header and trailer, and a payload down-counter: compared
        # with constants only, so no adder feeds a wide comparison (that chain limited the
        # iCE40 build to 10 MHz).
        count = Signal(3)
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
                    with m.If(count == 7):
                        m.d.sync += count.eq(0)
                        m.next = "HCRC"
            with m.State("HCRC"):
                m.d.comb += [self.o.valid.eq(1),
                             self.o.payload.eq(hcrc.value.word_select(count[0], 8))]
                with m.If(sent):
                    m.d.sync += count.eq(count + 1)
                    with m.If(count == 1):
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
                    with m.If(count == 3):
                        m.d.sync += [count.eq(0), self.frames.eq(self.frames + 1)]
                        m.next = "IDLE"
        return m
