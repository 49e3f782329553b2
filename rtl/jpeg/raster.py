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
(model: ``sim/jpeg_upsample.py``); colour conversion is ``ycc_rgb.ycc_to_rgb``.

Throughput: 4 pixels per clock within a line, a couple of clocks between lines; the writer
takes one block row per clock.  The writer stalls only when it would overwrite a slot the
reader still needs (it may run at most one MCU row ahead).
"""

from amaranth import Module, Signal, Mux, Cat, Const, signed, unsigned
from amaranth.lib import wiring, stream, data
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

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


class Raster(wiring.Component):
    def __init__(self, max_width=DEFAULT_MAX_WIDTH):
        if max_width % 16 or max_width <= 0:
            self._MustUse__silence = True
            raise ValueError(f"max_width must be a positive multiple of 16, not {max_width}")
        self.max_width = max_width
        self.col_bits = max(1, (max_width // 8 - 1).bit_length())
        super().__init__({
            "frame": In(stream.Signature(RasterFrameLayout)),
            "blocks": In(stream.Signature(data.ArrayLayout(unsigned(8), 8))),
            "o": Out(stream.Signature(PixelsLayout)),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cb_ = self.col_bits
        cols = 1 << cb_

        m.submodules.luma = luma = Memory(shape=64, depth=2 * 16 * cols, init=[])
        m.submodules.cb = cbm = Memory(shape=64, depth=3 * 8 * cols, init=[])
        m.submodules.cr = crm = Memory(shape=64, depth=3 * 8 * cols, init=[])
        lw, cbw, crw = (mem.write_port(granularity=8) for mem in (luma, cbm, crm))
        lr, cbr, crr = luma.read_port(), cbm.read_port(), crm.read_port()

        # ---- Image parameters, fixed for the image ----------------------------------------
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
        # Derived once per image, as the frame is taken, so no per-clock path starts at them.
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

        rows_written = Signal(15)
        rows_read = Signal(15)
        writer_done = Signal()
        reader_done = Signal()
        out_idle = Signal()
        m.d.comb += [self.frame.ready.eq(~active), self.busy.eq(active)]
        with m.If(self.frame.valid & self.frame.ready):
            m.d.sync += [f.eq(self.frame.payload.frame), fast.eq(self.frame.payload.fast),
                         active.eq(1)]

        # ---- Writer: block rows into the slots ------------------------------------------------
        w_r = Signal(3)
        w_bx = Signal(1)
        w_by = Signal(1)
        w_comp = Signal(2)
        w_mcu = Signal(10)
        w_row = Signal(15)
        w_slot3 = Signal(2)
        m.d.comb += writer_done.eq(w_row == f.mcuy)
        room = w_row < rows_read + 2
        m.d.comb += self.blocks.ready.eq(active & ~writer_done & room)
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
        m.d.comb += [
            lw.addr.eq(Cat(x[3:3 + cb_], line, w_row[0])), lw.data.eq(word),
            cbw.addr.eq(Cat(x[3:3 + cb_], line[:3], w_slot3)), cbw.data.eq(word),
            crw.addr.eq(Cat(x[3:3 + cb_], line[:3], w_slot3)), crw.data.eq(word),
        ]
        last_block_row = w_r == (Const(1, 4) << w_log) - 1
        with m.If(self.blocks.valid & self.blocks.ready):
            m.d.comb += [lw.en.eq(Mux(w_comp == 0, mask, 0)), cbw.en.eq(Mux(w_comp == 1, mask, 0)),
                         crw.en.eq(Mux(w_comp == 2, mask, 0))]
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
                        m.d.sync += [w_mcu.eq(0), w_row.eq(w_row + 1), rows_written.eq(w_row + 1),
                                     w_slot3.eq(Mux(w_slot3 == 2, 0, w_slot3 + 1))]

        # ---- Reader: line by line, one 8-pixel group per 2 clocks ---------------------------
        fifo_depth = 10
        m.submodules.fifo = fifo = SyncFIFOBuffered(width=_GroupLayout.size, depth=fifo_depth)
        # Registered (it enables every stage): one clock late, so it leaves one more slot.
        advance = Signal()
        m.d.sync += advance.eq(fifo.level <= fifo_depth - 7)

        rk = Signal(15)                 # MCU row being read
        ry = Signal(5)                  # line within it
        gy = Signal(16)                 # line within the image
        rj = Signal(11)                 # group (luma word) within the line
        phase = Signal()                # 0: luma + near chroma, 1: far chroma
        slot3 = Signal(2)               # rk mod 3
        running = Signal()              # issuing the groups of a line
        setup = Signal()                # the line's parameters are in their registers
        m.d.comb += reader_done.eq(gy == f.height)

        c_r_line = Mux(vu, ry >> 1, ry)[:3]         # chroma line within the MCU row
        big_r = Mux(vu, gy >> 1, gy)                # chroma line within the image
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
            with m.Elif(rk != 0):
                m.d.comb += [c_far_slot.eq(slot_prev), c_far_line.eq(clast)]
            with m.Else():
                m.d.comb += [c_far_slot.eq(slot3), c_far_line.eq(0)]
        with m.Else():
            with m.If(big_r + 1 >= ch):
                m.d.comb += [c_far_slot.eq(slot3), c_far_line.eq(c_r_line)]
            with m.Elif(c_r_line != clast):
                m.d.comb += [c_far_slot.eq(slot3), c_far_line.eq(c_r_line + 1)]
            with m.Else():
                m.d.comb += [c_far_slot.eq(slot_next), c_far_line.eq(0), c_needs_next.eq(1)]
        # The line's parameters, registered in the clock before the line starts.
        r_line = Signal(3)
        lower = Signal()
        far_slot = Signal(2)
        far_line = Signal(3)
        needs_next = Signal()
        last_line = Signal()
        line_ready = Signal()
        m.d.comb += line_ready.eq((rows_written > rk) & (~needs_next | (rows_written > rk + 1)))

        chroma_col = Mux(hu, (rj + 1) >> 1, rj)[:cb_]
        last_group = rj + 1 == nwords
        # The control token that travels with each memory read.
        Tok = data.StructLayout({"valid": 1, "phase": 1, "j": 11, "lower": 1, "count": 4,
                                 "last": 1})
        tok0 = Signal(Tok)
        remaining = (f.width - Cat(Const(0, 3), rj))[:16]
        m.d.comb += [
            lr.addr.eq(Cat(rj[:cb_], ry[:4], rk[0])),
            cbr.addr.eq(Cat(chroma_col, Mux(phase, far_line, r_line), Mux(phase, far_slot, slot3))),
            crr.addr.eq(cbr.addr),
            lr.en.eq(advance), cbr.en.eq(advance), crr.en.eq(advance),
            tok0.valid.eq(running), tok0.phase.eq(phase), tok0.j.eq(rj), tok0.lower.eq(lower),
            tok0.count.eq(Mux(remaining >= 8, 8, remaining)),
            tok0.last.eq(last_group & last_line),
        ]
        with m.If(advance):
            with m.If(running):
                m.d.sync += phase.eq(~phase)
                with m.If(phase):
                    m.d.sync += rj.eq(rj + 1)
                    with m.If(last_group):
                        m.d.sync += [running.eq(0), setup.eq(0), rj.eq(0), gy.eq(gy + 1),
                                     ry.eq(ry + 1)]
                        with m.If((ry + 1 == lpr) | last_line):
                            m.d.sync += [ry.eq(0), rk.eq(rk + 1), rows_read.eq(rk + 1),
                                         slot3.eq(slot_next)]
            with m.Elif(active & ~reader_done & ~setup):
                m.d.sync += [setup.eq(1), r_line.eq(c_r_line), lower.eq(c_lower),
                             far_slot.eq(c_far_slot), far_line.eq(c_far_line),
                             needs_next.eq(c_needs_next), last_line.eq(gy + 1 == f.height)]
            with m.Elif(active & ~reader_done & line_ready):
                m.d.sync += [running.eq(1), phase.eq(0), rj.eq(0)]

        # ---- S1: memory data with its token ------------------------------------------------
        tok1 = Signal(Tok)
        hold_y = Signal(64)
        hold_cb = Signal(64)
        hold_cr = Signal(64)
        # ---- S2: one group's words ---------------------------------------------------------
        tok2 = Signal(Tok)
        y2 = Signal(64)
        near2 = [Signal(64, name="near2_cb"), Signal(64, name="near2_cr")]
        far2 = [Signal(64, name="far2_cb"), Signal(64, name="far2_cr")]
        with m.If(advance):
            m.d.sync += tok1.eq(tok0)
            with m.If(tok1.valid & ~tok1.phase):
                m.d.sync += [hold_y.eq(lr.data), hold_cb.eq(cbr.data), hold_cr.eq(crr.data)]
            m.d.sync += tok2.eq(Mux(tok1.valid & tok1.phase, tok1, 0))
            with m.If(tok1.valid & tok1.phase):
                m.d.sync += [y2.eq(hold_y), near2[0].eq(hold_cb), near2[1].eq(hold_cr),
                             far2[0].eq(cbr.data), far2[1].eq(crr.data)]

        # ---- S3: column sums, and the chroma window for 2x horizontal ------------------------
        tok3 = Signal(Tok)
        y3 = Signal(64)
        cur = [[Signal(10, name=f"cur{c}_{k}") for k in range(8)] for c in range(2)]
        prev = [[Signal(10, name=f"prev{c}_{k}") for k in range(8)] for c in range(2)]
        base3 = [[Signal(10, name=f"base3_{c}_{k}") for k in range(8)] for c in range(2)]
        left3 = [Signal(10, name=f"left3_{c}") for c in range(2)]
        right3 = [Signal(10, name=f"right3_{c}") for c in range(2)]
        j2 = tok2.j
        with m.If(advance):
            m.d.sync += [tok3.eq(tok2), y3.eq(y2)]
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

        # ---- S4: upsampled chroma per pixel ------------------------------------------------
        tok4 = Signal(Tok)
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
                    i = Cat(Const(p, 2), tok3.j)                  # chroma column
                    lft = Mux(i == 0, q[p], left3[c] if p == 0 else q[p - 1])
                    rgt = Mux(i + 1 >= cw, q[p], right3[c] if p == 3 else q[p + 1])
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

        # ---- S5, S6, S7: colour (partial products, offsets, sums and clamps) -----------------
        tok5 = Signal(Tok)
        y5 = Signal(64)
        parts5 = [[Signal(PARTIAL_SHAPE, name=f"part5_{k}_{n}") for n in range(8)]
                  for k in range(_GROUP)]
        with m.If(advance):
            m.d.sync += [tok5.eq(tok4), y5.eq(y4)]
            for k in range(_GROUP):
                m.d.sync += [p.eq(v) for p, v in zip(parts5[k],
                                                       chroma_partials(up4[0][k], up4[1][k]))]
        tok6 = Signal(Tok)
        y6 = Signal(64)
        offsets6 = [[Signal(signed(10), name=f"off6_{k}_{c}") for c in range(3)]
                    for k in range(_GROUP)]
        with m.If(advance):
            m.d.sync += [tok6.eq(tok5), y6.eq(y5)]
            for k in range(_GROUP):
                m.d.sync += [o.eq(v) for o, v in zip(offsets6[k], chroma_offsets(parts5[k]))]
        tok7 = Signal(Tok)
        rgb7 = Signal(data.ArrayLayout(RgbLayout, _GROUP))
        with m.If(advance):
            m.d.sync += tok7.eq(tok6)
            for k, y in enumerate(_samples(y6)):
                for c in range(3):
                    m.d.sync += rgb7[k][c].eq(Mux(gray, y, clamp_u8(y + offsets6[k][c])))
        group_in = Signal(_GroupLayout)
        m.d.comb += [group_in.rgb.eq(rgb7), group_in.count.eq(tok7.count),
                     group_in.last.eq(tok7.last),
                     fifo.w_data.eq(group_in), fifo.w_en.eq(advance & tok7.valid)]

        # ---- Output: each group as one or two beats of 4 ------------------------------------
        group_out = Signal(_GroupLayout)
        second = Signal()
        m.d.comb += group_out.eq(fifo.r_data)
        count = group_out.count
        final_beat = Mux(second, 1, count <= PIXELS_PER_BEAT)
        m.d.comb += [
            self.o.valid.eq(fifo.r_rdy),
            self.o.payload.count.eq(Mux(second, count - PIXELS_PER_BEAT,
                                        Mux(count > PIXELS_PER_BEAT, PIXELS_PER_BEAT, count))),
            self.o.payload.last.eq(group_out.last & final_beat),
            fifo.r_en.eq(self.o.ready & final_beat),
        ]
        for k in range(PIXELS_PER_BEAT):
            m.d.comb += self.o.payload.rgb[k].eq(
                Mux(second, group_out.rgb[k + PIXELS_PER_BEAT], group_out.rgb[k]))
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += second.eq(~final_beat)

        # ---- Finished: every pixel has left -------------------------------------------------
        pipeline_empty = ~(tok0.valid | tok1.valid | tok2.valid | tok3.valid | tok4.valid
                           | tok5.valid | tok6.valid | tok7.valid)
        m.d.comb += out_idle.eq(pipeline_empty & ~fifo.r_rdy & (fifo.level == 0))
        with m.If(active & writer_done & reader_done & out_idle):
            m.d.sync += [active.eq(0), w_row.eq(0), rows_written.eq(0), rows_read.eq(0),
                         w_slot3.eq(0), rk.eq(0), ry.eq(0), gy.eq(0), slot3.eq(0), setup.eq(0)]
        return m
