"""The accelerator top: one byte-stream host link, JPEG decoder cores and (optionally) the
convolution engine behind it.

Link bytes -> :class:`~dlforge.rtl.link.control.LinkControl` (frames checked before anything
acts; pings, registers and error frames answered there) -> ``JPEG_DATA``/``JPEG_END`` frames
to the decoder cores, a file to each core in turn -> each core's results as reply frames
(:class:`~dlforge.rtl.link.jpeg_reply.JpegReplier`) -> interleaved a frame at a time back onto
the link.  A file's frames are sent back to back (one tag per file; bit 0 of the request's
status byte asks for fast upsampling); files for different cores decode at the same time.
``CONV_WORDS`` frames carry the engine's link words; its results come back as ``CONV_WORDS``
frames (:mod:`~dlforge.rtl.link.conv_link`).  Register values:
:class:`~dlforge.rtl.link.protocol.Register`, the engine's counters included.
"""

from amaranth import Module, ResetInserter, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from .conv.engine import ConvEngine
from .jpeg.core import JpegCore
from .jpeg.packets import input_layout
from .link.control import LinkControl
from .link.conv_link import ConvReplier, WordPacker
from .link.jpeg_reply import TAG_BITS, JpegReplier
from .link.protocol import MAX_CORES, MAX_PAYLOAD, VERSION, Opcode, Register

__all__ = ["AcceleratorTop"]


class AcceleratorTop(wiring.Component):
    def __init__(self, cores=1, max_width=4096, max_height=65535, max_payload=MAX_PAYLOAD,
                 input_fifo_depth=64, conv=None, reply_payload=None, register_port=False):
        # cores=0: no decoder (a small FPGA: the engine alone, or with no engine either just
        # the link's control plane, to bring up a board's link)
        if not 0 <= cores <= MAX_CORES:
            self._MustUse__silence = True     # never elaborated: no unused-elaboratable warning
            raise ValueError(f"cores must be 0 to {MAX_CORES}, not {cores}")
        self.conv = conv                    # an EngineConfig, or None for no engine
        self.n_cores, self.max_width, self.max_height = cores, max_width, max_height
        self.max_payload, self.input_fifo_depth = max_payload, input_fifo_depth
        # Replies may use larger frames than requests (a reply buffer per core instead of the
        # receiver's two slots): fewer frames per image for the host to handle.
        self.reply_payload = max_payload if reply_payload is None else reply_payload
        # register_port: the register file also on wires, for a bus slave next to the link
        # (dlforge.rtl.axi_export's AXI4-Lite): ``reg_data`` is register ``reg_addr`` (read
        # combinationally), ``reg_reset`` does what writing 1 to Register.RESET does.  Off,
        # the ports are exactly ``i`` and ``o`` (other tops and cached simulator builds).
        self.register_port = register_port
        members = {"i": In(stream.Signature(8)), "o": Out(stream.Signature(8))}
        if register_port:
            members |= {"reg_addr": In(6), "reg_data": Out(32), "reg_reset": In(1)}
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        n = self.n_cores
        # With no decoder cores (a small FPGA holding only the engine) JPEG frames are unknown
        # opcodes: refused with an ERROR frame like any other.
        opcodes = ([Opcode.JPEG_DATA, Opcode.JPEG_END] if n else []) \
            + ([Opcode.CONV_WORDS] if self.conv else [])
        m.submodules.control = control = LinkControl(data_opcodes=opcodes,
                                                     max_payload=self.max_payload)
        wiring.connect(m, wiring.flipped(self.i), control.i)
        wiring.connect(m, control.o, wiring.flipped(self.o))
        reset = control.reset               # what resets the cores and the engine
        if self.register_port:
            reset = Signal()
            m.d.comb += reset.eq(control.reset | self.reg_reset)

        layout = input_layout(1, TAG_BITS)
        cores, fifos, repliers = [], [], []
        for k in range(n):
            core = JpegCore(self.max_width, self.max_height, 1, TAG_BITS)
            m.submodules[f"core{k}"] = ResetInserter(reset)(core)
            fifo = SyncFIFOBuffered(width=layout.size, depth=self.input_fifo_depth)
            m.submodules[f"fifo{k}"] = fifo
            replier = JpegReplier(self.reply_payload)
            m.submodules[f"reply{k}"] = replier
            m.d.comb += [core.i.payload.eq(fifo.r_data), core.i.valid.eq(fifo.r_rdy),
                         fifo.r_en.eq(core.i.ready)]
            wiring.connect(m, core.o, replier.i)
            cores.append(core)
            fifos.append(fifo)
            repliers.append(replier)

        # ---- Requests: each file's bytes to one core, the next file to the next core ----------
        beat = control.data.payload
        h = beat.header
        index = range(max(n, 2))                # (a one-bit index with one core: no 0-bit wires)
        file_core = Signal(index)
        to_core = layout(Signal(layout.size))
        m.d.comb += [to_core.data.eq(beat.data), to_core.keep.eq(1),
                     to_core.last.eq((h.opcode == Opcode.JPEG_END) & beat.last),
                     to_core.fast.eq(h.status[0]), to_core.tag.eq(h.tag)]
        empty = h.length == 0
        is_conv = h.opcode == Opcode.CONV_WORDS
        with m.If(empty):
            m.d.comb += control.data.ready.eq(1)             # nothing to hand on
        for k, fifo in enumerate(fifos):
            m.d.comb += fifo.w_data.eq(to_core)
            with m.If((file_core == k) & ~empty & ~is_conv):
                m.d.comb += [fifo.w_en.eq(control.data.valid), control.data.ready.eq(fifo.w_rdy)]
        if self.conv:
            engine = ConvEngine(self.conv)
            m.submodules.engine = ResetInserter(reset)(engine)
            m.submodules.packer = packer = WordPacker(self.conv.link_bytes)
            m.submodules.conv_reply = conv_reply = ConvReplier(self.conv.link_bytes,
                                                                self.reply_payload)
            wiring.connect(m, packer.o, engine.i)
            wiring.connect(m, engine.o, conv_reply.i)
            m.d.comb += packer.i.payload.eq(beat.data)
            with m.If(is_conv & ~empty):
                m.d.comb += [packer.i.valid.eq(control.data.valid),
                             control.data.ready.eq(packer.i.ready)]
            with m.If(control.data.valid & is_conv):
                m.d.sync += conv_reply.tag.eq(h.tag)
        if n:
            with m.If(control.data.valid & control.data.ready & beat.last
                      & (h.opcode == Opcode.JPEG_END)):
                m.d.sync += file_core.eq(0 if n == 1 else (file_core + 1) % n)

        # ---- Replies: a whole frame of one core (or the engine) at a time ----------------------
        if self.conv:
            repliers = repliers + [conv_reply]
            n = len(repliers)
            index = range(max(n, 2))
        owner = Signal(index)
        replying = Signal()
        left = Signal(32)
        after = Signal(index)                # round robin: start looking after the last owner
        if n == 1:
            choice, pending = Signal(index), repliers[0].header.valid
        else:
            choice = Signal(index)
            pending = Signal()
            for offset in reversed(range(n)):
                k = Signal(index, name=f"candidate{offset}")
                m.d.comb += k.eq((after + offset) % n)
                for j, r in enumerate(repliers):
                    with m.If((k == j) & r.header.valid):
                        m.d.comb += [choice.eq(j), pending.eq(1)]
        with m.If(~replying):
            for j, r in enumerate(repliers):
                with m.If(pending & (choice == j)):
                    wiring.connect(m, r.header, control.reply_header)
                    with m.If(control.reply_header.ready):
                        m.d.sync += [owner.eq(j), left.eq(r.header.payload.length),
                                     replying.eq(r.header.payload.length != 0),
                                     after.eq((j + 1) % n)]
        with m.Else():
            for j, r in enumerate(repliers):
                with m.If(owner == j):
                    wiring.connect(m, r.payload, control.reply)
            with m.If(control.reply.valid & control.reply.ready):
                m.d.sync += left.eq(left - 1)
                with m.If(left == 1):
                    m.d.sync += replying.eq(0)

        # ---- Registers -----------------------------------------------------------------------
        cycles = Signal(32)
        m.d.sync += cycles.eq(cycles + 1)
        regs = control.regs
        m.d.comb += [regs[Register.VERSION].eq(VERSION), regs[Register.CORES].eq(self.n_cores),
                     regs[Register.MAX_WIDTH].eq(self.max_width),
                     regs[Register.MAX_HEIGHT].eq(self.max_height),
                     regs[Register.MAX_PAYLOAD].eq(self.max_payload),
                     regs[Register.REPLY_PAYLOAD].eq(self.reply_payload),
                     regs[Register.CYCLES].eq(cycles),
                     regs[Register.CRC_ERRORS].eq(control.crc_errors),
                     regs[Register.HEADER_ERRORS].eq(control.header_errors)]
        for k, core in enumerate(cores):
            m.d.comb += [regs[Register.JPEG_IMAGES + k].eq(core.images),
                         regs[Register.JPEG_ERRORS + k].eq(core.errors)]
        if self.conv:
            cfg = self.conv
            m.d.comb += [regs[Register.ARRAY].eq(cfg.rows | cfg.cols << 8 | cfg.simd << 16
                                                 | cfg.operand_bits << 24),
                         regs[Register.LINK_BYTES].eq(cfg.link_bytes),
                         regs[Register.CONV_CYCLES].eq(engine.cycles),
                         regs[Register.CONV_ARRAY_CYCLES].eq(engine.array_cycles),
                         regs[Register.CONV_TILES].eq(engine.tiles),
                         regs[Register.CONV_ERROR].eq(engine.error_code),
                         regs[Register.CONV_WEIGHT_DEPTH].eq(cfg.weight_depth),
                         regs[Register.CONV_INPUT_DEPTH].eq(cfg.input_depth),
                         regs[Register.CONV_PSUM_DEPTH].eq(cfg.psum_depth),
                         regs[Register.CONV_MAX_REDUCTION].eq(cfg.max_reduction)]
        if self.register_port:
            m.d.comb += self.reg_data.eq(regs[self.reg_addr])
        return m
