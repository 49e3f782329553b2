"""One JPEG decoder core: a whole file in, a header, RGB pixels and a trailer out.

marker parser -> block decoder (entropy decoding, dequantisation, IDCT) -> raster stage
(line buffers, upsampling, colour).  The core takes one file at a time: the next file's bytes
are not read before the previous file's trailer has left, and between files the block decoder
and the raster stage are reset, so whatever a bad file left inside them cannot reach the next
one.  The parser finishes every packet itself (it reads up to ``last`` whatever happens), so a
file's trailer always follows its last byte: no hang, no merged files.

The cycle count in the trailer runs from the clock the file's first beat is seen to the clock
its trailer is offered.

With ``resample_taps`` the core has a resampler after the colour stage
(:class:`~dlforge.rtl.resample.resampler.Resampler`): a file whose first beat has ``resize``
set begins with a resize request (:mod:`dlforge.rtl.resample.request`), read a word a clock
into the resampler's tables, and the core sends the cropped and resized image (beats of up
to ``resample_lanes`` pixels: 4 keeps the raster's rate) instead of the decoded one; the
header gives the output size.  A request the core
cannot follow (malformed, sizes out of its limits, a table that would never finish, a box
outside the image) ends the file with ``BAD_RESIZE`` and no pixels; the rest of the file is
read and dropped, so the next file starts clean.

With ``scaling`` the core decodes at 1/2, 1/4 or 1/8 in the DCT domain, as libjpeg-turbo's
scaled decode does (:mod:`.scaling`): a file whose first beat has ``scale`` set begins with a
scale word (before any resize request); its blocks go through the reduced IDCTs, the raster
stage puts their smaller rows together, and the header gives the scaled size (a resize
request is computed on it).  A malformed scale word ends the file with ``BAD_SCALE``.
"""

from types import SimpleNamespace

from amaranth import Module, Mux, Signal, ResetInserter
from amaranth.lib import wiring, stream
from amaranth.lib.wiring import In, Out

from ..resample.beats import LANE_CHOICES, LANES
from ..resample.request_reader import RequestReader
from ..resample.resampler import Resampler
from ..small_ram import check_small_ram
from ..stream_pipe import BytesOut, SkidBuffer
from .block_decoder import BlockDecoder
from .frame import FrameLayout
from .limits import DEFAULT_MAX_HEIGHT, DEFAULT_MAX_WIDTH
from .marker_parser import MarkerParser
from .packets import HeaderLayout, OutputKind, TrailerLayout, input_layout, output_layout
from .raster import PIXELS_PER_BEAT, Raster
from .scaling import SCALE_MAGIC, mcu_sizes, scaled_extent
from .status import JpegStatus

__all__ = ["JpegCore"]

assert PIXELS_PER_BEAT == LANES, "the resampler takes the raster's beats as they are"


class JpegCore(wiring.Component):
    """The unit of JPEG decoding that a device replicates: one file at a time from its bytes to
    a header, RGB pixels and a trailer, kept apart from the files before and after it so that a
    bad file can neither hang the core nor reach the next one."""

    def __init__(self, max_width=DEFAULT_MAX_WIDTH, max_height=DEFAULT_MAX_HEIGHT, input_bytes=1,
                 tag_bits=8, resample_taps=0, resample_max=(1024, 1024), resample_lanes=LANES,
                 scaling=False, small_ram="block", contexts=1):
        # resample_taps: 0 for no resampler; resample_max: the largest crop and output
        # (width, height) it takes (its line buffers and tables); resample_lanes: its
        # pixels a clock (4, the raster's beat; 1 or 2 for a board with few multipliers);
        # scaling: the reduced IDCTs (scaled decodes at 1/2, 1/4, 1/8); small_ram: the FIFOs,
        # small tables and the IDCT's corner turns in "block" RAM (some 1.3k LUT4 fewer on the
        # ECP5 for 26 block RAMs) or "lut" RAM, for a board short of block RAM; contexts: 2
        # inside a C-slowed core pair (JpegCorePair), which retimes the Huffman loop
        problem = None
        if input_bytes not in (1, 4):
            problem = f"input_bytes must be 1 or 4, not {input_bytes}"
        elif scaling and input_bytes != 4:
            problem = "a core reads its scale word a word a clock: scaling needs input_bytes=4"
        elif resample_taps and input_bytes != 4:
            problem = "a resampler reads its request a word a clock: it needs input_bytes=4"
        elif resample_taps and not 2 <= resample_taps <= 255:
            problem = f"resample_taps must be 2 to 255, not {resample_taps}"
        elif resample_lanes not in LANE_CHOICES:
            problem = f"resample_lanes must be one of {LANE_CHOICES}, not {resample_lanes!r}"
        elif check_small_ram(small_ram):
            problem = check_small_ram(small_ram)
        if problem:
            self._MustUse__silence = True
            raise ValueError(problem)
        self.max_width, self.max_height = max_width, max_height
        self.input_bytes, self.tag_bits = input_bytes, tag_bits
        self.resample_taps, self.resample_max = resample_taps, tuple(resample_max)
        self.resample_lanes = resample_lanes
        self.scaling = bool(scaling)
        self.small_ram = small_ram
        self.blocks = BlockDecoder(8, reduced=self.scaling, small_ram=small_ram,
                                   contexts=contexts)
        super().__init__({
            "i": In(stream.Signature(input_layout(input_bytes, tag_bits,
                                                  resize=bool(resample_taps),
                                                  scaling=self.scaling))),
            "o": Out(stream.Signature(output_layout(tag_bits))),
            "busy": Out(1),
            "images": Out(32),        # files finished since reset
            "errors": Out(32),        # of which malformed or unsupported
        })

    def c_slowing(self):
        """What C-slowing (JpegCorePair) needs to know (see HuffmanDecoder.c_slowing)."""
        return self.blocks.entropy.c_slowing()

    def elaborate(self, platform):
        m = Module()
        flush = Signal()            # a register, high in the FLUSH state
        parser, blocks, raster, to_bytes = self._decode_pipeline(m, flush)
        fs = self._file_state(m, blocks, raster, to_bytes)
        path, out_width, out_height = None, fs.frame.width, fs.frame.height
        if self.resample_taps:
            path = self._resample_path(m, flush, raster, fs.frame, fs.refused, fs.start_image)
            reader = path.reader
            m.d.comb += [reader.word.eq(self.i.payload.data),
                         reader.whole.eq(self.i.payload.keep == 4),
                         reader.last.eq(self.i.payload.last)]
            out_width = Mux(fs.refused, 0, Mux(fs.resizing, reader.out_width, fs.frame.width))
            out_height = Mux(fs.refused, 0, Mux(fs.resizing, reader.out_height,
                                                fs.frame.height))
        with m.FSM():
            self._elaborate_file_start(m, fs, path)
            self._elaborate_parse(m, fs, parser, path)
            self._elaborate_image(m, fs, parser, raster, path, out_width, out_height)
            self._elaborate_file_end(m, fs, parser, blocks, flush)
        return m

    def _decode_pipeline(self, m, flush):
        """Parser -> block decoder -> raster; the two stages behind the parser are reset
        (``flush``) between files, so that what a bad file left in them cannot reach the next."""
        m.submodules.parser = parser = MarkerParser(self.max_width, self.max_height)
        blocks = self.blocks
        raster = Raster(self.max_width, self.small_ram)
        m.submodules.blocks = ResetInserter(flush)(blocks)
        m.submodules.raster = ResetInserter(flush)(raster)
        # The raster's ``ready`` (a comparison of its row counters) would otherwise run back
        # through the IDCT's pipeline in the same clock: the core's critical path.
        skid = SkidBuffer(blocks.o.payload.shape())
        m.submodules.block_skid = ResetInserter(flush)(skid)
        m.submodules.bytes = to_bytes = BytesOut(self.input_bytes)

        wiring.connect(m, parser.dqt, blocks.dqt)
        wiring.connect(m, parser.dht, blocks.dht)
        wiring.connect(m, parser.scan, blocks.scan)
        wiring.connect(m, parser.entropy, blocks.i)
        wiring.connect(m, blocks.done, parser.done)
        wiring.connect(m, blocks.o, skid.i)
        wiring.connect(m, skid.o, raster.blocks)
        wiring.connect(m, to_bytes.o, parser.i)
        m.d.comb += blocks.quant_select.eq(parser.quant_select)
        return parser, blocks, raster, to_bytes

    def _file_state(self, m, blocks, raster, to_bytes):
        """The file being decoded: its tag, flags, frame, status and cycle count, and the gate
        that keeps the next file's bytes out until this one's trailer has left."""
        tag = Signal(self.tag_bits)
        fast = Signal()
        frame = Signal(FrameLayout)      # the image the core sends: scaled when scaling
        log_scale = Signal(2)            # the file's scale (0: 1/1)
        if self.scaling:
            mcu_sizes(m, blocks.sizes, frame, log_scale)
        status = Signal(8)
        cycles = Signal(32)
        open_ = Signal()                 # the file's bytes are still being read
        o = self.o.payload
        direct = Signal()                # the core reads its input itself (a resize request)
        m.d.comb += [
            to_bytes.i.payload.data.eq(self.i.payload.data),
            to_bytes.i.payload.keep.eq(self.i.payload.keep if self.input_bytes > 1 else 1),
            to_bytes.i.payload.last.eq(self.i.payload.last),
            to_bytes.i.valid.eq(self.i.valid & open_ & ~direct),
            self.i.ready.eq(Mux(direct, 1, to_bytes.i.ready) & open_),
            o.tag.eq(tag),
            raster.frame.payload.frame.eq(frame),
            raster.frame.payload.fast.eq(fast),
            raster.frame.payload.log_scale.eq(log_scale),
        ]
        with m.If(self.i.valid & self.i.ready & self.i.payload.last):
            m.d.sync += open_.eq(0)
        with m.If(self.busy):
            m.d.sync += cycles.eq(cycles + 1)

        header = HeaderLayout(o.data[:HeaderLayout.size])
        trailer = TrailerLayout(o.data[:TrailerLayout.size])
        resizing = Signal()              # this file's image goes through the resampler
        refused = Signal()               # ... whose request does not fit the image
        start_image = Signal()           # the raster takes the frame: the image begins
        return SimpleNamespace(tag=tag, fast=fast, frame=frame, log_scale=log_scale,
                               status=status, cycles=cycles, open_=open_, o=o, direct=direct,
                               header=header, trailer=trailer, resizing=resizing,
                               refused=refused, start_image=start_image)

    def _elaborate_file_start(self, m, fs, path):
        """IDLE, SCALE, REQUEST, DRAIN: a file's first beat, then the scale word and resize
        request that may come before the JPEG bytes; a bad one drains the file."""
        with m.State("IDLE"):
            with m.If(self.i.valid):
                m.d.sync += [fs.tag.eq(self.i.payload.tag), fs.fast.eq(self.i.payload.fast),
                             fs.open_.eq(1), fs.cycles.eq(1), self.busy.eq(1), fs.frame.eq(0),
                             fs.refused.eq(0), fs.log_scale.eq(0)]
                m.next = "PARSE"
                if self.resample_taps:
                    m.d.comb += path.reader.start.eq(1)
                    m.d.sync += fs.resizing.eq(self.i.payload.resize)
                    with m.If(self.i.payload.resize):
                        m.next = "REQUEST"
                if self.scaling:
                    with m.If(self.i.payload.scale):
                        m.next = "SCALE"
        if self.scaling:
            with m.State("SCALE"):
                # the scale word: the magic, then log2 of the denominator; a file with
                # nothing after it is as malformed as a wrong word
                m.d.comb += fs.direct.eq(1)
                word = self.i.payload.data
                good = (word[:24] == int.from_bytes(SCALE_MAGIC, "little")) & \
                    (word[24:32] <= 3) & (self.i.payload.keep == 4) & ~self.i.payload.last
                with m.If(self.i.valid & ~good):
                    m.d.sync += fs.status.eq(JpegStatus.BAD_SCALE)
                    m.next = "DRAIN"
                with m.Elif(self.i.valid):
                    m.d.sync += fs.log_scale.eq(word[24:26])
                    m.next = "REQUEST" if self.resample_taps else "PARSE"
                    if self.resample_taps:
                        with m.If(~fs.resizing):
                            m.next = "PARSE"
        if self.resample_taps or self.scaling:
            with m.State("DRAIN"):
                # a refused request: the rest of the file is read and dropped
                m.d.comb += fs.direct.eq(1)
                with m.If(~fs.open_):
                    m.next = "HEADER_ONLY"
        if self.resample_taps:
            with m.State("REQUEST"):
                reader = path.reader
                m.d.comb += [fs.direct.eq(1), reader.valid.eq(self.i.valid)]
                with m.If(reader.bad):
                    m.d.sync += fs.status.eq(JpegStatus.BAD_RESIZE)
                    m.next = "DRAIN"
                with m.Elif(reader.complete):
                    m.next = "PARSE"

    def _elaborate_parse(self, m, fs, parser, path):
        """PARSE: wait for the parser's frame (the image's size, scaled, and whether the
        resize request's crop fits it) or for its verdict on a file without a scan."""
        with m.State("PARSE"):
            m.d.comb += parser.frame.ready.eq(1)
            with m.If(parser.frame.valid):
                f = parser.frame.payload
                width, height = f.width, f.height
                if self.scaling:
                    width = scaled_extent(f.width, fs.log_scale)
                    height = scaled_extent(f.height, fs.log_scale)
                m.d.sync += [fs.frame.eq(f), fs.frame.width.eq(width),
                             fs.frame.height.eq(height)]
                if self.resample_taps:
                    reader = path.reader
                    outside = (reader.left + reader.crop_width > width) | \
                        (reader.top + reader.crop_height > height)
                    m.d.sync += fs.refused.eq(fs.resizing & outside)
                m.next = "HEADER"
            with m.Elif(parser.result.valid):
                m.d.comb += parser.result.ready.eq(1)
                m.d.sync += fs.status.eq(parser.result.payload.status)
                m.next = "HEADER_ONLY"

    def _elaborate_image(self, m, fs, parser, raster, path, out_width, out_height):
        """HEADER, START, PIXELS: the header beat, then the image's pixels from the raster
        (or the resampler) until its last, or until the scan fails."""
        o, header, frame = fs.o, fs.header, fs.frame
        # (a file that fails before its scan, or whose request is refused: a zero size)
        for state, after, width, height in (("HEADER", "START", out_width, out_height),
                                            ("HEADER_ONLY", "TRAILER", 0, 0)):
            with m.State(state):
                m.d.comb += [self.o.valid.eq(1), o.kind.eq(OutputKind.HEADER),
                             header.width.eq(width), header.height.eq(height),
                             header.components.eq(frame.components), header.h.eq(frame.h),
                             header.v.eq(frame.v), header.fast.eq(fs.fast)]
                with m.If(self.o.ready):
                    m.next = after
        with m.State("START"):
            m.d.comb += raster.frame.valid.eq(1)
            with m.If(raster.frame.ready):
                m.d.comb += fs.start_image.eq(1)
                m.next = "PIXELS"
        with m.State("PIXELS"):
            failed = parser.result.valid & parser.result_failed
            with m.If(failed):
                # The scan failed: no more blocks will come; the pixels stop here.
                m.d.comb += parser.result.ready.eq(1)
                m.d.sync += fs.status.eq(parser.result.payload.status)
                m.next = "TRAILER"
            if self.resample_taps:
                with m.Elif(fs.resizing):
                    m.d.comb += [path.active.eq(1), self.o.valid.eq(path.o.valid),
                                 path.o.ready.eq(self.o.ready),
                                 o.kind.eq(OutputKind.PIXELS),
                                 o.data.eq(path.o.payload.pixels),
                                 o.count.eq(path.o.payload.count)]
                    with m.If(path.done):
                        m.next = "RESULT"
            with m.Else():
                m.d.comb += [self.o.valid.eq(raster.o.valid), raster.o.ready.eq(self.o.ready),
                             o.kind.eq(OutputKind.PIXELS), o.data.eq(raster.o.payload.rgb),
                             o.count.eq(raster.o.payload.count)]
                with m.If(raster.o.valid & self.o.ready & raster.o.payload.last):
                    m.next = "RESULT"

    def _elaborate_file_end(self, m, fs, parser, blocks, flush):
        """RESULT, TRAILER, FLUSH: the parser's verdict, then the trailer; once it has left,
        the stages are flushed and the next file may come in."""
        o, trailer, status = fs.o, fs.trailer, fs.status
        with m.State("RESULT"):
            m.d.comb += parser.result.ready.eq(1)
            with m.If(parser.result.valid):
                result = parser.result.payload.status
                m.d.sync += status.eq(Mux(fs.refused & (result == JpegStatus.OK),
                                          JpegStatus.BAD_RESIZE, result))
                m.next = "TRAILER"
        with m.State("TRAILER"):
            m.d.comb += [self.o.valid.eq(1), o.kind.eq(OutputKind.TRAILER), o.last.eq(1),
                         trailer.status.eq(status), trailer.cycles.eq(fs.cycles),
                         trailer.symbols.eq(blocks.symbols_decoded)]
            with m.If(self.o.ready):
                m.d.sync += [flush.eq(1), self.busy.eq(0), self.images.eq(self.images + 1)]
                with m.If(status != JpegStatus.OK):
                    m.d.sync += self.errors.eq(self.errors + 1)
                m.next = "FLUSH"
        with m.State("FLUSH"):
            # The stages' reset comes from a register, in a clock of its own: it reaches
            # every register behind the parser, so nothing else may be on its way (in the
            # two-file core the FSM and the output's handshake were, across the chip).
            m.d.sync += flush.eq(0)
            m.next = "IDLE"

    def _resample_path(self, m, flush, raster, frame, refused, start_image):
        """The request reader and the resampler, fed the raster's beats while
        ``path.active``; ``path.o`` the resized pixels, ``path.done`` when the image
        has gone in whole and come out whole (or, refused, only gone in)."""
        max_columns, max_rows = self.resample_max
        rs = Resampler(max_columns=max_columns, max_rows=max_rows, taps=self.resample_taps,
                       max_image=(self.max_width, self.max_height), lanes=self.resample_lanes)
        m.submodules.resampler = ResetInserter(flush)(rs)
        m.submodules.request = reader = RequestReader(rs)
        for name in ("left", "top", "crop_width", "crop_height", "out_width", "out_height",
                     "vertical_first", "row_table_addr", "row_table_data", "row_table_we",
                     "column_table_addr", "column_table_data", "column_table_we"):
            m.d.comb += getattr(rs, name).eq(getattr(reader, name))
        m.d.comb += rs.restart.eq(start_image)

        active = Signal()
        column = Signal(16)                             # of the beat's first pixel
        in_done, out_done = Signal(), Signal()
        out_rows = Signal(16)
        beat = raster.o.payload
        offer = active & raster.o.valid
        # a raster beat goes in as it is (4 lanes), or in parts of ``lanes`` pixels
        lanes = self.resample_lanes
        part = Signal(range(max(2, LANES // lanes)))    # the part of the beat offered now
        left = Signal(range(LANES + 1))                 # the beat's pixels from that part on
        count = Signal(range(lanes + 1))
        m.d.comb += [left.eq(beat.count - part * lanes),
                     count.eq(Mux(left > lanes, lanes, left))]
        row_end = column + count == frame.width
        pixels = beat.rgb.as_value().word_select(part, 24 * lanes) if lanes < LANES \
            else beat.rgb
        m.d.comb += [rs.i.valid.eq(offer & ~refused),
                     rs.i.payload.pixels.eq(pixels),
                     rs.i.payload.count.eq(count),
                     rs.i.payload.last.eq(row_end)]
        with m.If(offer & (rs.i.ready | refused)):
            m.d.sync += [column.eq(Mux(row_end, 0, column + count)), part.eq(part + 1)]
            with m.If(left <= lanes):
                m.d.comb += raster.o.ready.eq(1)
                m.d.sync += part.eq(0)
                with m.If(beat.last):
                    m.d.sync += in_done.eq(1)
        with m.If(rs.o.valid & rs.o.ready & rs.o.payload.last):
            m.d.sync += out_rows.eq(out_rows + 1)
            with m.If(out_rows + 1 == reader.out_height):
                m.d.sync += out_done.eq(1)
        with m.If(start_image):
            m.d.sync += [column.eq(0), part.eq(0), in_done.eq(0), out_done.eq(0),
                         out_rows.eq(0)]
        return SimpleNamespace(reader=reader, active=active, o=rs.o,
                               done=in_done & (out_done | refused))
