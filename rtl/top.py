"""The accelerator top: one host link of ``link_bytes`` (W) bytes a clock each way, JPEG
decoder cores and (optionally) the convolution engine behind it.

Link beats -> :class:`~dlforge.rtl.link.control.LinkControl` (frames checked before anything
acts; pings, registers and error frames answered there) -> ``JPEG_DATA``/``JPEG_END`` frames
into the input FIFO of the core the request names (bits 4..7 of its status byte; bit 0 asks
for fast upsampling), at W bytes a clock; each core takes 4 bytes a clock from its FIFO ->
each core's results as reply frames (:class:`~dlforge.rtl.link.jpeg_reply.JpegReplier`, W
bytes a beat) -> interleaved a frame at a time back onto the link.  Frames of files for
different cores may interleave on the link; the host keeps each core's bytes in flight within
its FIFO (``Register.INPUT_FIFO``), so that no core's full FIFO holds the link up for the
others.
``CONV_WORDS`` frames carry the engine's link words; its results come back as ``CONV_WORDS``
frames (:mod:`~dlforge.rtl.link.conv_link`), the words taken straight from the link beats.  Register values:
:class:`~dlforge.rtl.link.protocol.Register`, the engine's counters included.
"""

from amaranth import (Array, ClockDomain, ClockSignal, Const, DomainRenamer, Module, Mux,
                      ResetInserter, ResetSignal, Signal)
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from .conv.engine import ConvEngine
from .jpeg.lane import DecoderLane, DecoderLanePair, lane_entry
from .jpeg.limits import DEFAULT_MAX_HEIGHT, DEFAULT_MAX_WIDTH
from .jpeg.scaling import SCALES
from .link.control import LinkControl
from .link.conv_link import ConvReplier, WordRegroup
from .link.jpeg_reply import JpegReplier
from .link.protocol import (CORE_SHIFT, LINK_WIDTHS, MAX_CORES, MAX_PAYLOAD, TAG_BITS, VERSION,
                            Opcode, Register, Status, array_word, scales_word)
from .small_ram import check_small_ram

__all__ = ["AcceleratorTop", "ENGINE_HOLD"]

#: Clocks an engine with a gated clock (``engine_clock``) keeps ticking after its last sign of
#: activity: longer than any of its pipelines (the array and the post-processing's stages, its
#: FIFOs' output registers), so that nothing in flight is frozen.
ENGINE_HOLD = 64


class AcceleratorTop(wiring.Component):
    """The whole accelerator behind one host link, independent of how the link reaches the
    host: a board (UART), the AXI export or a simulation wraps this same component, so that
    what is tested is what is built."""

    def __init__(self, cores=1, max_width=DEFAULT_MAX_WIDTH, max_height=DEFAULT_MAX_HEIGHT,
                 max_payload=MAX_PAYLOAD, input_fifo_bytes=64, conv=None, reply_payload=None,
                 register_port=False, link_bytes=1, engine_clock=False, resample_taps=0,
                 resample_lanes=4,
                 resample_max=(1024, 1024), scaling=False, small_ram="block", contexts=1):
        # cores=0: no decoder (a small FPGA: the engine alone, or with no engine either just
        # the link's control plane, to bring up a board's link)
        problem = None
        if not 0 <= cores <= MAX_CORES:
            problem = f"cores must be 0 to {MAX_CORES}, not {cores}"
        elif link_bytes not in LINK_WIDTHS:
            problem = f"link_bytes must be one of {LINK_WIDTHS}, not {link_bytes}"
        elif cores and (input_fifo_bytes % link_bytes or input_fifo_bytes < 2 * link_bytes):
            problem = (f"input_fifo_bytes ({input_fifo_bytes}) must be a multiple of "
                       f"link_bytes ({link_bytes}), at least two beats")
        elif resample_taps and link_bytes == 1:
            problem = "a resampler needs a link of 4 bytes or more (its cores read words)"
        elif scaling and link_bytes == 1:
            problem = "scaled decoding needs a link of 4 bytes or more (its cores read words)"
        elif check_small_ram(small_ram):
            problem = check_small_ram(small_ram)
        elif contexts not in (1, 2) or cores * contexts > MAX_CORES:
            problem = (f"contexts must be 1 or 2 with at most {MAX_CORES} files at once, not "
                       f"{contexts!r} (cores {cores})")
        if problem:
            self._MustUse__silence = True     # never elaborated: no unused-elaboratable warning
            raise ValueError(problem)
        self.conv = conv                    # an EngineConfig, or None for no engine
        # contexts: files per core.  2 builds the cores as C-slowed pairs (JpegCorePair), two
        # lanes each; ``n_cores`` counts lanes (files at once: what the host addresses).
        self.contexts = contexts
        self.n_cores, self.max_width, self.max_height = cores * contexts, max_width, max_height
        self.max_payload, self.input_fifo_bytes = max_payload, input_fifo_bytes
        self.link_bytes = link_bytes
        # resample_taps: each core crops and resizes the files that ask for it (0: none)
        self.resample_taps = resample_taps if cores else 0
        self.resample_lanes = resample_lanes        # its pixels a clock (JpegCore)
        self.resample_max = tuple(resample_max)
        # scaling: the cores' reduced IDCTs (decodes at 1/2, 1/4, 1/8 that ask for it)
        self.scaling = bool(scaling and cores)
        # small_ram: the cores' FIFOs, small tables and corner turns in "block" or "lut" RAM
        # (dlforge.rtl.small_ram: a board short of block RAM takes "lut")
        self.small_ram = small_ram
        # Replies may use larger frames than requests (a reply buffer per core instead of the
        # receiver's two slots): fewer frames per image for the host to handle.
        self.reply_payload = max_payload if reply_payload is None else reply_payload
        # register_port: the register file also on wires, for a bus slave next to the link
        # (dlforge.rtl.axi_export's AXI4-Lite): ``reg_data`` is register ``reg_addr`` (read
        # combinationally), ``reg_reset`` does what writing 1 to Register.RESET does.  Off,
        # the ports are exactly ``i`` and ``o`` (other tops and cached simulator builds).
        self.register_port = register_port
        # engine_clock: for a simulator only.  The engine runs on the clock of the port
        # ``engine_clk`` (the same clock, gated), and ``engine_wants_clock`` says when it may
        # need an edge: a word offered, work in hand, a reset, or fewer than ENGINE_HOLD clocks
        # since any of these.  A simulator evaluates an engine whose clock does not tick for
        # free, where Verilator would otherwise evaluate all of its 512 multipliers on every
        # clock of a decode (about a third of the default board's time: docs/sim-board.md).
        # Never in a bitstream: gating a clock from logic is not how an FPGA saves power.
        self.engine_clock = bool(engine_clock and conv)
        members = {"i": In(stream.Signature(8 * link_bytes)),
                   "o": Out(stream.Signature(8 * link_bytes))}
        if register_port:
            members |= {"reg_addr": In(6), "reg_data": Out(32), "reg_reset": In(1)}
        if self.engine_clock:
            members |= {"engine_clk": In(1), "engine_wants_clock": Out(1)}
        super().__init__(members)

    def constant_registers(self):
        """The registers that hold a constant of this configuration ({Register: value}):
        what the host reads to learn the device, and what an AXI manifest lists."""
        values = {Register.VERSION: VERSION, Register.CORES: self.n_cores,
                  Register.FILES_PER_CORE: self.contexts if self.n_cores else 0,
                  Register.MAX_WIDTH: self.max_width, Register.MAX_HEIGHT: self.max_height,
                  Register.MAX_PAYLOAD: self.max_payload,
                  Register.REPLY_PAYLOAD: self.reply_payload,
                  Register.LINK_WIDTH: self.link_bytes,
                  Register.INPUT_FIFO: self.input_fifo_bytes if self.n_cores else 0,
                  Register.ARRAY: 0, Register.LINK_BYTES: 0,
                  Register.RESAMPLE_TAPS: self.resample_taps,
                  Register.RESAMPLE_MAX: self.resample_max[0] | self.resample_max[1] << 16
                  if self.resample_taps else 0,
                  Register.SCALES: scales_word(SCALES) if self.scaling else 0}
        if self.conv:
            c = self.conv
            values |= {Register.ARRAY: array_word(c), Register.LINK_BYTES: c.link_bytes,
                       Register.CONV_WEIGHT_DEPTH: c.weight_depth,
                       Register.CONV_INPUT_DEPTH: c.input_depth,
                       Register.CONV_PSUM_DEPTH: c.psum_depth,
                       Register.CONV_MAX_REDUCTION: c.max_reduction}
        return values

    def elaborate(self, platform):
        m = Module()
        n, w = self.n_cores, self.link_bytes
        shift = (w - 1).bit_length()
        # With no decoder cores (a small FPGA holding only the engine) JPEG frames are unknown
        # opcodes: refused with an ERROR frame like any other.
        opcodes = ([Opcode.JPEG_DATA, Opcode.JPEG_END] if n else []) \
            + ([Opcode.CONV_WORDS] if self.conv else [])
        m.submodules.control = control = LinkControl(data_opcodes=opcodes,
                                                     max_payload=self.max_payload,
                                                     link_bytes=w)
        wiring.connect(m, wiring.flipped(self.i), control.i)
        wiring.connect(m, control.o, wiring.flipped(self.o))
        reset = control.reset               # what resets the cores and the engine
        if self.register_port:
            reset = Signal()
            m.d.comb += reset.eq(control.reset | self.reg_reset)

        cores, feeds, repliers = [], [], []
        # the same lanes (input FIFO, then the core) as the standalone JpegDecoder's
        unit = DecoderLane if self.contexts == 1 else DecoderLanePair
        lanes = []
        for k in range(n // self.contexts):
            built = unit(w, self.input_fifo_bytes // w, self.max_width, self.max_height,
                         TAG_BITS, resample_taps=self.resample_taps,
                         resample_max=self.resample_max, resample_lanes=self.resample_lanes,
                         scaling=self.scaling, small_ram=self.small_ram)
            m.submodules[f"core{k}"] = ResetInserter(reset)(built)
            lanes += [built] if self.contexts == 1 else built.lanes
        for k, lane in enumerate(lanes):
            replier = JpegReplier(self.reply_payload, w)
            m.submodules[f"reply{k}"] = replier
            wiring.connect(m, lane.o, replier.i)
            cores.append(lane.core)
            feeds.append(lane)
            repliers.append(replier)

        # ---- Requests: each file's beats to the core it names ------------------------------
        beat = control.data.payload
        h = beat.header
        empty = h.length == 0
        is_conv = h.opcode == Opcode.CONV_WORDS
        rest = h.length[:shift] if w > 1 else 0
        # A frame whose header was destroyed vanishes in the receiver: each core checks that
        # its files' frames come numbered 0, 1, 2, ... (a closer is taken whatever its number)
        # and refuses the first frame after a gap (Status.GAP), which the host answers by
        # resubmitting.  The frame itself goes on: the host voids the files around it.
        first = Signal(init=1)              # the next data beat starts a frame
        hold = Signal()                     # a refusal waits to be taken: hold the frame
        go = Signal()
        m.d.comb += go.eq(control.data.valid & ~hold)
        with m.If(control.data.valid & control.data.ready):
            m.d.sync += first.eq(beat.last)
        with m.If(empty):
            m.d.comb += control.data.ready.eq(1)             # nothing to hand on
        if n:
            core_index = h.status[CORE_SHIFT:CORE_SHIFT + 4]
            target = Signal(range(max(n, 2)))
            m.d.comb += target.eq(Mux(core_index >= n - 1, n - 1, core_index) if n > 1 else 0)
            expected = Array(Signal(8, name=f"expect{k}") for k in range(n))
            is_jpeg = (h.opcode == Opcode.JPEG_DATA) | (h.opcode == Opcode.JPEG_END)
            gap = first & is_jpeg & ~h.status[1] & (h.seq != expected[target])
            refuse = control.refuse
            m.d.comb += hold.eq(gap & refuse.valid)
            with m.If(refuse.valid & refuse.ready):
                m.d.sync += refuse.valid.eq(0)
            with m.If(control.data.valid & control.data.ready & first & is_jpeg):
                m.d.sync += expected[target].eq(Mux(h.opcode == Opcode.JPEG_END, 0, h.seq + 1))
                with m.If(gap):
                    m.d.sync += [refuse.valid.eq(1), refuse.payload.status.eq(Status.GAP),
                                 refuse.payload.opcode.eq(h.opcode),
                                 refuse.payload.tag.eq(h.tag)]
            entry = lane_entry(w)
            to_core = entry(Signal(entry.size))
            m.d.comb += [to_core.data.eq(beat.data),
                         to_core.bytes.eq(Mux(beat.last & (rest != 0), rest, w)),
                         to_core.last.eq((h.opcode == Opcode.JPEG_END) & beat.last),
                         to_core.fast.eq(h.status[0]), to_core.resize.eq(h.status[2]),
                         to_core.scale.eq(h.status[3]),
                         to_core.tag.eq(h.tag)]
            for k, feed in enumerate(feeds):
                m.d.comb += feed.i.payload.eq(to_core)
                # (a core the device does not have: the last one takes the file)
                mine = (core_index == k) if k < n - 1 else \
                    (core_index >= k) if k else Const(1)
                with m.If(mine & ~empty & ~is_conv):
                    m.d.comb += [feed.i.valid.eq(go), control.data.ready.eq(feed.i.ready & ~hold)]
        if self.conv:
            cfg = self.conv
            engine = ConvEngine(cfg)
            if self.engine_clock:
                # On its own clock, the engine's streams pass through two-entry FIFOs of that
                # clock, whose outputs and ``ready`` are registers, and it takes its reset from
                # a register of that clock (its domain has no reset signal): so none of its
                # logic reads the rest of the top's within a clock, and a simulator skips all
                # of it while its clock stands still.  (In a bitstream they would cost the
                # ULX3S-12F's 2x2x2 engine 411 LUT4 for nothing.)
                m.domains.engine = ClockDomain("engine", reset_less=True)
                m.d.comb += ClockSignal("engine").eq(self.engine_clk)
                engine_reset = Signal()
                m.d.engine += engine_reset.eq(reset | ResetSignal("sync"))
                gated = DomainRenamer("engine")
                m.submodules.to_engine = to_engine = gated(ResetInserter(engine_reset)(
                    SyncFIFO(width=8 * cfg.link_bytes, depth=2)))
                results = engine.o.payload.shape()
                m.submodules.from_engine = from_engine = gated(ResetInserter(engine_reset)(
                    SyncFIFO(width=results.size, depth=2)))
                m.submodules.engine = gated(ResetInserter(engine_reset)(engine))
            else:
                m.submodules.engine = ResetInserter(reset)(engine)
            m.submodules.regroup = regroup = WordRegroup(w, cfg.link_bytes)
            m.submodules.conv_reply = conv_reply = ConvReplier(cfg.link_bytes,
                                                                self.reply_payload, w)
            if self.engine_clock:
                m.d.comb += [to_engine.w_data.eq(regroup.o.payload),
                             to_engine.w_en.eq(regroup.o.valid),
                             regroup.o.ready.eq(to_engine.w_rdy),
                             engine.i.payload.eq(to_engine.r_data),
                             engine.i.valid.eq(to_engine.r_rdy),
                             to_engine.r_en.eq(engine.i.ready),
                             from_engine.w_data.eq(engine.o.payload),
                             from_engine.w_en.eq(engine.o.valid),
                             engine.o.ready.eq(from_engine.w_rdy),
                             conv_reply.i.payload.eq(from_engine.r_data),
                             conv_reply.i.valid.eq(from_engine.r_rdy),
                             from_engine.r_en.eq(conv_reply.i.ready)]
            else:
                wiring.connect(m, regroup.o, engine.i)
                wiring.connect(m, engine.o, conv_reply.i)
            per = max(w // cfg.link_bytes, 1)
            if per > 1:
                m.d.comb += regroup.words.eq(Mux(beat.last & (rest != 0),
                                                 rest >> (cfg.link_bytes.bit_length() - 1), per))
            m.d.comb += regroup.i.payload.eq(beat.data)
            with m.If(is_conv & ~empty):
                m.d.comb += [regroup.i.valid.eq(control.data.valid),
                             control.data.ready.eq(regroup.i.ready)]
            with m.If(control.data.valid & is_conv):
                m.d.sync += conv_reply.tag.eq(h.tag)
            if self.engine_clock:
                # (the FIFOs' levels: a word to take or to hand on is work)
                wake = (engine.busy | regroup.o.valid | (to_engine.level != 0)
                        | (from_engine.level != 0) | reset | engine_reset)
                hold = Signal(range(ENGINE_HOLD + 1))
                with m.If(wake):
                    m.d.sync += hold.eq(ENGINE_HOLD)
                with m.Elif(hold != 0):
                    m.d.sync += hold.eq(hold - 1)
                m.d.comb += self.engine_wants_clock.eq(wake | (hold != 0))

        # ---- Replies: a whole frame of one core (or the engine) at a time ----------------------
        if self.conv:
            repliers = repliers + [conv_reply]
        r = len(repliers)
        index = range(max(r, 2))            # (a one-bit index with one replier: no 0-bit wires)
        owner = Signal(index)
        replying = Signal()
        left = Signal(32)                   # payload beats of the frame still to pass
        after = Signal(index)               # round robin: start looking after the last owner
        if r == 1:
            choice, pending = Signal(index), repliers[0].header.valid
        else:
            choice = Signal(index)
            pending = Signal()
            for offset in reversed(range(r)):
                k = Signal(index, name=f"candidate{offset}")
                m.d.comb += k.eq((after + offset) % r)
                for j, rp in enumerate(repliers):
                    with m.If((k == j) & rp.header.valid):
                        m.d.comb += [choice.eq(j), pending.eq(1)]
        with m.If(~replying):
            for j, rp in enumerate(repliers):
                with m.If(pending & (choice == j)):
                    wiring.connect(m, rp.header, control.reply_header)
                    with m.If(control.reply_header.ready):
                        length = rp.header.payload.length
                        m.d.sync += [owner.eq(j), left.eq((length + w - 1) >> shift),
                                     replying.eq(length != 0), after.eq((j + 1) % r)]
        with m.Else():
            for j, rp in enumerate(repliers):
                with m.If(owner == j):
                    wiring.connect(m, rp.payload, control.reply)
            with m.If(control.reply.valid & control.reply.ready):
                m.d.sync += left.eq(left - 1)
                with m.If(left == 1):
                    m.d.sync += replying.eq(0)

        # ---- Registers -----------------------------------------------------------------------
        cycles = Signal(32)
        m.d.sync += cycles.eq(cycles + 1)
        span_open = Signal()
        span_start, span_end = Signal(32), Signal(32)
        with m.If(control.written & (control.write_reg == Register.SPAN_START)):
            m.d.sync += [span_open.eq(1), span_end.eq(cycles)]
        with m.Else():
            with m.If(span_open & control.data_start):
                m.d.sync += [span_open.eq(0), span_start.eq(cycles)]
            with m.If(control.data_sent):
                m.d.sync += span_end.eq(cycles)
        regs = control.regs
        m.d.comb += [regs[r].eq(v) for r, v in self.constant_registers().items()]
        m.d.comb += [regs[Register.CYCLES].eq(cycles),
                     regs[Register.SPAN_START].eq(span_start),
                     regs[Register.SPAN_END].eq(span_end),
                     regs[Register.CRC_ERRORS].eq(control.crc_errors),
                     regs[Register.HEADER_ERRORS].eq(control.header_errors)]
        for k, core in enumerate(cores):
            m.d.comb += [regs[Register.JPEG_IMAGES + k].eq(core.images),
                         regs[Register.JPEG_ERRORS + k].eq(core.errors)]
        if self.conv:
            m.d.comb += [regs[Register.CONV_CYCLES].eq(engine.cycles),
                         regs[Register.CONV_ARRAY_CYCLES].eq(engine.array_cycles),
                         regs[Register.CONV_TILES].eq(engine.tiles),
                         regs[Register.CONV_ERROR].eq(engine.error_code)]
        if self.register_port:
            m.d.comb += self.reg_data.eq(regs[self.reg_addr])
        return m
