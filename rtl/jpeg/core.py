"""One JPEG decoder core: a whole file in, a header, RGB pixels and a trailer out.

marker parser -> block decoder (entropy decoding, dequantisation, IDCT) -> raster stage
(line buffers, upsampling, colour).  The core takes one file at a time: the next file's bytes
are not read before the previous file's trailer has left, and between files the block decoder
and the raster stage are reset, so whatever a bad file left inside them cannot reach the next
one.  The parser finishes every packet itself (it reads up to ``last`` whatever happens), so a
file's trailer always follows its last byte: no hang, no merged files.

The cycle count in the trailer runs from the clock the file's first beat is seen to the clock
its trailer is offered.
"""

from amaranth import Module, Signal, ResetInserter
from amaranth.lib import wiring, stream
from amaranth.lib.wiring import In, Out

from ..stream_pipe import BytesOut
from .block_decoder import BlockDecoder
from .frame import FrameLayout
from .limits import DEFAULT_MAX_HEIGHT, DEFAULT_MAX_WIDTH
from .marker_parser import MarkerParser
from .packets import HeaderLayout, OutputKind, TrailerLayout, input_layout, output_layout
from .raster import Raster
from .status import JpegStatus

__all__ = ["JpegCore"]


class JpegCore(wiring.Component):
    def __init__(self, max_width=DEFAULT_MAX_WIDTH, max_height=DEFAULT_MAX_HEIGHT, input_bytes=1,
                 tag_bits=8):
        if input_bytes not in (1, 4):
            self._MustUse__silence = True
            raise ValueError(f"input_bytes must be 1 or 4, not {input_bytes}")
        self.max_width, self.max_height = max_width, max_height
        self.input_bytes, self.tag_bits = input_bytes, tag_bits
        super().__init__({
            "i": In(stream.Signature(input_layout(input_bytes, tag_bits))),
            "o": Out(stream.Signature(output_layout(tag_bits))),
            "busy": Out(1),
            "images": Out(32),        # files finished since reset
            "errors": Out(32),        # of which malformed or unsupported
        })

    def elaborate(self, platform):
        m = Module()
        flush = Signal()
        m.submodules.parser = parser = MarkerParser(self.max_width, self.max_height)
        blocks = BlockDecoder(8)
        raster = Raster(self.max_width)
        m.submodules.blocks = ResetInserter(flush)(blocks)
        m.submodules.raster = ResetInserter(flush)(raster)
        m.submodules.bytes = to_bytes = BytesOut(self.input_bytes)

        wiring.connect(m, parser.dqt, blocks.dqt)
        wiring.connect(m, parser.dht, blocks.dht)
        wiring.connect(m, parser.scan, blocks.scan)
        wiring.connect(m, parser.entropy, blocks.i)
        wiring.connect(m, blocks.done, parser.done)
        wiring.connect(m, blocks.o, raster.blocks)
        wiring.connect(m, to_bytes.o, parser.i)
        m.d.comb += blocks.quant_select.eq(parser.quant_select)

        tag = Signal(self.tag_bits)
        fast = Signal()
        frame = Signal(FrameLayout)
        status = Signal(8)
        cycles = Signal(32)
        open_ = Signal()                 # the file's bytes are still being read
        o = self.o.payload
        m.d.comb += [
            to_bytes.i.payload.data.eq(self.i.payload.data),
            to_bytes.i.payload.keep.eq(self.i.payload.keep if self.input_bytes > 1 else 1),
            to_bytes.i.payload.last.eq(self.i.payload.last),
            to_bytes.i.valid.eq(self.i.valid & open_),
            self.i.ready.eq(to_bytes.i.ready & open_),
            o.tag.eq(tag),
            raster.frame.payload.frame.eq(frame),
            raster.frame.payload.fast.eq(fast),
        ]
        with m.If(self.i.valid & self.i.ready & self.i.payload.last):
            m.d.sync += open_.eq(0)
        with m.If(self.busy):
            m.d.sync += cycles.eq(cycles + 1)

        header = HeaderLayout(o.data[:HeaderLayout.size])
        trailer = TrailerLayout(o.data[:TrailerLayout.size])
        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.i.valid):
                    m.d.sync += [tag.eq(self.i.payload.tag), fast.eq(self.i.payload.fast),
                                 open_.eq(1), cycles.eq(1), self.busy.eq(1), frame.eq(0)]
                    m.next = "PARSE"
            with m.State("PARSE"):
                m.d.comb += parser.frame.ready.eq(1)
                with m.If(parser.frame.valid):
                    m.d.sync += frame.eq(parser.frame.payload)
                    m.next = "HEADER"
                with m.Elif(parser.result.valid):
                    m.d.comb += parser.result.ready.eq(1)
                    m.d.sync += status.eq(parser.result.payload.status)
                    m.next = "HEADER_ONLY"
            for state, after in (("HEADER", "START"), ("HEADER_ONLY", "TRAILER")):
                with m.State(state):
                    m.d.comb += [self.o.valid.eq(1), o.kind.eq(OutputKind.HEADER),
                                 header.width.eq(frame.width), header.height.eq(frame.height),
                                 header.components.eq(frame.components), header.h.eq(frame.h),
                                 header.v.eq(frame.v), header.fast.eq(fast)]
                    with m.If(self.o.ready):
                        m.next = after
            with m.State("START"):
                m.d.comb += raster.frame.valid.eq(1)
                with m.If(raster.frame.ready):
                    m.next = "PIXELS"
            with m.State("PIXELS"):
                failed = parser.result.valid & (parser.result.payload.status != JpegStatus.OK)
                with m.If(failed):
                    # The scan failed: no more blocks will come; the pixels stop here.
                    m.d.comb += parser.result.ready.eq(1)
                    m.d.sync += status.eq(parser.result.payload.status)
                    m.next = "TRAILER"
                with m.Else():
                    m.d.comb += [self.o.valid.eq(raster.o.valid), raster.o.ready.eq(self.o.ready),
                                 o.kind.eq(OutputKind.PIXELS), o.data.eq(raster.o.payload.rgb),
                                 o.count.eq(raster.o.payload.count)]
                    with m.If(raster.o.valid & self.o.ready & raster.o.payload.last):
                        m.next = "RESULT"
            with m.State("RESULT"):
                m.d.comb += parser.result.ready.eq(1)
                with m.If(parser.result.valid):
                    m.d.sync += status.eq(parser.result.payload.status)
                    m.next = "TRAILER"
            with m.State("TRAILER"):
                m.d.comb += [self.o.valid.eq(1), o.kind.eq(OutputKind.TRAILER), o.last.eq(1),
                             trailer.status.eq(status), trailer.cycles.eq(cycles),
                             trailer.symbols.eq(blocks.symbols_decoded)]
                with m.If(self.o.ready):
                    m.d.comb += flush.eq(1)
                    m.d.sync += [self.busy.eq(0), self.images.eq(self.images + 1)]
                    with m.If(status != JpegStatus.OK):
                        m.d.sync += self.errors.eq(self.errors + 1)
                    m.next = "IDLE"
        return m
