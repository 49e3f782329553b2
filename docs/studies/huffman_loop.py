"""The Huffman loop at 100 MHz on an ECP5 (issue 20): candidate loops, measured out of context.

Each class below is the *loop* of a candidate entropy decoder and nothing else: the bit
window, its refill, a writable lookup table (LUT-RAM, or EBR) per class (DC, AC), the
block bookkeeping (coefficient index, DC or AC next) and a register that keeps the result
alive.  No checks, no pipeline behind the loop, no slow path: what is measured is the
one-clock (or two-clock) recurrence that sets the clock of any decoder built on it.
The results and the choice they led to are in docs/studies/huffman_loop.md;
symbol_lengths.py gives the share of symbols each fast path covers.

    .venv/bin/python docs/studies/huffman_loop.py             # every variant, seeds 1-3
    .venv/bin/python docs/studies/huffman_loop.py rt2_6 --seeds 1

About 40 s per place-and-route on this machine (YoWASP yosys + nextpnr-ecp5, ECP5-85F).
"""
import argparse
import json
import statistics

from amaranth import Module, Signal, Cat, Mux, Const, Array
from amaranth.lib import wiring, data
from amaranth.lib.wiring import In, Out
from amaranth.lib.memory import Memory

from dlforge.boards.ooc import synthesize
from dlforge.rtl.jpeg.lutmap import kept, shift_left

Entry = data.StructLayout({"total": 5, "run": 4, "eob": 1, "fast": 1})


def _tables(m, kernel, shape, depth, domain="comb"):
    """The DC and AC lookup tables of a kernel, written from its ``wr_*`` ports; returns
    their read ports."""
    dc = Memory(shape=shape, depth=depth, init=[])
    ac = Memory(shape=shape, depth=depth, init=[])
    m.submodules.dc, m.submodules.ac = dc, ac
    for mem, isac in ((dc, 0), (ac, 1)):
        w = mem.write_port()
        m.d.comb += [w.en.eq(kernel.wr_en & (kernel.wr_ac == isac)), w.addr.eq(kernel.wr_addr),
                     w.data.eq(kernel.wr_data)]
    rdc = dc.read_port(domain=domain)          # (named here: the netlist's names stay)
    rac = ac.read_port(domain=domain)
    return rdc, rac


class LookaheadLoop(wiring.Component):
    """Window shift loop with one table lookup of the top ``bits`` per symbol
    (``tables`` per class, selected by a register), LUT-RAM or EBR."""
    refill_valid: In(1)
    refill_byte: In(8)
    refill_ready: Out(1)
    wr_en: In(1)
    wr_ac: In(1)
    wr_addr: In(12)
    wr_data: In(Entry.size)
    tsel_dc_in: In(2)
    tsel_ac_in: In(2)
    slow_total: In(5)
    slow_valid: In(1)
    rec: Out(27 + 6 + 1 + 5)

    def __init__(self, bits=8, tables=2, ebr=False, win=64, keep=True, shift4=False, gated=True):
        self.bits, self.tables, self.ebr, self.win, self.keep = bits, tables, ebr, win, keep
        self.shift4, self.gated = shift4, gated
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        B, T, W = self.bits, self.tables, self.win
        tb = (T - 1).bit_length()
        rdc, rac = _tables(m, self, Entry, T << B, "sync" if self.ebr else "comb")
        window = Signal(W)
        nvalid = Signal(7)
        k = Signal(6)
        is_dc = Signal(init=1)
        tsel_dc, tsel_ac = Signal(2), Signal(2)
        m.d.sync += [tsel_dc.eq(self.tsel_dc_in), tsel_ac.eq(self.tsel_ac_in)]
        enough = Signal()
        keep = (lambda v, n, s=None: kept(m, v, n, s)) if self.keep else (lambda v, n, s=None: v)
        # entries
        if self.ebr:
            # address registered inside the EBR: computed from the next window
            e_dc, e_ac = rdc.data, rac.data
        else:
            m.d.comb += [rdc.addr.eq(Cat(window[W - B:], tsel_dc[:tb])),
                         rac.addr.eq(Cat(window[W - B:], tsel_ac[:tb]))]
            e_dc, e_ac = rdc.data, rac.data
        e = data.View(Entry, Mux(is_dc, e_dc.as_value(), e_ac.as_value()))
        ks = k + e.run + 1
        done = e.eob | ks[6] | is_dc & 0
        go = Signal()
        m.d.sync += go.eq(enough | self.slow_valid)
        fast = e.fast & go
        if self.gated:
            total = keep(Mux(is_dc, e_dc.total, e_ac.total) & Cat(*[go] * 5), "total")
        else:
            total = Mux(fast, e.total, Mux(self.slow_valid, self.slow_total, 0))
        refill = Signal()
        m.d.comb += refill.eq(self.refill_valid & (nvalid <= W - 8))
        m.d.comb += self.refill_ready.eq(refill)
        filled = Signal(W)
        m.d.comb += filled.eq(window | Mux(refill, Cat(Const(0, W - 8), self.refill_byte) >> nvalid[:6], 0))
        if self.shift4:
            cur = filled
            for b in range(0, 5, 2):
                amt = total[b:b + 2]
                cur = keep(Array([(cur << (j << b))[:W] for j in range(1 << len(amt))])[amt], f"win_s{b}", W)
            shifted = cur
        else:
            shifted = shift_left(m, filled, total, "win") if self.keep else (filled << total)[:W]
        m.d.sync += window.eq(shifted)
        if self.ebr:
            m.d.comb += [rdc.addr.eq(Cat(shifted[W - B:], tsel_dc[:tb])),
                         rac.addr.eq(Cat(shifted[W - B:], tsel_ac[:tb]))]
        room = Signal(8)
        m.d.comb += room.eq(nvalid + Mux(refill, 8, 0) - 27)
        m.d.sync += [nvalid.eq(nvalid + Mux(refill, 8, 0) - total), enough.eq(total <= room)]
        with m.If(fast | self.slow_valid):
            m.d.sync += [k.eq(Mux(done, 0, ks[:6])), is_dc.eq(Mux(is_dc, 0, done))]
        m.d.sync += self.rec.eq(Cat(window[W - 27:], k, is_dc, total))
        return m




class TwoContextLoop(wiring.Component):
    """Two bit streams share a two-stage loop: lookup (to a register), then shift; each
    context advances every other clock (the rotating pipeline w0 -> entry, w1 -> w0)."""
    refill_valid: In(1)
    refill_byte: In(8)
    wr_en: In(1)
    wr_ac: In(1)
    wr_addr: In(12)
    wr_data: In(Entry.size)
    rec: Out(27 + 5)

    def __init__(self, bits=8, tables=2, win=64):
        self.bits, self.tables, self.win = bits, tables, win
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        B, T, W = self.bits, self.tables, self.win
        tb = (T - 1).bit_length()
        rdc, rac = _tables(m, self, Entry, T << B)
        w0, w1 = Signal(W), Signal(W)
        n0, n1 = Signal(7), Signal(7)
        d0, d1 = Signal(init=1), Signal(init=1)
        t0, t1 = Signal(2), Signal(2)
        m.d.comb += [rdc.addr.eq(Cat(w0[W - B:], t0[:tb])), rac.addr.eq(Cat(w0[W - B:], t0[:tb]))]
        total = Signal(5)
        go = Signal()
        m.d.sync += [total.eq(Mux(d0, rdc.data.total, rac.data.total) & Cat(*[go] * 5)),
                     go.eq(n1 >= 27)]
        refill = Signal()
        m.d.comb += refill.eq(self.refill_valid & (n1 <= W - 8))
        filled = Signal(W)
        m.d.comb += filled.eq(w1 | Mux(refill, Cat(Const(0, W - 8), self.refill_byte) >> n1[:6], 0))
        shifted = shift_left(m, filled, total, "win")
        m.d.sync += [w0.eq(shifted), w1.eq(w0), n0.eq(n1 + Mux(refill, 8, 0) - total), n1.eq(n0),
                     d1.eq(d0), d0.eq(d1 ^ total[0]), t1.eq(t0), t0.eq(t1 + total[1])]
        m.d.sync += self.rec.eq(Cat(w0[W - 27:], total))
        return m


class AccumulatorLoop(wiring.Component):
    """Bits accumulate at fixed positions (a byte shifts in at the bottom); the loop only
    moves a bit count: peek = acc >> (n - B), n -= total (no data shift in the loop)."""
    refill_valid: In(1)
    refill_byte: In(8)
    wr_en: In(1)
    wr_ac: In(1)
    wr_addr: In(12)
    wr_data: In(Entry.size)
    rec: Out(27 + 5 + 6 + 1)

    def __init__(self, bits=8, tables=2, acc=48, keep=False):
        self.bits, self.tables, self.acc, self.keep = bits, tables, acc, keep
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        B, T, A = self.bits, self.tables, self.acc
        tb = (T - 1).bit_length()
        rdc, rac = _tables(m, self, Entry, T << B)
        acc = Signal(A)
        n = Signal(range(A + 1))       # valid bits at the bottom of acc
        is_dc = Signal(init=1)
        k = Signal(6)
        tsel_dc, tsel_ac = Signal(2), Signal(2)
        go = Signal()
        # peek: B bits starting at bit n-1 downwards
        peek = Signal(B)
        m.d.comb += peek.eq(Array([acc[max(0, j - B):j] << max(0, B - j) for j in range(A + 1)])[n])
        m.d.comb += [rdc.addr.eq(Cat(peek, tsel_dc[:tb])), rac.addr.eq(Cat(peek, tsel_ac[:tb]))]
        e = data.View(Entry, Mux(is_dc, rdc.data.as_value(), rac.data.as_value()))
        total = Signal(5)
        m.d.comb += total.eq(Mux(is_dc, rdc.data.total, rac.data.total) & Cat(*[go] * 5))
        refill = Signal()
        m.d.comb += refill.eq(self.refill_valid & (n <= A - 8))
        with m.If(refill):
            m.d.sync += acc.eq(Cat(self.refill_byte, acc))
        m.d.sync += [n.eq(n + Mux(refill, 8, 0) - total), go.eq(n + Mux(refill, 8, 0) - total >= 27)]
        ks = k + e.run + 1
        done = e.eob | ks[6]
        with m.If(go):
            m.d.sync += [k.eq(Mux(done, 0, ks[:6])), is_dc.eq(Mux(is_dc, 0, done))]
        m.d.sync += [tsel_dc.eq(tsel_dc + done), tsel_ac.eq(tsel_ac ^ is_dc)]
        m.d.sync += self.rec.eq(Cat(peek, total, k, is_dc))
        return m


class TwoContextLoop2(TwoContextLoop):
    """TwoContextLoop with the refill in the lookup stage: the shift stage only shifts."""
    def elaborate(self, platform):
        m = Module()
        B, T, W = self.bits, self.tables, self.win
        tb = (T - 1).bit_length()
        rdc, rac = _tables(m, self, Entry, T << B)
        w0, w1 = Signal(W), Signal(W)
        n0, n1 = Signal(7), Signal(7)
        d0, d1 = Signal(init=1), Signal(init=1)
        t0, t1 = Signal(2), Signal(2)
        m.d.comb += [rdc.addr.eq(Cat(w0[W - B:], t0[:tb])), rac.addr.eq(Cat(w0[W - B:], t0[:tb]))]
        total = Signal(5)
        go = Signal()
        m.d.sync += [total.eq(Mux(d0, rdc.data.total, rac.data.total) & Cat(*[go] * 5)),
                     go.eq(n0 >= 27)]
        refill = Signal()
        m.d.comb += refill.eq(self.refill_valid & (n0 <= W - 8))
        m.d.sync += w1.eq(w0 | Mux(refill, Cat(Const(0, W - 8), self.refill_byte) >> n0[:6], 0))
        shifted = shift_left(m, w1, total, "win")
        m.d.sync += [w0.eq(shifted), n1.eq(n0 + Mux(refill, 8, 0)), n0.eq(n1 - total),
                     d1.eq(d0), d0.eq(d1 ^ total[0]), t1.eq(t0), t0.eq(t1 + total[1])]
        m.d.sync += self.rec.eq(Cat(w0[W - 27:], total))
        return m


class ShortShiftLoop(wiring.Component):
    """One context, one lookup per symbol; the fast path consumes at most 15 bits (code +
    magnitude), so the window shifts by 0..15 (two 4:1 stages); new bits wait pre-aligned
    in a tail register that shifts with the window and is ORed in before the shift."""
    refill_valid: In(1)
    refill_word: In(16)
    wr_en: In(1)
    wr_ac: In(1)
    wr_addr: In(12)
    wr_data: In(16)
    rec: Out(27 + 4 + 6 + 1)

    def __init__(self, bits=8, tables=2, win=32, shift4=True):
        self.bits, self.tables, self.win, self.shift4 = bits, tables, win, shift4
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        B, T, W = self.bits, self.tables, self.win
        E = data.StructLayout({"step": 4, "run": 4, "eob": 1, "whole": 1})
        tb = (T - 1).bit_length()
        rdc, rac = _tables(m, self, E, T << B)
        window, tail = Signal(W), Signal(W)
        n = Signal(6)           # valid bits in window
        tn = Signal(6)          # valid bits in tail (just below window's)
        has_tail = Signal()
        is_dc = Signal(init=1)
        k = Signal(6)
        tsel_dc, tsel_ac = Signal(2), Signal(2)
        go = Signal()
        m.d.comb += [rdc.addr.eq(Cat(window[W - B:], tsel_dc[:tb])),
                     rac.addr.eq(Cat(window[W - B:], tsel_ac[:tb]))]
        step = kept(m, Mux(is_dc, rdc.data.step, rac.data.step) & Cat(*[go] * 4), "step")
        merge = Signal()
        m.d.comb += merge.eq(has_tail & (n < 16))
        src = Signal(W)
        m.d.comb += src.eq(window | Mux(merge, tail, 0))
        cur = src
        if self.shift4:
            for b in (0, 2):
                amt = step[b:b + 2]
                cur = kept(m, Array([(cur << (j << b))[:W] for j in range(4)])[amt], f"win_s{b}", W)
        else:
            cur = shift_left(m, src, step, "win")
        m.d.sync += window.eq(cur)
        # the tail: shifts along, or takes a new word aligned below the bits left after this step
        n_after = Signal(7)
        m.d.comb += n_after.eq(n + Mux(merge, tn, 0) - step)
        tail_shifted = Signal(W)
        m.d.comb += tail_shifted.eq((tail << step)[:W])
        with m.If(merge | ~has_tail):
            m.d.sync += [tail.eq(Cat(Const(0, W - 16), self.refill_word) >> n_after[:5]),
                         has_tail.eq(self.refill_valid), tn.eq(16)]
        with m.Else():
            m.d.sync += tail.eq(tail_shifted)
        m.d.sync += [n.eq(n_after), go.eq(n_after >= 16)]
        e = data.View(E, Mux(is_dc, rdc.data.as_value(), rac.data.as_value()))
        ks = k + e.run + 1
        done = e.eob | ks[6]
        with m.If(go & e.whole):
            m.d.sync += [k.eq(Mux(done, 0, ks[:6])), is_dc.eq(Mux(is_dc, 0, done))]
        m.d.sync += [tsel_dc.eq(tsel_dc + done), tsel_ac.eq(tsel_ac ^ is_dc)]
        m.d.sync += self.rec.eq(Cat(window[W - 27:], step, k, is_dc))
        return m


class RetimedShortShiftLoop(wiring.Component):
    """The ports and parameters of the retimed loop (:class:`RetimedLoop2`): ShortShiftLoop
    with the step registered (as Vitis places it), the window shifted by the last step at the
    start of the clock, then looked up; the tail's alignment runs from the registered step,
    off the loop."""
    refill_valid: In(1)
    refill_word: In(16)
    wr_en: In(1)
    wr_ac: In(1)
    wr_addr: In(12)
    wr_data: In(16)
    rec: Out(27 + 4 + 6 + 1)

    def __init__(self, bits=8, tables=2, win=32, split_dcac=True):
        self.bits, self.tables, self.win, self.split = bits, tables, win, split_dcac
        super().__init__()


class RetimedLoop2(RetimedShortShiftLoop):
    """RetimedShortShiftLoop with the block bookkeeping (k, DC or AC next) computed a clock
    later from the registered entry, in parallel with the shift and the lookup."""
    def elaborate(self, platform):
        m = Module()
        B, T, W = self.bits, self.tables, self.win
        E = data.StructLayout({"step": 4, "run": 4, "eob": 1, "whole": 1})
        tb = (T - 1).bit_length()
        rdc, rac = _tables(m, self, E, T << B)
        window, tail = Signal(W), Signal(W)
        step_r = Signal(4)
        prev = Signal(E)
        prev_dc = Signal(init=1)
        prev_go = Signal()
        n = Signal(6)
        has_tail = Signal()
        k = Signal(6)
        tsel_dc, tsel_ac = Signal(2), Signal(2)
        go = Signal()
        merge = Signal()
        # bookkeeping for the symbol decoded last clock
        ks = k + prev.run + 1
        done = kept(m, prev.eob | ks[6], "done")
        used = prev_go & prev.whole
        is_dc = kept(m, Mux(used, Mux(prev_dc, 0, done), prev_dc), "is_dc")
        with m.If(used):
            m.d.sync += k.eq(Mux(prev_dc | done, 0, ks[:6]))
        cur = window | Mux(merge, tail, 0)
        for b in (0, 2):
            amt = step_r[b:b + 2]
            cur = kept(m, Array([(cur << (j << b))[:W] for j in range(4)])[amt], f"win_s{b}", W)
        eff = cur
        m.d.comb += [rdc.addr.eq(Cat(eff[W - B:], tsel_dc[:tb])),
                     rac.addr.eq(Cat(eff[W - B:], tsel_ac[:tb]))]
        entry = data.View(E, Mux(is_dc, rdc.data.as_value(), rac.data.as_value()))
        m.d.sync += [window.eq(eff), step_r.eq(Mux(go, entry.step, 0)), prev.eq(entry),
                     prev_dc.eq(is_dc), prev_go.eq(go)]
        n_eff = Signal(7)
        m.d.comb += n_eff.eq(n + Mux(merge, 16, 0) - step_r)
        with m.If(merge | ~has_tail):
            m.d.sync += [tail.eq(Cat(Const(0, W - 16), self.refill_word) >> n_eff[:5]),
                         has_tail.eq(self.refill_valid)]
        with m.Else():
            m.d.sync += tail.eq((tail << step_r)[:W])
        m.d.sync += [n.eq(n_eff), go.eq(n_eff >= 20), merge.eq(has_tail & (n_eff < 20))]
        m.d.sync += [tsel_dc.eq(tsel_dc + done), tsel_ac.eq(tsel_ac ^ is_dc)]
        m.d.sync += self.rec.eq(Cat(eff[W - 27:], step_r, k, is_dc))
        return m



#: A speculative entry per bit offset: per class, the bits the symbol there takes (5) and
#: whether it ends the block (1).
ChaseEntry = data.StructLayout({"dc": 6, "ac": 6})


class PointerChaseLoop(wiring.Component):
    """Speculative decode: every bit offset of the window has its entry (total bits,
    end of block) before the loop gets there, so the loop is a pointer chase: the entry at
    the pointer, the pointer plus its total, and the window and entries moved on by the whole
    bytes passed.  The entries come in from ports here: what produces them (a table lookup per
    offset and class, ``new`` offsets a clock) is the speculative design's area, not its
    clock."""
    new_entries: In(data.ArrayLayout(ChaseEntry, 24))
    rec: Out(5 + 6 + 1)

    def __init__(self, offsets=32):
        self.offsets = offsets
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        S = self.offsets
        PE = ChaseEntry
        ents = Signal(data.ArrayLayout(PE, S + 24))
        p = Signal(5)                   # bit offset of the next symbol within the entries
        is_dc = Signal(init=1)
        pick = kept(m, Array(ents[j].as_value() for j in range(S))[p], "pick", PE.size)
        e = data.View(PE, pick)
        step = Mux(is_dc, e.dc, e.ac)
        nxt = Signal(7)
        m.d.comb += nxt.eq(p + step[:5])
        m.d.sync += [p.eq(nxt[:3]), is_dc.eq(Mux(is_dc, 0, step[5]))]
        # the entries move on by the bytes passed (0 to 3), the new ones come in behind
        whole = Cat(ents.as_value(), self.new_entries.as_value())
        moved = Array(whole[8 * b * PE.size:][:(S + 24) * PE.size] for b in range(4))[nxt[3:5]]
        m.d.sync += ents.eq(moved)
        m.d.sync += self.rec.eq(Cat(step[:5], p, is_dc))
        return m



class PointerChaseRing(wiring.Component):
    """PointerChaseLoop with the entries in a ring of 64 registers: the loop's pointer runs
    round the ring and nothing moves; the producer writes the next byte's 8 entries behind it
    while it keeps ahead of the pointer (checked from registers, a clock late, with room to
    spare)."""
    new_entries: In(data.ArrayLayout(ChaseEntry, 8))
    new_valid: In(1)
    new_ready: Out(1)
    rec: Out(5 + 6 + 1)

    def elaborate(self, platform):
        m = Module()
        ring = [Signal(ChaseEntry, name=f"ent{j}") for j in range(64)]
        p = Signal(6)
        wr = Signal(3)                  # the next byte slot of the ring to write
        is_dc = Signal(init=1)
        # the 64:1 pick as three kept 4:1 stages (a LUT pair and its PFUMX per bit each);
        # left to itself ABC makes a chain of seven LUTs of it
        level = [r.as_value() for r in ring]
        for stage in range(3):
            sel = p[2 * stage:2 * stage + 2]
            level = [kept(m, Array(level[4 * i:4 * i + 4])[sel], f"pick{stage}_{i}",
                          ChaseEntry.size) for i in range(len(level) // 4)]
        e = data.View(ChaseEntry, level[0])
        step = Mux(is_dc, e.dc, e.ac)
        m.d.sync += [p.eq(p + step[:5]), is_dc.eq(Mux(is_dc, 0, step[5]))]
        # room: the byte slot written must stay out of the pointer's next 32 bits
        ahead = Signal(3)
        m.d.sync += ahead.eq(wr - p[3:])
        m.d.comb += self.new_ready.eq(ahead < 4)
        with m.If(self.new_valid & self.new_ready):
            m.d.sync += wr.eq(wr + 1)
            for slot in range(8):
                with m.If(wr == slot):
                    m.d.sync += [ring[8 * slot + j].eq(self.new_entries[j]) for j in range(8)]
        m.d.sync += self.rec.eq(Cat(step[:5], p, is_dc))
        return m


#: name -> (kernel, parameters, what it is)
VARIANTS = {
    "single_t8": (LookaheadLoop, {"bits": 8}, "one context, 8-bit table, 27-bit shift, refill in the loop"),
    "single_t8_4to1": (LookaheadLoop, {"bits": 8, "shift4": True}, "... with 4:1 shift stages"),
    "single_t6": (LookaheadLoop, {"bits": 6}, "one context, 6-bit table"),
    "single_ebr_t9": (LookaheadLoop, {"bits": 9, "ebr": True, "shift4": True},
                      "one context, 9-bit table in EBR (address registered in the EBR)"),
    "bitcount_t8": (AccumulatorLoop, {"bits": 8}, "one context, bits at fixed places, a bit count moves"),
    "short_t8": (ShortShiftLoop, {"bits": 8}, "one context, fast path <= 15 bits, pre-aligned tail"),
    "retimed_t8": (RetimedLoop2, {"bits": 8}, "... step registered, bookkeeping a clock later"),
    "retimed_t7": (RetimedLoop2, {"bits": 7}, "... 7-bit table"),
    "retimed_t6": (RetimedLoop2, {"bits": 6}, "... 6-bit table"),
    "two_t8_refill_late": (TwoContextLoop, {"bits": 8}, "two contexts, two stages, refill in the shift stage"),
    "chase_32": (PointerChaseLoop, {"offsets": 32},
                 "speculative: entries at every offset made ahead, the loop a pointer chase"),
    "chase_ring": (PointerChaseRing, {}, "... entries in a ring of 64: nothing moves in the loop"),
    "two_t8": (TwoContextLoop2, {"bits": 8}, "two contexts, two stages, refill in the lookup stage"),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variants", nargs="*", help=f"default: all of {', '.join(VARIANTS)}")
    parser.add_argument("--seeds", type=int, default=3, help="placer seeds 1..N (default 3)")
    parser.add_argument("--device", default="ecp5-85f")
    parser.add_argument("--out", default="build/studies/huffman_loop")
    args = parser.parse_args()
    for name in args.variants or VARIANTS:
        cls, params, what = VARIANTS[name]
        runs = [synthesize(cls(**params), "loop", f"{args.out}/{name}_s{seed}",
                           device=args.device, freq_mhz=100, seed=seed)
                for seed in range(1, args.seeds + 1)]
        fmax = [r["fmax_mhz"] for r in runs]
        print(json.dumps({"variant": name, "what": what, "fmax_mhz": fmax,
                          "median_mhz": statistics.median(fmax), "luts": runs[0]["luts"],
                          "ffs": runs[0]["ffs"], "lutram": runs[0]["lutram"],
                          "bram": runs[0]["bram"]}), flush=True)


if __name__ == "__main__":
    main()
