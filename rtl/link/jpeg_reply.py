"""One decoder core's results as reply frames: RGB bytes in ``JPEG_DATA`` frames, then one
``JPEG_END`` frame with the file's record.

A frame leaves only when all its bytes are in this replier's one-frame buffer (see
docs/protocol.md: holding the link for a core that still has to produce could deadlock), so
the core's output waits while a frame is sent, never the other way round.  Frames carry the
file's tag (the core runs with 16-bit tags, the frame tag itself).

``JPEG_END`` payload (``END_RECORD`` bytes, little-endian): status (1), 0 (1), width (2),
height (2), the core's cycles for the file (4), Huffman symbols (4).  A file that failed has
fewer (or no) pixel bytes; its status says why.
"""

from amaranth import Cat, Const, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..jpeg.packets import HeaderLayout, OutputKind, TrailerLayout, output_layout
from .frame_rx import FrameHeader
from .protocol import MAX_PAYLOAD, Opcode, Status

__all__ = ["JpegReplier", "END_RECORD"]

END_RECORD = 14
TAG_BITS = 16


class JpegReplier(wiring.Component):
    def __init__(self, max_payload=MAX_PAYLOAD):
        self.max_payload = max_payload
        super().__init__({
            "i": In(stream.Signature(output_layout(TAG_BITS))),
            "header": Out(stream.Signature(FrameHeader)),
            "payload": Out(stream.Signature(8)),
        })

    def elaborate(self, platform):
        m = Module()
        depth = self.max_payload
        m.submodules.buffer = buffer = Memory(shape=8, depth=depth, init=[])
        wp = buffer.write_port()
        rp = buffer.read_port()

        beat = Signal(output_layout(TAG_BITS))
        fill = Signal(range(depth + 1))
        k = Signal(4)                         # byte of the saved pixel beat (0..11)
        rd = Signal(range(depth + 1))
        tag = Signal(TAG_BITS)
        width = Signal(16)
        height = Signal(16)
        record = Signal(8 * END_RECORD)
        after_send = Signal()                 # 0: back to the pixel beat, 1: then the record
        trailer = TrailerLayout(beat.data[:TrailerLayout.size])
        pixel_bytes = beat.count * 3
        take_byte = Signal()
        m.d.comb += [take_byte.eq(self.payload.valid & self.payload.ready),
                     rp.addr.eq(rd + take_byte)]

        def send_header(opcode, length):
            m.d.comb += [self.header.valid.eq(1), self.header.payload.opcode.eq(opcode),
                         self.header.payload.status.eq(Status.OK),
                         self.header.payload.tag.eq(tag), self.header.payload.length.eq(length)]

        with m.FSM():
            with m.State("INPUT"):
                m.d.comb += self.i.ready.eq(1)
                with m.If(self.i.valid):
                    p = self.i.payload
                    m.d.sync += [beat.eq(p), tag.eq(p.tag), k.eq(0)]
                    with m.Switch(p.kind):
                        with m.Case(OutputKind.HEADER):
                            h = HeaderLayout(p.data[:HeaderLayout.size])
                            m.d.sync += [width.eq(h.width), height.eq(h.height)]
                        with m.Case(OutputKind.PIXELS):
                            m.next = "PIXELS"
                        with m.Case(OutputKind.TRAILER):
                            m.next = "TRAILER"
            with m.State("PIXELS"):
                m.d.comb += [wp.addr.eq(fill), wp.data.eq(beat.data.word_select(k, 8)),
                             wp.en.eq(1)]
                m.d.sync += [fill.eq(fill + 1), k.eq(k + 1)]
                with m.If(fill + 1 == depth):
                    m.d.sync += after_send.eq(0)
                    m.next = "DATA_HEADER"
                    with m.If(k + 1 == pixel_bytes):
                        m.d.sync += k.eq(0)
                        m.d.sync += after_send.eq(1)     # the beat is done: next beat after
                with m.Elif(k + 1 == pixel_bytes):
                    m.next = "INPUT"
            with m.State("TRAILER"):
                m.d.sync += record.eq(Cat(trailer.status, Const(0, 8), width, height,
                                          trailer.cycles, trailer.symbols))
                with m.If(fill != 0):
                    m.d.sync += after_send.eq(1)
                    m.next = "DATA_HEADER"
                with m.Else():
                    m.next = "END_HEADER"
            with m.State("DATA_HEADER"):
                send_header(Opcode.JPEG_DATA, fill)
                with m.If(self.header.ready):
                    m.d.sync += rd.eq(0)
                    m.d.comb += rp.addr.eq(0)
                    m.next = "DATA"
            with m.State("DATA"):
                m.d.comb += [self.payload.valid.eq(1), self.payload.payload.eq(rp.data)]
                with m.If(take_byte):
                    m.d.sync += rd.eq(rd + 1)
                    with m.If(rd + 1 == fill):
                        m.d.sync += fill.eq(0)
                        with m.If(after_send & (beat.kind == OutputKind.TRAILER)):
                            m.next = "END_HEADER"
                        with m.Elif(after_send):
                            m.next = "INPUT"
                        with m.Else():
                            m.next = "PIXELS"
            with m.State("END_HEADER"):
                send_header(Opcode.JPEG_END, END_RECORD)
                with m.If(self.header.ready):
                    m.d.sync += rd.eq(0)
                    m.next = "END"
            with m.State("END"):
                m.d.comb += [self.payload.valid.eq(1),
                             self.payload.payload.eq(record.word_select(rd[:4], 8))]
                with m.If(take_byte):
                    m.d.sync += rd.eq(rd + 1)
                    with m.If(rd + 1 == END_RECORD):
                        m.d.sync += rd.eq(0)
                        m.next = "INPUT"
        return m
