"""Decoded blocks to RGB raster lines: MCU-row buffers, chroma upsampling, colour conversion.

Blocks arrive in scan order (MCU by MCU) one 8-sample row per beat; pixels leave in raster
order.  Between the two sit line buffers, one memory per component, a 64-bit word holding
eight horizontally adjacent samples:

* luma: two MCU-row slots (up to 16 lines each): the writer fills one while the reader
  empties the other;
* chroma: three MCU-row slots of 8 lines, because libjpeg's fancy vertical upsampling needs
  the last chroma line of the row above and the first of the row below the one being output.

The reader makes one group of 8 output pixels every 2 clocks: clock A reads the luma word and
the "near" chroma word, clock B the "far" chroma word (the neighbouring chroma line vertical
fancy upsampling blends in).  For 2x horizontal chroma the group needs half a chroma word plus
one neighbour on each side; reading the chroma word one ahead on odd groups supplies the right
neighbour without a second read.  Arithmetic and edge rules follow libjpeg-turbo's jdsample.c
(model: ``sim/models/jpeg_upsample.py``); colour conversion is ``ycc_rgb.ycc_to_rgb``.

Throughput: 4 pixels per clock within a line, a couple of clocks between lines; the writer
takes one block row per clock.  The writer stalls only when it would overwrite a slot the
reader still needs (it may run at most one MCU row ahead).
"""

from types import SimpleNamespace

from amaranth import Module, Signal, Mux, Cat, Const, signed, unsigned
from amaranth.lib import wiring, stream, data
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..small_ram import SmallRamFifo, check_small_ram
from .frame import FrameLayout
from .limits import DEFAULT_MAX_WIDTH
from .scaling import log_sizes
from .ycc_rgb import PARTIAL_SHAPE, chroma_offsets, chroma_partials, clamp_u8

__all__ = ["Raster", "RasterFrameLayout", "PixelsLayout", "PIXELS_PER_BEAT"]

PIXELS_PER_BEAT = 4
_GROUP = 8                      # pixels per luma word

#: ``log_scale``: a scaled decode (:mod:`.scaling`; 0: none), whose frame ``width`` and
#: ``height`` are already the scaled ones and whose blocks come from the reduced IDCTs.
RasterFrameLayout = data.StructLayout({"frame": FrameLayout, "fast": 1, "log_scale": 2})
RgbLayout = data.ArrayLayout(unsigned(8), 3)
PixelsLayout = data.StructLayout({
    "rgb": data.ArrayLayout(RgbLayout, PIXELS_PER_BEAT),
    "count": 3,             # pixels of this beat that are real, 1..4, lowest lanes first
    "last": 1,              # the image's final beat
})
_GroupLayout = data.StructLayout({
    "rgb": data.ArrayLayout(RgbLayout, _GROUP), "count": 4, "last": 1,
})


def _samples(word, n=_GROUP):
    return [word[8 * k:8 * k + 8] for k in range(n)]


#: The control token that travels with each memory read.
_Tok = data.StructLayout({"valid": 1, "phase": 1, "j": 11, "lower": 1, "count": 4, "last": 1})


class Raster(wiring.Component):
    """The last step of a JPEG core: blocks come out of the IDCT in scan order but a frame
    buffer or the host wants pixels in raster order, upsampled and in RGB, so this reorders
    them through MCU-row buffers and does libjpeg-turbo's upsampling and colour conversion
    on the way out.  ``small_ram``: its group FIFO in "block" or "lut" RAM (the line buffers
    are block RAM either way)."""

    def __init__(self, max_width=DEFAULT_MAX_WIDTH, small_ram="block"):
        problem = check_small_ram(small_ram)
        if max_width % 16 or max_width <= 0:
            problem = f"max_width must be a positive multiple of 16, not {max_width}"
        if problem:
            self._MustUse__silence = True
            raise ValueError(problem)
        self.max_width, self.small_ram = max_width, small_ram
        self.col_bits = max(1, (max_width // 8 - 1).bit_length())
        super().__init__({
            "frame": In(stream.Signature(RasterFrameLayout)),
            "blocks": In(stream.Signature(data.ArrayLayout(unsigned(8), 8))),
            "o": Out(stream.Signature(PixelsLayout)),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        mem = self._line_buffers(m)
        img = self._image_parameters(m)
        prog = self._frame_intake(m, img)
        w = self._writer(m, mem, img, prog)

        # Reader: line by line, one 8-pixel group per 2 clocks, through a pipeline whose
        # every stage moves on ``advance``.
        fifo, advance = self._group_fifo(m)
        rd = self._reader_position(m, img, prog)
        near_far = self._chroma_lines(m, img, rd)
        issue, tok0 = self._read_lines(m, mem, img, prog, rd, near_far, advance)
        tok1s, tok2, words = self._fetch_words(m, mem, advance, tok0)
        tok3, y3, cols = self._chroma_columns(m, img, advance, tok2, words)
        tok4, y4, up4 = self._upsample_chroma(m, img, advance, tok3, y3, cols)
        toks = self._colour(m, img, fifo, advance, tok4, y4, up4)
        held = self._output_beats(m, fifo)

        self._finish_image(m, img, prog, w, rd, fifo,
                           [issue, tok0, *tok1s, tok2, tok3, tok4, *toks], held)
        return m

    def _line_buffers(self, m):
        """MCU-row slots, one memory per component: luma in two slots of up to 16 lines,
        chroma in three slots of 8 (fancy upsampling needs the rows above and below)."""
        cols = 1 << self.col_bits
        # A slot is written only after its last read has reached the memory (``row_read0``),
        # so a read never meets a write to its address: without this yosys keeps a bypass
        # register and multiplexer per bit for that case (192 FF and some 190 LUT4 here).
        attrs = {"no_rw_check": 1}
        m.submodules.luma = luma = Memory(shape=64, depth=2 * 16 * cols, init=[], attrs=attrs)
        m.submodules.cb = cbm = Memory(shape=64, depth=3 * 8 * cols, init=[], attrs=attrs)
        m.submodules.cr = crm = Memory(shape=64, depth=3 * 8 * cols, init=[], attrs=attrs)
        lw, cbw, crw = (mem.write_port(granularity=8) for mem in (luma, cbm, crm))
        lr, cbr, crr = luma.read_port(), cbm.read_port(), crm.read_port()
        return SimpleNamespace(lw=lw, cbw=cbw, crw=crw, lr=lr, cbr=cbr, crr=crr)

    def _image_parameters(self, m):
        """Image parameters, fixed for the image and derived once as the frame is taken, so
        that no per-clock path starts at them."""
        f = Signal(FrameLayout)
        fast = Signal()
        active = Signal()
        gray = Signal()
        m.d.comb += gray.eq(f.components == 1)
        hh = Signal(2)                  # luma blocks across / down per MCU (1 for grayscale)
        vv = Signal(2)
        nwords = Signal(11)             # luma words per line: ceil(width / 8)
        cw = Signal(16)                 # real chroma width and height (T.81 A.1.1)
        ch = Signal(16)
        hu = Signal()                   # chroma upsampled 2x across / down (what the IDCT
        vu = Signal()                   # sizes leave: 4:2:0 scaled has none)
        hf = Signal()                   # horizontal fancy upsampling
        vf = Signal()                   # vertical fancy upsampling
        lpr = Signal(5)                 # output lines per MCU row: v x luma block size
        ls = Signal(2)                  # log2 of the luma and chroma block sizes
        cs = Signal(2)
        clast = Signal(3)               # the last chroma line of an MCU row
        nf = self.frame.payload.frame
        n_gray = nf.components == 1
        n_hh = Mux(n_gray, 1, nf.h)
        n_vv = Mux(n_gray, 1, nf.v)
        n_ls, n_cs = log_sizes(nf.components, nf.h, nf.v, self.frame.payload.log_scale)
        n_hu = (n_hh == 2) & (n_cs == n_ls)
        n_vu = (n_vv == 2) & (n_cs == n_ls)
        n_cw = Mux(n_hu, (nf.width + 1) >> 1, nf.width)
        # libjpeg-turbo upsamples plainly where the luma block is 1x1 (jdsample.c's do_fancy)
        n_fast = self.frame.payload.fast | (n_ls == 0)
        with m.If(self.frame.valid & self.frame.ready):
            m.d.sync += [
                hh.eq(n_hh), vv.eq(n_vv), nwords.eq((nf.width + 7) >> 3), cw.eq(n_cw),
                ch.eq(Mux(n_vu, (nf.height + 1) >> 1, nf.height)),
                hu.eq(n_hu), vu.eq(n_vu), ls.eq(n_ls), cs.eq(n_cs),
                clast.eq((Const(1, 4) << n_cs) - 1),
                hf.eq(~n_gray & n_hu & ~n_fast & (n_cw > 2)),
                vf.eq(~n_gray & n_vu & ~n_fast & ~(n_hu & (n_cw <= 2))),
                lpr.eq(Mux(n_vv == 2, 2, 1) << n_ls),
            ]
        return SimpleNamespace(f=f, fast=fast, active=active, gray=gray, hh=hh, vv=vv,
                               nwords=nwords, cw=cw, ch=ch, hu=hu, vu=vu, hf=hf, vf=vf,
                               lpr=lpr, ls=ls, cs=cs, clast=clast)

    def _frame_intake(self, m, img):
        """One image at a time: the frame is taken while idle, and the writer's and reader's
        progress is counted in MCU rows so that neither overruns the other."""
        rows_written = Signal(15)
        rows_read = Signal(15)
        writer_done = Signal()
        # gy == height, as a register: set at each line's end from the line's registered
        # ``last_line`` (_read_lines) and cleared with the image (_finish_image).  Compared on
        # the spot, it ran from the frame's height through the line set-up's enable into its
        # registers' carry chains in one clock.
        reader_done = Signal()
        out_idle = Signal()
        m.d.comb += [self.frame.ready.eq(~img.active), self.busy.eq(img.active)]
        with m.If(self.frame.valid & self.frame.ready):
            m.d.sync += [img.f.eq(self.frame.payload.frame), img.fast.eq(self.frame.payload.fast),
                         img.active.eq(1)]
        return SimpleNamespace(rows_written=rows_written, rows_read=rows_read,
                               writer_done=writer_done, reader_done=reader_done,
                               out_idle=out_idle)

    def _writer(self, m, mem, img, prog):
        """Block rows into the slots, one a clock, in scan order; it may run one MCU row
        ahead of the reader."""
        cb_ = self.col_bits
        f, ls, cs, hh, vv = img.f, img.ls, img.cs, img.hh, img.vv
        lw, cbw, crw = mem.lw, mem.cbw, mem.crw
        w_r = Signal(3)
        w_bx = Signal(1)
        w_by = Signal(1)
        w_comp = Signal(2)
        w_mcu = Signal(10)
        w_row = Signal(15)
        w_slot3 = Signal(2)
        m.d.comb += prog.writer_done.eq(w_row == f.mcuy)
        room = w_row < prog.rows_read + 2
        # ``ready`` is a register, a clock behind its conditions: from the row counters'
        # comparisons through the block skid buffer's handshake into the writer's counters
        # was twelve LUT levels (the two-file core's critical path in one placement).  Of
        # the conditions only the writer's own row end can turn them off (``rows_read``
        # only grows, and the image ends only once the writer is done), so that clock's
        # ``row_end`` holds it off too.
        row_end = Signal()
        m.d.sync += self.blocks.ready.eq(img.active & ~prog.writer_done & room & ~row_end)
        # A block row of ``size`` samples lands at sample ``x`` of its line: word x / 8, its
        # bytes from x mod 8 on (scaled blocks share words; 8x8 blocks fill whole ones).
        luma_block = w_comp == 0
        w_log = Mux(luma_block, ls, cs)
        x = Mux(luma_block, Mux(hh == 2, Cat(w_bx, w_mcu), w_mcu), w_mcu) << w_log
        offset = x[:3]
        line = Mux(luma_block, (w_by << ls) + w_r, w_r)[:4]
        mask = Signal(8)
        m.d.comb += mask.eq(((Const(1, 9) << (Const(1, 4) << w_log)) - 1)[:8] << offset)
        word = (self.blocks.payload.as_value() << (offset * 8))[:64]
        # The writes are registered before the memories: at large widths they are many block
        # RAMs spread over the chip, and ``ready``'s logic and the route to every write enable
        # do not fit in one clock together (issue 41: 51.9 MHz at 4096).  A row therefore
        # counts as written (``rows_written``, which lets the reader at it) a clock after its
        # last write was taken, once that write has reached the memories.
        take = Signal()
        m.d.comb += take.eq(self.blocks.valid & self.blocks.ready)
        m.d.sync += [
            lw.addr.eq(Cat(x[3:3 + cb_], line, w_row[0])), lw.data.eq(word),
            cbw.addr.eq(Cat(x[3:3 + cb_], line[:3], w_slot3)), cbw.data.eq(word),
            crw.addr.eq(Cat(x[3:3 + cb_], line[:3], w_slot3)), crw.data.eq(word),
            lw.en.eq(Mux(take & (w_comp == 0), mask, 0)),
            cbw.en.eq(Mux(take & (w_comp == 1), mask, 0)),
            crw.en.eq(Mux(take & (w_comp == 2), mask, 0)),
        ]
        row_landing = Signal()
        with m.If(row_landing):
            m.d.sync += [prog.rows_written.eq(prog.rows_written + 1), row_landing.eq(0)]
        last_block_row = w_r == (Const(1, 4) << w_log) - 1
        with m.If(take):
            m.d.sync += w_r.eq(w_r + 1)
            with m.If(last_block_row):
                m.d.sync += w_r.eq(0)
                with m.If(luma_block & (w_bx + 1 < hh)):
                    m.d.sync += w_bx.eq(w_bx + 1)
                with m.Elif(luma_block & (w_by + 1 < vv)):
                    m.d.sync += [w_bx.eq(0), w_by.eq(w_by + 1)]
                with m.Elif(w_comp + 1 < f.components):
                    m.d.sync += [w_bx.eq(0), w_by.eq(0), w_comp.eq(w_comp + 1)]
                with m.Else():
                    m.d.sync += [w_bx.eq(0), w_by.eq(0), w_comp.eq(0), w_mcu.eq(w_mcu + 1)]
                    with m.If(w_mcu + 1 == f.mcux):
                        m.d.comb += row_end.eq(1)
                        m.d.sync += [w_mcu.eq(0), w_row.eq(w_row + 1), row_landing.eq(1),
                                     w_slot3.eq(Mux(w_slot3 == 2, 0, w_slot3 + 1))]
        return SimpleNamespace(w_row=w_row, w_slot3=w_slot3)

    def _group_fifo(self, m):
        """The reader's pipeline runs only while the output FIFO has room for every group in
        flight, so that it never needs to stall stage by stage."""
        fifo_depth = 12
        m.submodules.fifo = fifo = SmallRamFifo(width=_GroupLayout.size, depth=fifo_depth,
                                                small_ram=self.small_ram)
        # Registered (it enables every stage): one clock late, so it leaves one more slot.
        advance = Signal()
        m.d.sync += advance.eq(fifo.level <= fifo_depth - 9)
        return fifo, advance

    @staticmethod
    def _reader_position(m, img, prog):
        """Where the reader is: MCU row, line, image line and group."""
        rk = Signal(15)                 # MCU row being read
        ry = Signal(5)                  # line within it
        gy = Signal(16)                 # line within the image
        rj = Signal(11)                 # group (luma word) within the line
        phase = Signal()                # 0: luma + near chroma, 1: far chroma
        slot3 = Signal(2)               # rk mod 3
        running = Signal()              # issuing the groups of a line
        setup = Signal()                # the line's parameters are in their registers
        return SimpleNamespace(rk=rk, ry=ry, gy=gy, rj=rj, phase=phase, slot3=slot3,
                               running=running, setup=setup)

    @staticmethod
    def _chroma_lines(m, img, rd):
        """Which chroma lines an output line needs: the near one, and the far one vertical
        fancy upsampling blends in (at an MCU row's edge, in the slot above or below)."""
        vu, vf, clast, ry, slot3 = img.vu, img.vf, img.clast, rd.ry, rd.slot3
        c_r_line = Mux(vu, ry >> 1, ry)[:3]         # chroma line within the MCU row
        big_r = Mux(vu, rd.gy >> 1, rd.gy)          # chroma line within the image
        c_lower = ry[0] & vu
        slot_prev = Mux(slot3 == 0, 2, slot3 - 1)
        slot_next = Mux(slot3 == 2, 0, slot3 + 1)
        c_far_slot = Signal(2)
        c_far_line = Signal(3)
        c_needs_next = Signal()
        with m.If(~vf):
            m.d.comb += [c_far_slot.eq(slot3), c_far_line.eq(c_r_line)]
        with m.Elif(~c_lower):
            with m.If(c_r_line != 0):
                m.d.comb += [c_far_slot.eq(slot3), c_far_line.eq(c_r_line - 1)]
            with m.Elif(rd.rk != 0):
                m.d.comb += [c_far_slot.eq(slot_prev), c_far_line.eq(clast)]
            with m.Else():
                m.d.comb += [c_far_slot.eq(slot3), c_far_line.eq(0)]
        with m.Else():
            with m.If(big_r + 1 >= img.ch):
                m.d.comb += [c_far_slot.eq(slot3), c_far_line.eq(c_r_line)]
            with m.Elif(c_r_line != clast):
                m.d.comb += [c_far_slot.eq(slot3), c_far_line.eq(c_r_line + 1)]
            with m.Else():
                m.d.comb += [c_far_slot.eq(slot_next), c_far_line.eq(0), c_needs_next.eq(1)]
        return SimpleNamespace(c_r_line=c_r_line, c_lower=c_lower, slot_next=slot_next,
                               c_far_slot=c_far_slot, c_far_line=c_far_line,
                               c_needs_next=c_needs_next)

    def _read_lines(self, m, mem, img, prog, rd, near_far, advance):
        """Issue the memory reads of each line, two a group, once the rows it needs are
        written; returns the token of each read as it is issued and as it reaches the
        memories (a clock later, with the read's registered address)."""
        cb_ = self.col_bits
        f, lr, cbr, crr = img.f, mem.lr, mem.cbr, mem.crr
        rk, ry, gy, rj, phase, slot3 = rd.rk, rd.ry, rd.gy, rd.rj, rd.phase, rd.slot3
        running, setup = rd.running, rd.setup
        rows_written = prog.rows_written
        # The line's parameters, registered in the clock before the line starts.
        r_line = Signal(3)
        lower = Signal()
        far_slot = Signal(2)
        far_line = Signal(3)
        needs_next = Signal()
        last_line = Signal()
        line_ready = Signal()
        m.d.comb += line_ready.eq((rows_written > rk) & (~needs_next | (rows_written > rk + 1)))

        chroma_col = Mux(img.hu, (rj + 1) >> 1, rj)[:cb_]
        last_group = rj + 1 == img.nwords
        issue = Signal(_Tok)
        remaining = (f.width - Cat(Const(0, 3), rj))[:16]
        m.d.comb += [
            issue.valid.eq(running), issue.phase.eq(phase), issue.j.eq(rj),
            issue.lower.eq(lower), issue.count.eq(Mux(remaining >= 8, 8, remaining)),
            issue.last.eq(last_group & last_line),
        ]
        # S0: the reads' addresses and token registered a clock before the memories take
        # them.  At large widths the memories are many block RAMs spread over the chip: the
        # address arithmetic and that route do not fit in one clock together (issue 20).
        tok0 = Signal(_Tok)
        luma_addr = Signal(len(lr.addr))
        chroma_addr = Signal(len(cbr.addr))
        # A row counts as read (``rows_read``, which lets the writer reuse its slot) only
        # once its last read has reached the memories: that read waits here for the next
        # advance, and the writer would otherwise overwrite what it is about to read.
        row_read0 = rd.row_read0 = Signal()
        with m.If(advance):
            m.d.sync += [
                tok0.eq(issue),
                luma_addr.eq(Cat(rj[:cb_], ry[:4], rk[0])),
                chroma_addr.eq(Cat(chroma_col, Mux(phase, far_line, r_line),
                                   Mux(phase, far_slot, slot3))),
                row_read0.eq(0),
            ]
            with m.If(row_read0):
                m.d.sync += prog.rows_read.eq(prog.rows_read + 1)
        m.d.comb += [
            lr.addr.eq(luma_addr), cbr.addr.eq(chroma_addr), crr.addr.eq(chroma_addr),
            lr.en.eq(advance), cbr.en.eq(advance), crr.en.eq(advance),
        ]
        active, reader_done = img.active, prog.reader_done
        with m.If(advance):
            with m.If(running):
                m.d.sync += phase.eq(~phase)
                with m.If(phase):
                    m.d.sync += rj.eq(rj + 1)
                    with m.If(last_group):
                        m.d.sync += [running.eq(0), setup.eq(0), rj.eq(0), gy.eq(gy + 1),
                                     ry.eq(ry + 1), reader_done.eq(last_line)]
                        with m.If((ry + 1 == img.lpr) | last_line):
                            m.d.sync += [ry.eq(0), rk.eq(rk + 1), row_read0.eq(1),
                                         slot3.eq(near_far.slot_next)]
            with m.Elif(active & ~reader_done & ~setup):
                m.d.sync += [setup.eq(1), r_line.eq(near_far.c_r_line),
                             lower.eq(near_far.c_lower), far_slot.eq(near_far.c_far_slot),
                             far_line.eq(near_far.c_far_line),
                             needs_next.eq(near_far.c_needs_next),
                             last_line.eq(gy + 1 == f.height)]
            with m.Elif(active & ~reader_done & line_ready):
                m.d.sync += [running.eq(1), phase.eq(0), rj.eq(0)]
        return issue, tok0

    @staticmethod
    def _fetch_words(m, mem, advance, tok0):
        """S1, S1b, S2: the memories' words taken into registers as they are (the block RAMs'
        outputs, 5.8 ns after the clock, reach them across the chip with no logic on the
        way); then the luma and near chroma words of clock A are held until the far chroma
        words of clock B arrive, and a group's words move on together."""
        lr, cbr, crr = mem.lr, mem.cbr, mem.crr
        # ---- S1: memory data with its token ------------------------------------------------
        tok1 = Signal(_Tok)
        # ---- S1b: the same, registered ------------------------------------------------------
        tok1b = Signal(_Tok)
        y1b, cb1b, cr1b = Signal(64), Signal(64), Signal(64)
        hold_y = Signal(64)
        hold_cb = Signal(64)
        hold_cr = Signal(64)
        # ---- S2: one group's words ---------------------------------------------------------
        tok2 = Signal(_Tok)
        y2 = Signal(64)
        near2 = [Signal(64, name="near2_cb"), Signal(64, name="near2_cr")]
        far2 = [Signal(64, name="far2_cb"), Signal(64, name="far2_cr")]
        with m.If(advance):
            m.d.sync += [tok1.eq(tok0), tok1b.eq(tok1), y1b.eq(lr.data), cb1b.eq(cbr.data),
                         cr1b.eq(crr.data)]
            with m.If(tok1b.valid & ~tok1b.phase):
                m.d.sync += [hold_y.eq(y1b), hold_cb.eq(cb1b), hold_cr.eq(cr1b)]
            m.d.sync += tok2.eq(Mux(tok1b.valid & tok1b.phase, tok1b, 0))
            with m.If(tok1b.valid & tok1b.phase):
                m.d.sync += [y2.eq(hold_y), near2[0].eq(hold_cb), near2[1].eq(hold_cr),
                             far2[0].eq(cb1b), far2[1].eq(cr1b)]
        return [tok1, tok1b], tok2, SimpleNamespace(y2=y2, near2=near2, far2=far2)

    @staticmethod
    def _chroma_columns(m, img, advance, tok2, words):
        """S3: column sums (the vertical blend), and for 2x horizontal the half word of chroma
        this group needs with a neighbour on each side."""
        vf, hu = img.vf, img.hu
        near2, far2 = words.near2, words.far2
        tok3 = Signal(_Tok)
        y3 = Signal(64)
        cur = [[Signal(10, name=f"cur{c}_{k}") for k in range(8)] for c in range(2)]
        prev = [[Signal(10, name=f"prev{c}_{k}") for k in range(8)] for c in range(2)]
        base3 = [[Signal(10, name=f"base3_{c}_{k}") for k in range(8)] for c in range(2)]
        left3 = [Signal(10, name=f"left3_{c}") for c in range(2)]
        right3 = [Signal(10, name=f"right3_{c}") for c in range(2)]
        # Whether each of the four chroma columns is the image's first or last, for S4's
        # edge rule: compared here, a clock early, so that S4 starts from registers and not
        # from a carry chain whose result reaches 16 adders in both channels.
        first3 = Signal(4)
        last3 = Signal(4)
        j2 = tok2.j
        with m.If(advance):
            m.d.sync += [tok3.eq(tok2), y3.eq(words.y2)]
            for p in range(4):
                i = Cat(Const(p, 2), j2)                          # chroma column
                m.d.sync += [first3[p].eq(i == 0), last3[p].eq(i + 1 >= img.cw)]
            with m.If(tok2.valid):
                for c in range(2):
                    near = _samples(near2[c])
                    far = _samples(far2[c])
                    new = [Mux(vf, (near[k] << 1) + near[k] + far[k], near[k] << 2)[:10]
                           for k in range(8)]          # shifts and adds: no multiplier
                    with m.If(~hu):
                        m.d.sync += [base3[c][k].eq(new[k]) for k in range(8)]
                    with m.Elif(j2 == 0):
                        m.d.sync += [base3[c][k].eq(new[k]) for k in range(8)]
                        m.d.sync += [left3[c].eq(new[0]), right3[c].eq(new[4])]
                        m.d.sync += [cur[c][k].eq(new[k]) for k in range(8)]
                    with m.Elif(j2[0]):
                        # Half 1 of the word before: its neighbours are word[3] and new[0].
                        m.d.sync += [base3[c][k].eq(cur[c][(k + 4) % 8]) for k in range(8)]
                        m.d.sync += [left3[c].eq(cur[c][3]), right3[c].eq(new[0])]
                        m.d.sync += [prev[c][k].eq(cur[c][k]) for k in range(8)]
                        m.d.sync += [cur[c][k].eq(new[k]) for k in range(8)]
                    with m.Else():
                        m.d.sync += [base3[c][k].eq(cur[c][k]) for k in range(8)]
                        m.d.sync += [left3[c].eq(prev[c][7]), right3[c].eq(cur[c][4])]
        return tok3, y3, SimpleNamespace(base3=base3, left3=left3, right3=right3,
                                         first3=first3, last3=last3)

    @staticmethod
    def _upsample_chroma(m, img, advance, tok3, y3, cols):
        """S4: upsampled chroma per pixel, with jdsample.c's rounding and edge rules."""
        vf, hu, hf = img.vf, img.hu, img.hf
        base3, left3, right3 = cols.base3, cols.left3, cols.right3
        tok4 = Signal(_Tok)
        y4 = Signal(64)
        up4 = [[Signal(8, name=f"up4_{c}_{k}") for k in range(8)] for c in range(2)]
        bias_v = Mux(tok3.lower, 2, 1)
        bias_even = Mux(vf, 8, 4)
        bias_odd = Mux(vf, 7, 8)
        with m.If(advance):
            m.d.sync += [tok4.eq(tok3), y4.eq(y3)]
            for c in range(2):
                q = base3[c]
                for p in range(4):
                    lft = Mux(cols.first3[p], q[p], left3[c] if p == 0 else q[p - 1])
                    rgt = Mux(cols.last3[p], q[p], right3[c] if p == 3 else q[p + 1])
                    triple = (q[p] << 1) + q[p]                   # not a multiplier
                    even = ((triple + lft + bias_even) >> 4)[:8]
                    odd = ((triple + rgt + bias_odd) >> 4)[:8]
                    with m.If(hu):
                        m.d.sync += [up4[c][2 * p].eq(Mux(hf, even, (q[p] >> 2)[:8])),
                                     up4[c][2 * p + 1].eq(Mux(hf, odd, (q[p] >> 2)[:8]))]
                for k in range(8):
                    with m.If(~hu):
                        m.d.sync += up4[c][k].eq(Mux(vf, (base3[c][k] + bias_v) >> 2,
                                                     base3[c][k] >> 2)[:8])
        return tok4, y4, up4

    @staticmethod
    def _colour(m, img, fifo, advance, tok4, y4, up4):
        """S5, S6, S7: colour conversion (partial products, offsets, sums and clamps), three
        stages so that no multiplier is needed; the group then goes into the FIFO.

        Four pixels an advance, not eight: a group reaches S4 at most every other advance
        (each takes two reads, clock A and clock B), so its low half is converted as it
        arrives and its high half, held, on the next advance, which always carries a bubble.
        The low half's colours wait in ``low7`` for the high half; the group enters the FIFO
        one advance later than with eight converters, which took 1.5k LUT4 and 300 CCU2 more
        (issue 20)."""
        half = _GROUP // 2
        # The high half waits here for the advance after its group's.
        held_tok = Signal(_Tok)
        held_y = Signal(8 * half)
        held_up = [[Signal(8, name=f"held_up_{c}_{k}") for k in range(half)] for c in range(2)]
        second = held_tok.valid
        tok5 = Signal(_Tok)                 # valid with the high half only
        low5 = Signal()                     # S5 holds a low half
        y5 = Signal(8 * half)
        parts5 = [[Signal(PARTIAL_SHAPE, name=f"part5_{k}_{n}") for n in range(8)]
                  for k in range(half)]
        with m.If(advance):
            m.d.sync += [
                held_tok.eq(Mux(tok4.valid, tok4, 0)),
                tok5.eq(Mux(second, held_tok, 0)),
                low5.eq(tok4.valid),
                y5.eq(Mux(second, held_y, y4[:8 * half])),
            ]
            with m.If(tok4.valid):
                m.d.sync += held_y.eq(y4[8 * half:])
                for c in range(2):
                    m.d.sync += [held_up[c][k].eq(up4[c][half + k]) for k in range(half)]
            for k in range(half):
                cb = Mux(second, held_up[0][k], up4[0][k])
                cr = Mux(second, held_up[1][k], up4[1][k])
                m.d.sync += [p.eq(v) for p, v in zip(parts5[k], chroma_partials(cb, cr))]
        tok6 = Signal(_Tok)
        low6 = Signal()
        y6 = Signal(8 * half)
        offsets6 = [[Signal(signed(10), name=f"off6_{k}_{c}") for c in range(3)]
                    for k in range(half)]
        with m.If(advance):
            m.d.sync += [tok6.eq(tok5), low6.eq(low5), y6.eq(y5)]
            for k in range(half):
                m.d.sync += [o.eq(v) for o, v in zip(offsets6[k], chroma_offsets(parts5[k]))]
        tok7 = Signal(_Tok)
        low7 = Signal(data.ArrayLayout(RgbLayout, half))     # the group's low half, waiting
        rgb7 = Signal(data.ArrayLayout(RgbLayout, half))
        rgb6 = [[Mux(img.gray, y, clamp_u8(y + offsets6[k][c])) for c in range(3)]
                for k, y in enumerate(_samples(y6, half))]
        with m.If(advance):
            m.d.sync += tok7.eq(tok6)
            for k in range(half):
                for c in range(3):
                    m.d.sync += rgb7[k][c].eq(rgb6[k][c])
                    with m.If(low6):
                        m.d.sync += low7[k][c].eq(rgb6[k][c])
        group_in = Signal(_GroupLayout)
        m.d.comb += [group_in.rgb.eq(Cat(low7, rgb7)), group_in.count.eq(tok7.count),
                     group_in.last.eq(tok7.last),
                     fifo.w_data.eq(group_in), fifo.w_en.eq(advance & tok7.valid)]
        return [held_tok, tok5, tok6, tok7]

    def _output_beats(self, m, fifo):
        """Each group of 8 as one or two beats of 4: the core's output width.  The group is
        split from a register of its own, filled from the FIFO: the FIFO's block RAM gives
        its word 5.6 ns after the clock, too late to decide the split and the FIFO's read
        in the same clock.  Returns whether that register holds a group."""
        group_out = Signal(_GroupLayout)
        held = Signal()
        second = Signal()
        count = group_out.count
        final_beat = Mux(second, 1, count <= PIXELS_PER_BEAT)
        take = Signal()
        m.d.comb += [
            self.o.valid.eq(held),
            self.o.payload.count.eq(Mux(second, count - PIXELS_PER_BEAT,
                                        Mux(count > PIXELS_PER_BEAT, PIXELS_PER_BEAT, count))),
            self.o.payload.last.eq(group_out.last & final_beat),
            take.eq(~held | (self.o.ready & final_beat)),
            fifo.r_en.eq(take),
        ]
        with m.If(take):
            m.d.sync += [group_out.eq(fifo.r_data), held.eq(fifo.r_rdy)]
        for k in range(PIXELS_PER_BEAT):
            m.d.comb += self.o.payload.rgb[k].eq(
                Mux(second, group_out.rgb[k + PIXELS_PER_BEAT], group_out.rgb[k]))
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += second.eq(~final_beat)
        return held

    @staticmethod
    def _finish_image(m, img, prog, w, rd, fifo, toks, held):
        """The image is finished when every pixel has left: only then may the next frame
        reuse the slots."""
        pipeline_empty = ~Cat(*[tok.valid for tok in toks]).any()
        m.d.comb += prog.out_idle.eq(pipeline_empty & ~fifo.r_rdy & (fifo.level == 0) & ~held)
        with m.If(img.active & prog.writer_done & prog.reader_done & prog.out_idle):
            m.d.sync += [img.active.eq(0), w.w_row.eq(0), prog.rows_written.eq(0),
                         prog.rows_read.eq(0), w.w_slot3.eq(0), rd.rk.eq(0), rd.ry.eq(0),
                         rd.gy.eq(0), rd.slot3.eq(0), rd.setup.eq(0), rd.row_read0.eq(0),
                         prog.reader_done.eq(0)]
