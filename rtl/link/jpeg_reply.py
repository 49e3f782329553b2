"""One decoder core's results as reply frames: RGB bytes in ``JPEG_DATA`` frames, then one
``JPEG_END`` frame with the file's record.

A frame leaves only when all its bytes are in one of this replier's two frame buffers (see
docs/protocol.md: holding the link for a core that still has to produce could deadlock); the
core fills one buffer while the other is sent, so the link never waits for a core that is
producing, and the core waits only when both buffers are full.  Frames carry the
file's tag (the core runs with 16-bit tags, the frame tag itself).

``JPEG_END`` payload (``END_RECORD`` bytes, little-endian): status (1), 0 (1), width (2),
height (2), the core's cycles for the file (4), Huffman symbols (4).  A file that failed has
fewer (or no) pixel bytes; its status says why.
"""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
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
        # Two frame buffers: the core fills one while the other is sent, so one core's
        # pixels can keep the link busy (a single buffer is filled, then sent: half the rate).
        m.submodules.buffer = buffer = Memory(shape=8, depth=2 * depth, init=[])
        wp = buffer.write_port()
        rp = buffer.read_port()
        entry = data.StructLayout({"end": 1, "half": 1, "length": range(depth + 1),
                                   "tag": TAG_BITS, "record": 8 * END_RECORD})
        m.submodules.frames = frames = SyncFIFO(width=entry.size, depth=2)
        busy = Signal(2)                      # a half holds a frame not yet sent
        set_busy = Signal(2)
        clear_busy = Signal(2)
        m.d.sync += busy.eq((busy | set_busy) & ~clear_busy)

        # ---- Filling: the core's beats into the free half -------------------------------------
        beat = Signal(output_layout(TAG_BITS))
        fill = Signal(range(depth + 1))
        half = Signal()
        k = Signal(4)                         # byte of the saved pixel beat (0..11)
        width = Signal(16)
        height = Signal(16)
        trailer = TrailerLayout(beat.data[:TrailerLayout.size])
        pixel_bytes = beat.count * 3
        push = entry(Signal(entry.size))
        m.d.comb += frames.w_data.eq(push)

        def push_data():
            m.d.comb += [push.end.eq(0), push.half.eq(half), push.length.eq(fill),
                         push.tag.eq(beat.tag), frames.w_en.eq(1)]

        with m.FSM(name="fill"):
            with m.State("INPUT"):
                m.d.comb += self.i.ready.eq(1)
                with m.If(self.i.valid):
                    p = self.i.payload
                    m.d.sync += [beat.eq(p), k.eq(0)]
                    with m.Switch(p.kind):
                        with m.Case(OutputKind.HEADER):
                            h = HeaderLayout(p.data[:HeaderLayout.size])
                            m.d.sync += [width.eq(h.width), height.eq(h.height)]
                        with m.Case(OutputKind.PIXELS):
                            m.next = "PIXELS"
                        with m.Case(OutputKind.TRAILER):
                            m.next = "TRAILER"
            with m.State("PIXELS"):
                with m.If(~busy.bit_select(half, 1)):
                    m.d.comb += [wp.addr.eq(Mux(half, depth, 0) + fill),
                                 wp.data.eq(beat.data.word_select(k, 8)), wp.en.eq(1)]
                    m.d.sync += [fill.eq(fill + 1), k.eq(k + 1)]
                    with m.If(fill + 1 == depth):
                        m.next = "FULL"
                    with m.Elif(k + 1 == pixel_bytes):
                        m.next = "INPUT"
            with m.State("FULL"):                 # a whole frame: queue it, take the other half
                with m.If(frames.w_rdy):
                    push_data()
                    m.d.comb += set_busy.bit_select(half, 1).eq(1)
                    m.d.sync += [fill.eq(0), half.eq(~half)]
                    with m.If(k == pixel_bytes):
                        m.next = "INPUT"
                    with m.Else():
                        m.next = "PIXELS"
            with m.State("TRAILER"):
                with m.If(fill != 0):
                    with m.If(frames.w_rdy):
                        push_data()
                        m.d.comb += set_busy.bit_select(half, 1).eq(1)
                        m.d.sync += [fill.eq(0), half.eq(~half)]
                        m.next = "END"
                with m.Else():
                    m.next = "END"
            with m.State("END"):
                with m.If(frames.w_rdy):
                    m.d.comb += [push.end.eq(1), push.tag.eq(beat.tag), frames.w_en.eq(1),
                                 push.length.eq(END_RECORD),
                                 push.record.eq(Cat(trailer.status, Const(0, 8), width, height,
                                                    trailer.cycles, trailer.symbols))]
                    m.next = "INPUT"

        # ---- Sending: queued frames, oldest first ---------------------------------------------
        current = entry(Signal(entry.size))
        head = entry(frames.r_data)
        rd = Signal(range(depth + 1))
        take_byte = Signal()
        m.d.comb += [take_byte.eq(self.payload.valid & self.payload.ready),
                     rp.addr.eq(Mux(current.half, depth, 0) + rd + take_byte)]
        with m.FSM(name="send"):
            with m.State("IDLE"):
                m.d.comb += [self.header.valid.eq(frames.r_rdy),
                             self.header.payload.opcode.eq(
                                 Mux(head.end, Opcode.JPEG_END, Opcode.JPEG_DATA)),
                             self.header.payload.status.eq(Status.OK),
                             self.header.payload.tag.eq(head.tag),
                             self.header.payload.length.eq(head.length)]
                with m.If(frames.r_rdy & self.header.ready):
                    m.d.comb += [frames.r_en.eq(1), rp.addr.eq(Mux(head.half, depth, 0))]
                    m.d.sync += [current.eq(head), rd.eq(0)]
                    m.next = "SEND"
            with m.State("SEND"):
                with m.If(current.end):
                    m.d.comb += [self.payload.valid.eq(1),
                                 self.payload.payload.eq(current.record.word_select(rd[:4], 8))]
                with m.Else():
                    m.d.comb += [self.payload.valid.eq(1), self.payload.payload.eq(rp.data)]
                with m.If(take_byte):
                    m.d.sync += rd.eq(rd + 1)
                    with m.If(rd + 1 == current.length):
                        with m.If(~current.end):
                            m.d.comb += clear_busy.bit_select(current.half, 1).eq(1)
                        m.next = "IDLE"
        return m
