"""Huffman decoding of one interleaved baseline scan: tokens in, coefficients out.

Tables arrive as the bodies of DHT segments (the bytes after the length) and are turned into
decoding tables as they stream in (:mod:`.huffman_tables`).

Decoding resolves one symbol (code and magnitude bits) per clock.  Only what the next symbol
depends on stays in the one-clock loop: the bit window, the coefficient index and which
table comes next.  Per clock the loop compares the window's first bits with the current
tables' code limits (sixteen comparators per class give the code length, one-hot), reads for
every length in parallel the fast-table entry that length's code would select (bits taken by
code and magnitude, zero run, EOB), picks the entry of the matching length and shifts the
window by its bit count.  Everything else (the symbol itself, the magnitude bits, the value,
the DC prediction and every error check) happens in a pipeline behind the loop, from the 27
bits the loop recorded at the symbol's start.  The loop's logic has a fixed LUT shape
(:mod:`.lutmap`); its critical path is comparator, one-hot length, three-level pick, five-level
shift.

The loop runs ahead speculatively: at the end of a segment (a marker or the end of the data
next in line) it reads zeros past the last bit, and the pipeline, which checks every symbol
in the golden model's order (sim/jpeg_entropy.py), stops the scan at the first one that was
not really there.  The restart/end-of-scan checks also go through the pipeline, so they keep
their place after the last symbol of their interval.  A code whose length has more than 16
codes (a *slow* entry, in practice the 16-bit codes of the standard AC tables) costs five
extra clocks: the pipeline looks its symbol up and patches the fast table for one clock.

Output: one beat per coefficient written (DC always, AC when nonzero; ``zz`` is the zigzag
index) and ``end`` on the beat that closes a block; a block closed by EOB after its last
nonzero coefficient gets an extra beat with ``write`` low.  Each scan ends with one ``done``
beat: the status (:class:`JpegStatus`) and the marker that ended the scan.  Latency: the
pipeline and an output FIFO; ``done`` still follows the last coefficient beat.
"""

from amaranth import Module, Signal, Array, Mux, Cat, Const, signed
from amaranth.lib import wiring, stream, data
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from .huffman_tables import DhtLayout, FastEntry, HuffmanTables, PatchLayout
from .lutmap import any_of, kept, select, shift_left
from .status import JpegStatus as S
from .unstuff import TokenKind, TokenLayout

__all__ = ["HuffmanDecoder", "ScanLayout", "CoefficientLayout", "DoneLayout", "DhtLayout"]

MAX_COMPONENTS = 3

ScanLayout = data.StructLayout({
    "components": 2,                                   # 1 or 3
    "h": data.ArrayLayout(2, MAX_COMPONENTS),          # blocks per MCU, across (1 or 2)
    "v": data.ArrayLayout(2, MAX_COMPONENTS),          # blocks per MCU, down
    "td": data.ArrayLayout(2, MAX_COMPONENTS),         # DC table of each component
    "ta": data.ArrayLayout(2, MAX_COMPONENTS),         # AC table
    "mcus": 24,                                        # MCUs in the scan
    "restart_interval": 16,                            # MCUs per restart interval, 0 = none
})
CoefficientLayout = data.StructLayout({
    "value": signed(16), "zz": 6, "component": 2, "write": 1, "end": 1,
})
DoneLayout = data.StructLayout({"status": 8, "marker": 8})

_BUF = 64           # bit window width
_NEED = 27          # bits the loop wants before it decodes: a 16-bit code, 11 magnitude bits
_WIN = 27           # bits recorded per symbol for the pipeline
_FIFO = 16          # output beats buffered
_INFLIGHT = 7       # records that may still write the FIFO after the loop saw its level


def _or_tree(values):
    """OR of many values as a balanced tree (a chain would be as deep as it is long)."""
    values = list(values)
    while len(values) > 1:
        values = [values[i] | values[i + 1] if i + 1 < len(values) else values[i]
                  for i in range(0, len(values), 2)]
    return values[0]


class _Kind:
    SYMBOL = 0          # a symbol the loop consumed
    SLOW = 1            # a symbol the loop could not resolve: look it up and feed it back
    RESTART = 2         # a good RSTn: reset the DC predictions
    FINAL = 3           # the scan's verdict (status, marker)


#: What the loop hands to the pipeline, once per clock at most.
_Record = data.StructLayout({
    "kind": 2,
    "onehot": 16,       # the code length, one-hot (bit l - 1: length l); 0: no code matches
    "window": _WIN,     # the bits from the symbol's first one on (first in the top bit)
    "table": 3,
    "k": 6,             # coefficient index before the symbol
    "is_dc": 1,
    "comp": 2,
    "avail": 7,         # bits really there from the symbol's first one on (when < _NEED)
    "rst_ahead": 1,     # a restart marker is next in line (a truncation is BAD_RESTART)
    "status": 8,        # FINAL
    "marker": 8,        # FINAL
})


class HuffmanDecoder(wiring.Component):
    dht: In(stream.Signature(DhtLayout))
    scan: In(stream.Signature(ScanLayout))
    tokens: In(stream.Signature(TokenLayout))
    coef: Out(stream.Signature(CoefficientLayout))
    done: Out(stream.Signature(DoneLayout))
    busy: Out(1)
    symbols_decoded: Out(32)      # counter: Huffman symbols resolved since reset

    def elaborate(self, platform):
        m = Module()
        m.submodules.tables = tables = HuffmanTables()
        m.submodules.fifo = fifo = SyncFIFOBuffered(width=CoefficientLayout.size, depth=_FIFO)
        wiring.connect(m, wiring.flipped(self.dht), tables.dht)

        scanning = Signal()
        finishing = Signal()                # result decided, waiting for the output to drain
        patching = Signal()                 # a slow symbol's patch is still in a fast table
        m.d.comb += [tables.locked.eq(scanning | patching),
                     self.scan.ready.eq(~scanning & ~finishing & ~self.done.valid & tables.idle
                                        & ~patching),
                     self.busy.eq(scanning)]

        # ---- Output: coefficient beats through a FIFO; done after the last of them ----------
        m.d.comb += [self.coef.valid.eq(fifo.r_rdy), self.coef.payload.eq(fifo.r_data),
                     fifo.r_en.eq(self.coef.ready)]
        with m.If(self.done.valid & self.done.ready):
            m.d.sync += self.done.valid.eq(0)
        with m.If(finishing & (fifo.level == 0)):
            m.d.sync += [finishing.eq(0), self.done.valid.eq(1)]

        # ---- Scan state --------------------------------------------------------------------
        cfg = Signal(ScanLayout)
        blocks_here = Array(Signal(4, name=f"blocks_c{c}") for c in range(MAX_COMPONENTS))
        comp = Signal(2)
        blk = Signal(2)                     # block within the component's part of the MCU
        k = Signal(6)                       # next coefficient (zigzag), 0 = DC
        is_dc = Signal(init=1)
        mcus_left = Signal(24)
        in_interval = Signal(16)
        rst_next = Signal(3)
        phase = Signal(2)                   # 0: decode, 1: restart check, 2: end check, 3: stop
        decoding = Signal()                 # scanning and phase 0, as a register of its own
        fresh = Signal()                    # the window was just emptied (scan start, RSTn)
        slow_wait = Signal()                # waiting for a slow symbol's entry to be patched in
        patch = Signal(PatchLayout)         # that entry, and where it goes
        patch_write = Signal()              # ... written this clock
        patched = Signal()                  # ... in the table until the loop has used it
        rec = Signal(_Record)               # the loop's output register
        rec_valid = Signal()
        preds = Array(Signal(16, name=f"pred{c}") for c in range(MAX_COMPONENTS))

        # The flags that stop the loop are set and cleared through their next values, from
        # which ``go`` (the loop may run next clock) is registered: the loop's enable then costs
        # one LUT at the start of the clock instead of three.
        flags = {"decoding": decoding, "fresh": fresh, "slow_wait": slow_wait}
        nxt = {name: Signal(name=f"{name}_next") for name in flags}
        m.d.comb += [nxt[name].eq(flag) for name, flag in flags.items()]

        def setf(name, value):
            m.d.comb += nxt[name].eq(value)

        def finish(status, marker=0):
            setf("decoding", 0)
            m.d.sync += [scanning.eq(0), finishing.eq(1),
                         self.done.payload.status.eq(status), self.done.payload.marker.eq(marker)]

        # Where the scan goes after the current block (all from registers).
        last_blk = ~(blk + 1 < blocks_here[comp])
        last_comp = ~(comp + 1 < cfg.components)
        next_comp = Mux(last_blk, Mux(last_comp, 0, comp + 1), comp)
        mcu_end = last_blk & last_comp
        ends_scan = mcu_end & (mcus_left == 1)
        ends_interval = mcu_end & (cfg.restart_interval != 0) & (in_interval + 1 == cfg.restart_interval)

        # The two tables the next symbol may need, loaded every clock: the DC table of the
        # block whose DC comes next (this block while at its DC, else the next block) and the
        # AC table of this block.  ``floor`` (see HuffmanTables.floor) is what the comparators
        # compare the inverted window with.
        floor_dc = Signal(data.ArrayLayout(17, 16))
        floor_ac = Signal(data.ArrayLayout(17, 16))
        tsel_dc = Signal(2)
        tsel_ac = Signal(2)
        dc_comp = Mux(is_dc, comp, next_comp)
        m.d.sync += [tsel_dc.eq(cfg.td[dc_comp]), tsel_ac.eq(cfg.ta[comp])]
        # A mux tree over four rows at fixed offsets, not a variable index into ``floor``:
        # the same function (10 LUT4 more out of context), but Verilator compiles the index
        # into a 2176-bit shift per clock, which cost the simulated board 2 % (docs/sim-board.md).
        for sel, floor, base in ((cfg.td[dc_comp], floor_dc, 0), (cfg.ta[comp], floor_ac, 4)):
            f = [tables.floor[base + t] for t in range(4)]
            m.d.sync += floor.eq(Mux(sel[1], Mux(sel[0], f[3], f[2]), Mux(sel[0], f[1], f[0])))

        # ---- Bit window ------------------------------------------------------------------
        # ``window`` holds the next bits, the first in the top bit, zeros below the ``nvalid``
        # valid ones.  Its first 16 bits have private copies for the DC and AC comparators and
        # the fast-table addresses, to cut the fanout at the start of the loop.  Yosys merges
        # registers whose next value is the same function, so the copies differ from the
        # window and from each other in polarity or in having a clock enable.
        window = Signal(_BUF)
        peek_dc_n = Signal(16)              # inverted
        peek_ac_n = Signal(16)              # inverted, enabled while scanning
        peek_ram = Signal(16)               # enabled while scanning
        nvalid = Signal(7)
        enough = Signal()                   # nvalid >= _NEED
        head = self.tokens.payload
        segment_over = Signal()             # a marker or the end of the data is next in line
        m.d.sync += segment_over.eq(self.tokens.valid & (head.kind != TokenKind.DATA))

        # ---- The loop: one symbol per clock -------------------------------------------------
        # Per clock: the comparators find the code length (one-hot), the fast tables give
        # every length's entry, the length picks one, and the window shifts by its bit count.
        # The logic is cut into kept LUT-sized pieces (see lutmap) so that it maps as written.
        go = Signal()
        runnable = kept(m, go & (enough | segment_over), "runnable")
        run_dc = kept(m, runnable & is_dc, "run_dc")
        run_ac = kept(m, runnable & ~is_dc, "run_ac")

        m.d.comb += [tables.fast_dc_table.eq(tsel_dc), tables.fast_ac_table.eq(tsel_ac),
                     tables.fast_bits.eq(peek_ram)]
        hit_dc = [Const(0)] + [peek_dc_n[16 - l:] >= floor_dc[l - 1][:l + 1] for l in range(1, 17)]
        hit_ac = [Const(0)] + [peek_ac_n[16 - l:] >= floor_ac[l - 1][:l + 1] for l in range(1, 17)]
        # The code's length, one-hot (the thermometer's first 1); all zero when not running.
        oh_dc = kept(m, Cat(*[run_dc & hit_dc[l] & ~hit_dc[l - 1] for l in range(1, 17)]), "oh_dc")
        oh_ac = kept(m, Cat(*[run_ac & hit_ac[l] & ~hit_ac[l - 1] for l in range(1, 17)]), "oh_ac")
        run = Signal()                      # a symbol was decoded (or found slow) this clock
        m.d.comb += run.eq(runnable)

        # Per length, in parallel with the comparators: the entries, and where an AC symbol of
        # that length would take the coefficient index (a DC symbol always leaves it at 1).
        entries = data.ArrayLayout(FastEntry, 16)
        ent_dc = kept(m, tables.fast_dc, "ent_dc", entries)
        ent_ac = kept(m, tables.fast_ac, "ent_ac", entries)
        k_sums = [k + e.run + e.adv for e in ent_ac]
        done_ac = kept(m, Cat(*[e.eob | ks[6] for e, ks in zip(ent_ac, k_sums)]), "block_done")
        k_next_ac = data.View(data.ArrayLayout(6, 16), kept(m, Cat(*[
            Mux(done_ac[l] | ~e.adv, 0, ks[:6]) for l, (e, ks) in enumerate(zip(ent_ac, k_sums))]),
            "k_next"))

        # The length picks one of them: and-or trees over the 32 one-hot lengths.
        _Step = data.StructLayout({"total": 5, "adv": 1, "k_next": 6, "block_done": 1})
        steps_dc = [Cat(e.total, e.adv, e.adv, Const(0, 5), Const(0, 1)) for e in ent_dc]
        steps_ac = [Cat(e.total, e.adv, k_next_ac[l], done_ac[l]) for l, e in enumerate(ent_ac)]
        chosen = data.View(_Step, select(m, [(oh_dc[l], steps_dc[l]) for l in range(16)]
                                         + [(oh_ac[l], steps_ac[l]) for l in range(16)], "step"))
        total, adv, k_next, block_done = (chosen.total, chosen.adv, chosen.k_next,
                                          chosen.block_done)
        matched = any_of(m, list(oh_dc) + list(oh_ac), "matched")
        slow = Signal()
        m.d.comb += slow.eq(matched & ~adv)

        with m.If(adv):
            m.d.sync += [k.eq(k_next), is_dc.eq(block_done)]
        with m.If(block_done):
            with m.If(last_blk):
                m.d.sync += blk.eq(0)
            with m.Else():
                m.d.sync += blk.eq(blk + 1)
            m.d.sync += comp.eq(next_comp)
            with m.If(mcu_end):
                m.d.sync += [mcus_left.eq(mcus_left - 1), in_interval.eq(in_interval + 1)]
            with m.If(ends_scan):
                m.d.sync += phase.eq(2)
                setf("decoding", 0)
            with m.Elif(ends_interval):
                m.d.sync += phase.eq(1)
                setf("decoding", 0)
        with m.If(slow):
            setf("slow_wait", 1)
        setf("fresh", 0)

        # The record of this clock's symbol.
        m.d.sync += rec_valid.eq(run)
        m.d.sync += [rec.kind.eq(Mux(slow, _Kind.SLOW, _Kind.SYMBOL)),
                     rec.onehot.eq(oh_dc | oh_ac),
                     rec.window.eq(window[_BUF - _WIN:]),
                     rec.table.eq(Mux(is_dc, Cat(tsel_dc, Const(0, 1)), Cat(tsel_ac, Const(1, 1)))),
                     rec.k.eq(k), rec.is_dc.eq(is_dc), rec.comp.eq(comp), rec.avail.eq(nvalid),
                     rec.rst_ahead.eq(head.kind == TokenKind.RESTART)]

        # The window: refill one byte below the valid bits (emptied first when fresh), then
        # shift out the symbol.  No clock enable and no reset, which would each cost a LUT.
        take_token = Signal()
        refill = Signal()
        m.d.comb += refill.eq(decoding & self.tokens.valid & (head.kind == TokenKind.DATA)
                              & (nvalid <= _BUF - 8))
        filled = Signal(_BUF)
        m.d.comb += filled.eq(Mux(fresh, 0, window)
                              | Mux(refill, Cat(Const(0, _BUF - 8), head.value) >> nvalid[:6], 0))
        shifted = shift_left(m, filled, total, "window")
        m.d.sync += [window.eq(shifted), peek_dc_n.eq(~shifted[_BUF - 16:])]
        with m.If(scanning):
            m.d.sync += [peek_ac_n.eq(~shifted[_BUF - 16:]), peek_ram.eq(shifted[_BUF - 16:])]
        m.d.comb += take_token.eq(refill)
        # nvalid + refill - total, and whether that is still enough, from the early operands:
        # only ``total`` is late.
        room = Signal(signed(8))
        m.d.comb += room.eq(nvalid + Mux(refill, 8, 0) - _NEED)
        m.d.sync += [nvalid.eq(nvalid + Mux(refill, 8, 0) - total), enough.eq(total <= room)]

        def restart_window():
            m.d.sync += [nvalid.eq(0), enough.eq(0)]
            setf("fresh", 1)
            setf("decoding", 1)

        # ---- Segment boundaries: restart markers and the end of the scan -------------------
        checking = scanning & (phase == 1) | scanning & (phase == 2)

        def verdict(status, marker=0):
            m.d.sync += [rec_valid.eq(1), rec.kind.eq(_Kind.FINAL), rec.status.eq(status),
                         rec.marker.eq(marker), phase.eq(3)]

        with m.If(checking):
            with m.If(nvalid >= 8):
                verdict(S.EXCESS_ENTROPY_DATA)
            with m.Elif(self.tokens.valid):
                with m.Switch(head.kind):
                    with m.Case(TokenKind.DATA):
                        verdict(S.EXCESS_ENTROPY_DATA)
                    with m.Case(TokenKind.EOF):
                        verdict(S.TRUNCATED)
                    with m.Case(TokenKind.RESTART):
                        with m.If((phase == 1) & (head.value[:3] == rst_next)):
                            m.d.comb += take_token.eq(1)
                            m.d.sync += [rec_valid.eq(1), rec.kind.eq(_Kind.RESTART),
                                         phase.eq(0), in_interval.eq(0),
                                         rst_next.eq(rst_next + 1)]
                            restart_window()
                        with m.Else():
                            verdict(S.BAD_RESTART)
                    with m.Case(TokenKind.END):
                        with m.If(phase == 2):
                            m.d.comb += take_token.eq(1)
                            verdict(S.OK, head.value)
                        with m.Else():
                            verdict(S.BAD_RESTART)
        m.d.comb += self.tokens.ready.eq(take_token)

        # ---- Pipeline 1: code length, code and magnitude bits; read VALPTR - MINCODE --------
        r1 = Signal(_Record)
        r1_valid = Signal()
        r1_len = Signal(5)                  # 0: no code matched
        r1_code = Signal(16)
        r1_after = Signal(11)               # the bits after the code, first in the top bit
        length = _or_tree([Mux(rec.onehot[l - 1], l, 0) for l in range(1, 17)])
        m.d.comb += [tables.valoff_addr.eq(Cat((length - 1)[:4], rec.table))]
        m.d.sync += [r1.eq(rec), r1_valid.eq(rec_valid), r1_len.eq(length),
                     r1_code.eq(_or_tree([Mux(rec.onehot[l - 1], rec.window[_WIN - l:], 0)
                                             for l in range(1, 17)])),
                     r1_after.eq(_or_tree([Mux(rec.onehot[l - 1],
                                                  rec.window[_WIN - l - 11:_WIN - l], 0)
                                              for l in range(1, 17)]))]

        # ---- Pipeline 2: read the symbol ------------------------------------------------------
        r2 = Signal(_Record)
        r2_valid = Signal()
        r2_len = Signal(5)
        r2_after = Signal(11)
        r2_code = Signal(4)                 # the code's low bits (a slow symbol's patch address)
        m.d.comb += tables.symbol_addr.eq(Cat((r1_code + tables.valoff)[:8], r1.table))
        m.d.sync += [r2.eq(r1), r2_valid.eq(r1_valid), r2_len.eq(r1_len), r2_after.eq(r1_after),
                     r2_code.eq(r1_code[:4])]

        # ---- Pipeline 3: checks (the golden model's order), value, what to emit -------------
        symbol = tables.symbol
        size = symbol[0:4]
        srun = symbol[4:8]
        dc = r2.is_dc
        bad_category = Mux(dc, symbol > 11, size > 10)
        zrl = ~dc & (size == 0) & (srun == 15)
        eob = ~dc & (size == 0) & (srun != 15)
        position = r2.k + srun
        too_many = ~dc & ((zrl & (r2.k + 16 > 64)) | (~zrl & ~eob & (position > 63)))
        trunc = Mux(r2.rst_ahead, S.BAD_RESTART, S.TRUNCATED)
        # (Combinational logic of its own, see lutmap: it keeps the simulator fast.)
        m.submodules.check = chk = Module()
        status = Signal(8)
        with chk.If(r2_len == 0):
            chk.d.comb += status.eq(S.BAD_HUFFMAN_CODE)
        with chk.Elif(r2_len > r2.avail):
            chk.d.comb += status.eq(trunc)
        with chk.Elif(too_many):
            chk.d.comb += status.eq(S.TOO_MANY_COEFFICIENTS)
        with chk.Elif(bad_category):
            chk.d.comb += status.eq(S.BAD_COEFFICIENT)
        with chk.Elif(r2_len + size > r2.avail):
            chk.d.comb += status.eq(trunc)
        unused_bits = Signal(4)
        magnitude = Signal(11)
        chk.d.comb += [unused_bits.eq(11 - size), magnitude.eq(r2_after >> unused_bits)]
        value = Signal(signed(17))
        with chk.If(size == 0):
            chk.d.comb += value.eq(0)
        with chk.Elif(magnitude.bit_select((size - 1)[:4], 1)):
            chk.d.comb += value.eq(magnitude)
        with chk.Else():
            chk.d.comb += value.eq(magnitude - (Const(1, 17) << size) + 1)

        r3 = Signal(data.StructLayout({"kind": 2, "status": 8, "marker": 8, "comp": 2,
                                       "is_dc": 1, "emits": 1, "beat": CoefficientLayout}))
        r3_valid = Signal()
        m.d.sync += [r3_valid.eq(r2_valid), r3.kind.eq(r2.kind), r3.comp.eq(r2.comp),
                     r3.is_dc.eq(dc), r3.marker.eq(r2.marker),
                     r3.status.eq(Mux(r2.kind == _Kind.FINAL, r2.status, status)),
                     r3.beat.component.eq(r2.comp), r3.beat.value.eq(value[:16]),
                     r3.beat.zz.eq(0), r3.beat.write.eq(0), r3.beat.end.eq(0), r3.emits.eq(1)]
        with m.If(dc):
            m.d.sync += r3.beat.write.eq(1)
        with m.Elif(eob):
            m.d.sync += [r3.beat.value.eq(0), r3.beat.end.eq(1)]
        with m.Elif(zrl):
            m.d.sync += [r3.beat.value.eq(0), r3.beat.end.eq(r2.k + 16 == 64),
                         r3.emits.eq(r2.k + 16 == 64)]
        with m.Else():
            m.d.sync += [r3.beat.zz.eq(position[:6]), r3.beat.write.eq(1),
                         r3.beat.end.eq(position == 63)]
        # A slow symbol's fast-table entry is patched in; the loop decodes the symbol again
        # with it, and in that same clock the slow entry goes back (the other codes at that
        # place need it from the next clock on).
        with m.If(scanning & r2_valid & (r2.kind == _Kind.SLOW)):
            m.d.sync += [patch_write.eq(1), patch.ac.eq(~dc), patch.table.eq(r2.table[:2]),
                         patch.length.eq(r2_len), patch.code.eq(r2_code),
                         patch.entry.total.eq(r2_len + size), patch.entry.run.eq(Mux(dc, 0, srun)),
                         patch.entry.eob.eq(eob), patch.entry.adv.eq(1)]
        restore = Signal()
        m.d.comb += [restore.eq(patched & (run | ~scanning)),
                     tables.patch.eq(patch), tables.patch_en.eq(patch_write | restore),
                     patching.eq(patch_write | patched)]
        with m.If(restore):
            m.d.comb += tables.patch.entry.eq(0)
            m.d.sync += patched.eq(0)
        with m.If(patch_write):
            m.d.sync += [patch_write.eq(0), patched.eq(1)]
            setf("slow_wait", 0)

        # ---- Pipeline 4: DC prediction, output, verdicts ---------------------------------------
        pred_new = (preds[r3.comp] + r3.beat.value)[:16]
        beat = Signal(CoefficientLayout)
        chk.d.comb += [beat.eq(r3.beat), fifo.w_data.eq(beat)]
        with chk.If(r3.is_dc):
            chk.d.comb += beat.value.eq(pred_new)
        with m.If(scanning & r3_valid):
            with m.Switch(r3.kind):
                with m.Case(_Kind.SYMBOL):
                    with m.If(r3.status != 0):
                        finish(r3.status)
                    with m.Else():
                        m.d.sync += self.symbols_decoded.eq(self.symbols_decoded + 1)
                        m.d.comb += fifo.w_en.eq(r3.emits)
                        with m.If(r3.is_dc):
                            m.d.sync += preds[r3.comp].eq(pred_new)
                with m.Case(_Kind.RESTART):
                    m.d.sync += [pr.eq(0) for pr in preds]
                with m.Case(_Kind.FINAL):
                    finish(r3.status, r3.marker)

        # A new scan starts afresh (last, so that it wins over the loop's own updates).
        with m.If(self.scan.valid & self.scan.ready):
            p = self.scan.payload
            restart_window()
            m.d.sync += [cfg.eq(p), scanning.eq(1), comp.eq(0),
                         blk.eq(0), k.eq(0), is_dc.eq(1), mcus_left.eq(p.mcus),
                         in_interval.eq(0), rst_next.eq(0), phase.eq(0)]
            setf("slow_wait", 0)
            # h * v of 2-bit factors, as shifts and an add (a '*' would take a DSP block).
            m.d.sync += [blocks_here[c].eq(Mux(p.v[c][0], p.h[c], 0) + Mux(p.v[c][1], p.h[c] << 1, 0))
                         for c in range(MAX_COMPONENTS)]
            m.d.sync += [pr.eq(0) for pr in preds]
            m.d.sync += [rec_valid.eq(0), r1_valid.eq(0), r2_valid.eq(0), r3_valid.eq(0)]
            with m.If(tables.error):
                finish(S.BAD_TABLE)

        m.d.sync += [flag.eq(nxt[name]) for name, flag in flags.items()]
        m.d.sync += go.eq(nxt["decoding"] & ~nxt["fresh"] & ~nxt["slow_wait"]
                          & (fifo.level <= _FIFO - _INFLIGHT))   # room for all in flight
        return m
