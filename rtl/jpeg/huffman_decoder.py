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
in the golden model's order (sim/models/jpeg_entropy.py), stops the scan at the first one that was
not really there.  The restart/end-of-scan checks also go through the pipeline, so they keep
their place after the last symbol of their interval.  A code whose length has more than 16
codes (a *slow* entry, in practice the 16-bit codes of the standard AC tables) costs five
extra clocks: the pipeline looks its symbol up and patches the fast table for one clock.

With ``contexts=2`` the decoder is built to be C-slowed by two (two scans at once, each every
other clock: :mod:`dlforge.rtl.cslow`, :mod:`.entropy_pair`, :mod:`.core_pair`), and the
loop is cut in two there: the comparators, the one-hot length and the pick in one clock; the
window's shift, the coefficient index, the block's end and the scan position in the next
(:meth:`HuffmanDecoder.c_slowing`).

Output: one beat per coefficient written (DC always, AC when nonzero; ``zz`` is the zigzag
index) and ``end`` on the beat that closes a block; a block closed by EOB after its last
nonzero coefficient gets an extra beat with ``write`` low.  Each scan ends with one ``done``
beat: the status (:class:`JpegStatus`) and the marker that ended the scan.  Latency: the
pipeline and an output FIFO; ``done`` still follows the last coefficient beat.
"""

from types import SimpleNamespace

from amaranth import Module, Signal, Array, Mux, Cat, Const, signed
from amaranth.lib import wiring, stream, data
from amaranth.lib.wiring import In, Out

from ..small_ram import SmallRamFifo, check_small_ram
from .huffman_tables import (FAST_GROUPS, DcEntry, DhtLayout, FastEntry, HuffmanTables,
                             PatchLayout)
from .lutmap import any_of, first_of, kept, select, shift_left
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


class _LoopFlags:
    """The flags that stop the loop (``decoding``, ``fresh``, ``slow_wait``), set and cleared
    through their next values so that ``go`` can be registered from them: the loop's enable
    then costs one LUT at the start of the clock instead of three.

    With two contexts (``direct``) the flags are assigned directly and ``go`` is their AND:
    the flags are retimed there (see HuffmanDecoder.c_slowing), which needs the logic that sets
    them in their own assignments, not in a signal of next values."""

    def __init__(self, m, st, hs, done, direct=False):
        self.m, self.hs, self.done, self.direct = m, hs, done, direct
        self.flags = {"decoding": st.decoding, "fresh": st.fresh, "slow_wait": st.slow_wait}
        if not direct:
            self.nxt = {name: Signal(name=f"{name}_next") for name in self.flags}
            m.d.comb += [self.nxt[name].eq(flag) for name, flag in self.flags.items()]

    def setf(self, name, value):
        if self.direct:
            self.m.d.sync += self.flags[name].eq(value)
        else:
            self.m.d.comb += self.nxt[name].eq(value)

    def finish(self, status, marker=0):
        """The scan's verdict: stop the loop, and send ``done`` once the output drained."""
        self.setf("decoding", 0)
        self.m.d.sync += [self.hs.scanning.eq(0), self.hs.finishing.eq(1),
                          self.done.payload.status.eq(status),
                          self.done.payload.marker.eq(marker)]

    def register(self, fifo, go):
        """The flags take their next values; ``go`` (the loop may run next clock) with them."""
        if self.direct:
            room = Signal()
            self.m.d.sync += room.eq(fifo.level <= _FIFO - _INFLIGHT)
            f = self.flags
            self.m.d.comb += go.eq(f["decoding"] & ~f["fresh"] & ~f["slow_wait"] & room)
            return
        nxt = self.nxt
        self.m.d.sync += [flag.eq(nxt[name]) for name, flag in self.flags.items()]
        self.m.d.sync += go.eq(nxt["decoding"] & ~nxt["fresh"] & ~nxt["slow_wait"]
                          & (fifo.level <= _FIFO - _INFLIGHT))   # room for all in flight


class HuffmanDecoder(wiring.Component):
    """The entropy-decoding step of a JPEG core: Huffman decoding is the one serial part of
    baseline decoding, so it gets a one-symbol-per-clock loop of its own and checks every
    symbol as the golden model does (see the module docstring)."""

    dht: In(stream.Signature(DhtLayout))
    scan: In(stream.Signature(ScanLayout))
    tokens: In(stream.Signature(TokenLayout))
    coef: Out(stream.Signature(CoefficientLayout))
    done: Out(stream.Signature(DoneLayout))
    busy: Out(1)
    symbols_decoded: Out(32)      # counter: Huffman symbols resolved since reset

    def __init__(self, small_ram="block", contexts=1):
        # small_ram: the output FIFO and the tables' offsets in "block" or "lut" RAM
        # contexts: 2 when the decoder is C-slowed by two (rtl/jpeg/entropy_pair.py): the bit
        # window's register pair is then placed by the design, in the middle of the loop
        problem = check_small_ram(small_ram) or (
            None if contexts in (1, 2) else f"contexts must be 1 or 2, not {contexts!r}")
        if problem:
            self._MustUse__silence = True
            raise ValueError(problem)
        self.small_ram = small_ram
        self.contexts = contexts
        self._retimed = []
        self._retime = []
        self._steady = []
        super().__init__()

    def c_slowing(self):
        """The keyword arguments of :func:`~dlforge.rtl.cslow.c_slow` for a circuit that
        holds this decoder (``contexts=2``), as lists filled when the decoder elaborates:
        ``exempt``, the registers the design already pairs (the bit window); ``retime``,
        those whose pair goes around their assignments' logic (the scan position and the
        loop's flags, so the loop's clock ends at its step and the bookkeeping after it runs
        in the next; and the table rows the comparators take); ``steady``, the registers
        the retimed ones read from their pair's first register (the table floors)."""
        return {"exempt": self._retimed, "retime": self._retime, "steady": self._steady}

    def elaborate(self, platform):
        m = Module()
        m.submodules.tables = tables = HuffmanTables(self.small_ram)
        m.submodules.fifo = fifo = SmallRamFifo(width=CoefficientLayout.size, depth=_FIFO,
                                                small_ram=self.small_ram)
        wiring.connect(m, wiring.flipped(self.dht), tables.dht)

        hs = self._scan_handshake(m, tables)
        self._output(m, fifo, hs)
        st = self._scan_state()
        ctl = _LoopFlags(m, st, hs, self.done, direct=self.contexts == 2)
        if self.contexts == 2:
            self._retime[:] = [st.k, st.is_dc, st.blk, st.comp, st.mcus_left, st.in_interval,
                               st.last_mcu, st.last_in_interval, st.mcu_ended,
                               st.phase, *ctl.flags.values(), st.rec.as_value(), st.rec_valid]
        pos = self._scan_position(m, st)
        sel = self._table_select(m, tables, st, pos)
        win = self._bit_window(m)

        # The loop: one symbol per clock, and its record for the pipeline.
        loop = self._decode_loop(m, tables, st, sel, win)
        self._advance_position(m, st, pos, loop, ctl)
        self._record(m, st, sel, win, loop)
        take_token = self._shift_window(m, st, win, loop, hs)
        self._boundary_checks(m, st, pos, win, ctl, take_token, hs)
        m.d.comb += self.tokens.ready.eq(take_token)

        # The pipeline behind the loop.
        r1 = self._pipeline_code(m, tables, st)
        r2 = self._pipeline_symbol(m, tables, r1)
        r3, chk, sym = self._pipeline_checks(m, tables, r2)
        self._patch_slow_entry(m, tables, st, r2, sym, loop, ctl, hs)
        self._pipeline_output(m, fifo, st, r3, chk, ctl, hs)

        self._start_scan(m, tables, st, win, ctl, hs, (r1, r2, r3))
        ctl.register(fifo, loop.go)
        return m

    def _scan_handshake(self, m, tables):
        """One scan at a time: a new one is taken only when the last one's verdict went out
        and the tables are settled, and the tables stay locked while a scan runs."""
        hs = SimpleNamespace()
        hs.scanning = scanning = Signal()
        hs.finishing = finishing = Signal()  # result decided, waiting for the output to drain
        hs.patching = patching = Signal()   # a slow symbol's patch is still in a fast table
        m.d.comb += [tables.locked.eq(scanning | patching), self.busy.eq(scanning)]
        # ``scan.ready`` is a register: from the tables' ``idle`` it reached the scan's start
        # (the unstuffer's restart, the parser's state, every counter), the two-file core's
        # critical path in two of three placements.  It holds what the conditions were a
        # clock ago, less the two events that can end them: the scan taken, and a table
        # byte taken (``idle`` drops only the clock after one; the other conditions cannot
        # arise while no scan runs).  A scan is then taken at most a clock later.
        ready = ~scanning & ~finishing & ~self.done.valid & tables.idle & ~patching
        m.d.sync += self.scan.ready.eq(ready & ~(self.scan.valid & self.scan.ready)
                                       & ~(tables.dht.valid & tables.dht.ready))
        return hs

    def _output(self, m, fifo, hs):
        """Coefficient beats through a FIFO, so that the pipeline need not stop for ``coef``;
        ``done`` after the last of them."""
        m.d.comb += [self.coef.valid.eq(fifo.r_rdy), self.coef.payload.eq(fifo.r_data),
                     fifo.r_en.eq(self.coef.ready)]
        with m.If(self.done.valid & self.done.ready):
            m.d.sync += self.done.valid.eq(0)
        with m.If(hs.finishing & (fifo.level == 0)):
            m.d.sync += [hs.finishing.eq(0), self.done.valid.eq(1)]

    @staticmethod
    def _scan_state():
        """Where the scan is (component, block, coefficient, MCUs and restart intervals), and
        the registers between the loop and the pipeline."""
        st = SimpleNamespace()
        st.cfg = Signal(ScanLayout)
        st.blocks_here = Array(Signal(4, name=f"blocks_c{c}") for c in range(MAX_COMPONENTS))
        st.comp = Signal(2)
        st.blk = Signal(2)                  # block within the component's part of the MCU
        st.k = Signal(6)                    # next coefficient (zigzag), 0 = DC
        st.is_dc = Signal(init=1)
        st.mcus_left = Signal(24)
        st.in_interval = Signal(16)
        # Whether the current MCU is the scan's last, and its interval's last: kept beside
        # the counters (set from them a MCU ahead) so that a block's end decides the scan's
        # or interval's end without comparing 24 and 16 bits on the way.
        st.last_mcu = Signal()
        st.last_in_interval = Signal()
        # An MCU ended in the last clock: the counters count it now, a clock late, so that a
        # block's end reaches this flag and not the 40 counter bits (with two contexts that
        # fanout spread across the chip).  MCU ends are at least two steps apart (a block
        # takes a DC step and an AC step), so the counters are current at the next one.
        st.mcu_ended = Signal()
        st.rst_next = Signal(3)
        st.phase = Signal(2)                # 0: decode, 1: restart check, 2: end check, 3: stop
        st.decoding = Signal()              # scanning and phase 0, as a register of its own
        st.fresh = Signal()                 # the window was just emptied (scan start, RSTn)
        st.slow_wait = Signal()             # waiting for a slow symbol's entry to be patched in
        st.patch = Signal(PatchLayout)      # that entry, and where it goes
        st.patch_write = Signal()           # ... written this clock
        st.patched = Signal()               # ... in the table until the loop has used it
        st.rec = Signal(_Record)            # the loop's output register
        st.rec_valid = Signal()
        st.preds = Array(Signal(16, name=f"pred{c}") for c in range(MAX_COMPONENTS))
        return st

    @staticmethod
    def _scan_position(m, st):
        """Where the scan goes after the current block, all from registers so that the loop
        need not wait for it."""
        pos = SimpleNamespace()
        # The next MCU's flags, as signals of their own: a retimed assignment (two contexts)
        # reads them through a register, so they are compared beside the loop, not after it.
        pos.next_last_mcu = Signal()
        pos.next_last_in_interval = Signal()
        pos.interval_of_one = Signal()
        m.d.comb += [pos.next_last_mcu.eq(st.mcus_left == 2),
                     pos.next_last_in_interval.eq(st.in_interval + 2
                                                  == st.cfg.restart_interval),
                     pos.interval_of_one.eq(st.cfg.restart_interval == 1)]
        pos.last_blk = ~(st.blk + 1 < st.blocks_here[st.comp])
        pos.last_comp = last_comp = ~(st.comp + 1 < st.cfg.components)
        pos.next_comp = Mux(pos.last_blk, Mux(last_comp, 0, st.comp + 1), st.comp)
        pos.mcu_end = pos.last_blk & last_comp
        pos.ends_scan = pos.mcu_end & st.last_mcu
        pos.ends_interval = pos.mcu_end & st.last_in_interval
        return pos

    def _table_select(self, m, tables, st, pos):
        """The two tables the next symbol may need, loaded a clock ahead so that the loop
        starts from registers."""
        # The DC table of the block whose DC comes next (this block while at its DC, else the
        # next block) and the AC table of this block.  ``floor`` (see HuffmanTables.floor) is
        # what the comparators compare the inverted window with.
        sel = SimpleNamespace()
        sel.floor_dc = floor_dc = Signal(data.ArrayLayout(17, 16))
        sel.floor_ac = floor_ac = Signal(data.ArrayLayout(17, 16))
        sel.tsel_dc = tsel_dc = Signal(2)
        sel.tsel_ac = tsel_ac = Signal(2)
        cfg = st.cfg
        dc_comp = Mux(st.is_dc, st.comp, pos.next_comp)
        dc_table, ac_table = Signal(2), Signal(2)
        m.d.comb += [dc_table.eq(cfg.td[dc_comp]), ac_table.eq(cfg.ta[st.comp])]
        m.d.sync += [tsel_dc.eq(dc_table), tsel_ac.eq(ac_table)]
        if self.contexts == 2:
            # C-slowed, the rows are chosen a clock after their table ids (retimed): the
            # ids' logic, from the block's end, and the rows' 272-bit wide mux, whose select
            # reaches registers spread over much of the chip, were one clock's path in the
            # whole core pair.  The floors are written only while no scan runs, so the mux
            # reads them from the first registers of their pairs (steady), not from copies.
            self._retime += [floor_dc.as_value(), floor_ac.as_value()]
            self._steady[:] = [tables.floor.as_value()]
        # A mux tree over four rows at fixed offsets, not a variable index into ``floor``:
        # the same function (10 LUT4 more out of context), but Verilator compiles the index
        # into a 2176-bit shift per clock, which cost the simulated board 2 % (docs/sim-board.md).
        for sel_, floor, base in ((dc_table, floor_dc, 0), (ac_table, floor_ac, 4)):
            f = [tables.floor[base + t] for t in range(4)]
            m.d.sync += floor.eq(Mux(sel_[1], Mux(sel_[0], f[3], f[2]), Mux(sel_[0], f[1], f[0])))
        return sel

    def _bit_window(self, m):
        """The next bits of the scan, with private copies of their start to cut the fanout at
        the start of the loop."""
        # ``window`` holds the next bits, the first in the top bit, zeros below the ``nvalid``
        # valid ones.  Its first 16 bits have private copies for the DC and AC comparators and
        # the fast-table addresses.  Yosys merges registers whose next value is the same
        # function, so the copies differ from the window and from each other in polarity or
        # in having a clock enable.
        # With two contexts the window is paired by hand (see _shift_window_retimed) and
        # written only through its first register: a reset added around the decoder
        # (ResetInserter) would write it directly, in the other context's clock, so it has
        # none; its first register has, and empties it a clock later.
        win = SimpleNamespace()
        rl = self.contexts == 2
        win.window = Signal(_BUF, reset_less=rl)
        win.peek_dc_n = Signal(16, reset_less=rl)       # inverted
        win.peek_ac_n = Signal(16, reset_less=rl)       # inverted, enabled while scanning
        # The fast tables' addresses, one copy per group of tables (huffman_tables.fast_group)
        # to be placed beside it.  Each differs from the window, the comparators' copies and
        # the others in its initial value or its enable (initial values that differ keep
        # yosys from merging them where ``keep`` does not: docs/studies/huffman_loop.md).
        win.peek_ram = [Signal(16, reset_less=rl, name=f"peek_ram{g}",
                               init=0 if g == 0 else 0xFFFF) for g in range(FAST_GROUPS)]
        win.peek_ram_enabled = [g < 2 for g in range(FAST_GROUPS)]  # else loaded every clock
        win.nvalid = Signal(7, reset_less=rl)
        win.enough = Signal(reset_less=rl)              # nvalid >= _NEED
        win.restart = Signal()              # emptied this clock (two contexts only)
        win.head = head = self.tokens.payload
        win.segment_over = segment_over = Signal()  # a marker or the end of the data is next
        m.d.sync += segment_over.eq(self.tokens.valid & (head.kind != TokenKind.DATA))
        return win

    def _decode_loop(self, m, tables, st, sel, win):
        """The one-clock loop that resolves a symbol's length and step; everything else waits
        in the pipeline."""
        # Per clock: the comparators find the code length (one-hot), the fast tables give
        # every length's entry, the length picks one, and the window shifts by its bit count.
        # The logic is cut into kept LUT-sized pieces (see lutmap) so that it maps as written.
        loop = SimpleNamespace()
        loop.go = go = Signal()
        runnable = kept(m, go & (win.enough | win.segment_over), "runnable")
        run_dc = kept(m, runnable & st.is_dc, "run_dc")
        run_ac = kept(m, runnable & ~st.is_dc, "run_ac")

        m.d.comb += [tables.fast_dc_table.eq(sel.tsel_dc), tables.fast_ac_table.eq(sel.tsel_ac),
                     *[tables.fast_bits[g].eq(win.peek_ram[g]) for g in range(FAST_GROUPS)]]
        peek_dc_n, peek_ac_n, floor_dc, floor_ac = (win.peek_dc_n, win.peek_ac_n, sel.floor_dc,
                                                    sel.floor_ac)
        hit_dc = [Const(0)] + [peek_dc_n[16 - l:] >= floor_dc[l - 1][:l + 1] for l in range(1, 17)]
        hit_ac = [Const(0)] + [peek_ac_n[16 - l:] >= floor_ac[l - 1][:l + 1] for l in range(1, 17)]
        # The code's length, one-hot (the thermometer's first 1); all zero when not running.
        if self.contexts == 2:
            # Not gated by ``runnable``: its flags come late in the clock, so with two
            # contexts what the step does is gated by it after the pick (and the clock).
            run_dc, run_ac = st.is_dc, ~st.is_dc
        oh_dc = kept(m, Cat(*[run_dc & hit_dc[l] & ~hit_dc[l - 1] for l in range(1, 17)]), "oh_dc")
        oh_ac = kept(m, Cat(*[run_ac & hit_ac[l] & ~hit_ac[l - 1] for l in range(1, 17)]), "oh_ac")
        loop.oh_dc, loop.oh_ac = oh_dc, oh_ac
        loop.run = run = Signal()           # a symbol was decoded (or found slow) this clock
        m.d.comb += run.eq(runnable)

        # Per length, in parallel with the comparators: the entries, and where an AC symbol of
        # that length would take the coefficient index (a DC symbol always leaves it at 1).
        ent_dc = kept(m, tables.fast_dc, "ent_dc", data.ArrayLayout(DcEntry, 16))
        ent_ac = kept(m, tables.fast_ac, "ent_ac", data.ArrayLayout(FastEntry, 16))
        if self.contexts == 2:
            self._step_after_pick(m, st, loop, ent_dc, ent_ac, hit_dc[1:], hit_ac[1:])
        else:
            k_sums = [st.k + e.run + e.adv for e in ent_ac]
            done_ac = kept(m, Cat(*[e.eob | ks[6] for e, ks in zip(ent_ac, k_sums)]),
                           "block_done")
            k_next_ac = data.View(data.ArrayLayout(6, 16), kept(m, Cat(*[
                Mux(done_ac[l] | ~e.adv, 0, ks[:6])
                for l, (e, ks) in enumerate(zip(ent_ac, k_sums))]), "k_next"))

            # The length picks one of them: and-or trees over the 32 one-hot lengths.
            _Step = data.StructLayout({"total": 5, "adv": 1, "k_next": 6, "block_done": 1})
            steps_dc = [Cat(e.total, e.adv, e.adv, Const(0, 5), Const(0, 1)) for e in ent_dc]
            steps_ac = [Cat(e.total, e.adv, k_next_ac[l], done_ac[l])
                        for l, e in enumerate(ent_ac)]
            chosen = data.View(_Step, select(m, [(oh_dc[l], steps_dc[l]) for l in range(16)]
                                             + [(oh_ac[l], steps_ac[l]) for l in range(16)],
                                             "step"))
            loop.total, loop.adv, loop.k_next, loop.block_done = (
                chosen.total, chosen.adv, chosen.k_next, chosen.block_done)
        matched = any_of(m, list(oh_dc) + list(oh_ac), "matched")
        if self.contexts == 2:
            loop.slow = matched & ~loop.adv & run       # read in retimed assignments
            return loop
        loop.slow = slow = Signal()
        m.d.comb += slow.eq(matched & ~loop.adv)
        return loop

    @staticmethod
    def _step_after_pick(m, st, loop, ent_dc, ent_ac, hit_dc, hit_ac):
        """With two contexts: the length picks the entry itself (bits, run, EOB), and the
        coefficient index and the block's end are computed from it in the assignments that
        use them, which run a clock later (retimed): the loop's clock ends at the pick.
        The pick reads the comparators' thermometers, not the one-hot lengths, and the
        class last: a five-input LUT per two lengths, a four-input OR, and the class's
        choice (another five-input LUT), where the one-hot, the pair's AND-OR and two ORs
        were four LUT levels behind the comparators' carry chains on the path that bound the
        core (docs/studies/huffman_loop.md)."""
        _Step = data.StructLayout({"total": 5, "adv": 1, "run": 4, "eob": 1})
        steps_dc = [Cat(e.total, e.adv, Const(0, 4), Const(0, 1)) for e in ent_dc]
        steps_ac = [Cat(e.total, e.adv, e.run, e.eob) for e in ent_ac]
        dc = first_of(m, hit_dc, steps_dc, "step_dc")
        ac = first_of(m, hit_ac, steps_ac, "step_ac")
        chosen = data.View(_Step, kept(m, Mux(st.is_dc, dc[0] | dc[1], ac[0] | ac[1]), "step"))
        k_sum = st.k + chosen.run + chosen.adv
        loop.total = chosen.total                       # the window gates it itself
        loop.adv = chosen.adv & loop.run
        loop.block_done = (chosen.eob | k_sum[6]) & loop.run
        loop.k_next = Mux(loop.block_done | ~chosen.adv, 0, k_sum[:6])

    @staticmethod
    def _advance_position(m, st, pos, loop, ctl):
        """The loop's step moves the scan on: next coefficient, block, component, MCU, and
        the restart or end check at an interval's or the scan's end."""
        # Before the restart's and the scan start's resets of the counters, which win.
        m.d.sync += st.mcu_ended.eq(loop.block_done & pos.mcu_end)
        with m.If(st.mcu_ended):
            m.d.sync += [st.mcus_left.eq(st.mcus_left - 1),
                         st.in_interval.eq(st.in_interval + 1)]
        with m.If(loop.adv):
            m.d.sync += [st.k.eq(loop.k_next), st.is_dc.eq(loop.block_done)]
        with m.If(loop.block_done):
            with m.If(pos.last_blk):
                m.d.sync += st.blk.eq(0)
            with m.Else():
                m.d.sync += st.blk.eq(st.blk + 1)
            m.d.sync += st.comp.eq(pos.next_comp)
            with m.If(pos.mcu_end):
                m.d.sync += [st.last_mcu.eq(pos.next_last_mcu),
                             st.last_in_interval.eq(pos.next_last_in_interval)]
            with m.If(pos.ends_scan):
                m.d.sync += st.phase.eq(2)
                ctl.setf("decoding", 0)
            with m.Elif(pos.ends_interval):
                m.d.sync += st.phase.eq(1)
                ctl.setf("decoding", 0)
        with m.If(loop.slow):
            ctl.setf("slow_wait", 1)
        ctl.setf("fresh", 0)

    def _record(self, m, st, sel, win, loop):
        """The record of this clock's symbol: all that the pipeline needs to finish it."""
        rec, is_dc, head = st.rec, st.is_dc, win.head
        m.d.sync += st.rec_valid.eq(loop.run)
        m.d.sync += [rec.kind.eq(Mux(loop.slow, _Kind.SLOW, _Kind.SYMBOL)),
                     rec.onehot.eq(loop.oh_dc | loop.oh_ac),
                     rec.window.eq(win.window[_BUF - _WIN:]),
                     rec.table.eq(Mux(is_dc, Cat(sel.tsel_dc, Const(0, 1)),
                                      Cat(sel.tsel_ac, Const(1, 1)))),
                     rec.k.eq(st.k), rec.is_dc.eq(is_dc), rec.comp.eq(st.comp),
                     rec.avail.eq(win.nvalid),
                     rec.rst_ahead.eq(head.kind == TokenKind.RESTART)]

    def _shift_window(self, m, st, win, loop, hs):
        """Refill one byte below the valid bits (emptied first when fresh), then shift out the
        symbol; returns whether a token is taken (the boundary checks may take one too)."""
        # No clock enable and no reset, which would each cost a LUT.
        head, nvalid, window = win.head, win.nvalid, win.window
        take_token = Signal()
        refill = Signal()
        m.d.comb += refill.eq(st.decoding & self.tokens.valid & (head.kind == TokenKind.DATA)
                              & (nvalid <= _BUF - 8))
        filled = Signal(_BUF)
        m.d.comb += filled.eq(Mux(st.fresh, 0, window)
                              | Mux(refill, Cat(Const(0, _BUF - 8), head.value) >> nvalid[:6], 0))
        m.d.comb += take_token.eq(refill)
        # nvalid + refill - total, and whether that is still enough, from the early operands:
        # only ``total`` is late.
        room = Signal(signed(8))
        m.d.comb += room.eq(nvalid + Mux(refill, 8, 0) - _NEED)
        if self.contexts == 2:
            self._shift_window_retimed(m, win, loop, hs, filled, nvalid + Mux(refill, 8, 0), room)
            return take_token
        shifted = shift_left(m, filled, loop.total, "window")
        m.d.sync += [window.eq(shifted), win.peek_dc_n.eq(~shifted[_BUF - 16:])]
        self._update_peeks(m, win, hs.scanning, shifted[_BUF - 16:])
        m.d.sync += [nvalid.eq(nvalid + Mux(refill, 8, 0) - loop.total),
                     win.enough.eq(loop.total <= room)]
        return take_token

    def _shift_window_retimed(self, m, win, loop, hs, filled, refilled, room):
        """With two contexts the window's register pair is placed by hand: the first register
        takes the refilled window and the step (where the loop's lookup ends), the second the
        shifted window a clock later.  So the loop is cut in two, the lookup in one clock and
        the shift in the next; each context still advances every other clock."""
        h = SimpleNamespace(filled=Signal(_BUF, name="h_filled"), total=Signal(5, name="h_total"),
                            run=Signal(name="h_run"), refilled=Signal(7, name="h_refilled"),
                            room=Signal(signed(8), name="h_room", init=-_NEED),
                            restart=Signal(name="h_restart"), scanning=Signal(name="h_scanning"))
        m.d.sync += [h.filled.eq(filled), h.total.eq(loop.total), h.run.eq(loop.run),
                     h.refilled.eq(refilled), h.room.eq(room), h.restart.eq(win.restart),
                     h.scanning.eq(hs.scanning)]
        # The step counts only where the loop ran: gated in each shift stage's LUT (its
        # select bit and the run flag, beside the two data bits).
        step = Cat(*[h.total[b] & h.run for b in range(len(h.total))])
        shifted = shift_left(m, h.filled, step, "window")
        m.d.sync += [win.window.eq(shifted), win.peek_dc_n.eq(~shifted[_BUF - 16:])]
        self._update_peeks(m, win, h.scanning, shifted[_BUF - 16:])
        with m.If(h.restart):
            m.d.sync += [win.nvalid.eq(0), win.enough.eq(0)]
        with m.Else():
            m.d.sync += [win.nvalid.eq(h.refilled - step), win.enough.eq(step <= h.room)]
        self._retimed[:] = [*vars(h).values(), win.window, win.peek_dc_n, win.peek_ac_n,
                            *win.peek_ram, win.nvalid, win.enough]

    @staticmethod
    def _update_peeks(m, win, scanning, first):
        """The copies of the window's first 16 bits that only the loop reads (the AC
        comparators' and the fast tables'): those with an enable load while scanning."""
        with m.If(scanning):
            m.d.sync += win.peek_ac_n.eq(~first)
        for peek, enabled in zip(win.peek_ram, win.peek_ram_enabled):
            if enabled:
                with m.If(scanning):
                    m.d.sync += peek.eq(first)
            else:
                m.d.sync += peek.eq(first)

    def _restart_window(self, m, win, ctl):
        """An empty window and a running loop: at a scan's start and after a restart marker."""
        if self.contexts == 2:
            m.d.comb += win.restart.eq(1)       # through the window's first register
        else:
            m.d.sync += [win.nvalid.eq(0), win.enough.eq(0)]
        ctl.setf("fresh", 1)
        ctl.setf("decoding", 1)

    def _boundary_checks(self, m, st, pos, win, ctl, take_token, hs):
        """At a restart interval's or the scan's end: the next token must be the right RSTn or
        the end of the scan, and no data may be left over."""
        phase, rec, head = st.phase, st.rec, win.head
        checking = hs.scanning & (phase == 1) | hs.scanning & (phase == 2)

        def verdict(status, marker=0):
            m.d.sync += [st.rec_valid.eq(1), rec.kind.eq(_Kind.FINAL), rec.status.eq(status),
                         rec.marker.eq(marker), phase.eq(3)]

        with m.If(checking):
            with m.If(win.nvalid >= 8):
                verdict(S.EXCESS_ENTROPY_DATA)
            with m.Elif(self.tokens.valid):
                with m.Switch(head.kind):
                    with m.Case(TokenKind.DATA):
                        verdict(S.EXCESS_ENTROPY_DATA)
                    with m.Case(TokenKind.EOF):
                        verdict(S.TRUNCATED)
                    with m.Case(TokenKind.RESTART):
                        with m.If((phase == 1) & (head.value[:3] == st.rst_next)):
                            m.d.comb += take_token.eq(1)
                            m.d.sync += [st.rec_valid.eq(1), rec.kind.eq(_Kind.RESTART),
                                         phase.eq(0), st.in_interval.eq(0),
                                         st.last_in_interval.eq(pos.interval_of_one),
                                         st.rst_next.eq(st.rst_next + 1)]
                            self._restart_window(m, win, ctl)
                        with m.Else():
                            verdict(S.BAD_RESTART)
                    with m.Case(TokenKind.END):
                        with m.If(phase == 2):
                            m.d.comb += take_token.eq(1)
                            verdict(S.OK, head.value)
                        with m.Else():
                            verdict(S.BAD_RESTART)

    @staticmethod
    def _pipeline_code(m, tables, st):
        """Pipeline 1: code length, code and magnitude bits; read VALPTR - MINCODE."""
        rec = st.rec
        r1 = SimpleNamespace()
        r1.rec = Signal(_Record, name="r1")
        r1.valid = Signal(name="r1_valid")
        r1.len = Signal(5, name="r1_len")            # 0: no code matched
        r1.code = Signal(16, name="r1_code")
        r1.after = Signal(11, name="r1_after")       # the bits after the code, first in the top bit
        length = _or_tree([Mux(rec.onehot[l - 1], l, 0) for l in range(1, 17)])
        m.d.comb += [tables.valoff_addr.eq(Cat((length - 1)[:4], rec.table))]
        m.d.sync += [r1.rec.eq(rec), r1.valid.eq(st.rec_valid), r1.len.eq(length),
                     r1.code.eq(_or_tree([Mux(rec.onehot[l - 1], rec.window[_WIN - l:], 0)
                                          for l in range(1, 17)])),
                     r1.after.eq(_or_tree([Mux(rec.onehot[l - 1],
                                               rec.window[_WIN - l - 11:_WIN - l], 0)
                                           for l in range(1, 17)]))]
        return r1

    @staticmethod
    def _pipeline_symbol(m, tables, r1):
        """Pipeline 2: read the symbol."""
        r2 = SimpleNamespace()
        r2.rec = Signal(_Record, name="r2")
        r2.valid = Signal(name="r2_valid")
        r2.len = Signal(5, name="r2_len")
        r2.after = Signal(11, name="r2_after")
        r2.code = Signal(4, name="r2_code")     # the code's low bits (a slow entry's address)
        m.d.comb += tables.symbol_addr.eq(Cat((r1.code + tables.valoff)[:8], r1.rec.table))
        m.d.sync += [r2.rec.eq(r1.rec), r2.valid.eq(r1.valid), r2.len.eq(r1.len),
                     r2.after.eq(r1.after), r2.code.eq(r1.code[:4])]
        return r2

    @staticmethod
    def _pipeline_checks(m, tables, r2):
        """Pipeline 3: the symbol's checks in the golden model's order, its value, and what
        it emits; returns the register, the check module (pipeline 4 adds to it) and the
        decoded symbol."""
        rec = r2.rec
        sym = SimpleNamespace()
        symbol = tables.symbol
        sym.size = size = symbol[0:4]
        sym.srun = srun = symbol[4:8]
        sym.dc = dc = rec.is_dc
        bad_category = Mux(dc, symbol > 11, size > 10)
        zrl = ~dc & (size == 0) & (srun == 15)
        sym.eob = eob = ~dc & (size == 0) & (srun != 15)
        position = rec.k + srun
        too_many = ~dc & ((zrl & (rec.k + 16 > 64)) | (~zrl & ~eob & (position > 63)))
        trunc = Mux(rec.rst_ahead, S.BAD_RESTART, S.TRUNCATED)
        # (Combinational logic of its own, see lutmap: it keeps the simulator fast.)
        m.submodules.check = chk = Module()
        status = Signal(8)
        with chk.If(r2.len == 0):
            chk.d.comb += status.eq(S.BAD_HUFFMAN_CODE)
        with chk.Elif(r2.len > rec.avail):
            chk.d.comb += status.eq(trunc)
        with chk.Elif(too_many):
            chk.d.comb += status.eq(S.TOO_MANY_COEFFICIENTS)
        with chk.Elif(bad_category):
            chk.d.comb += status.eq(S.BAD_COEFFICIENT)
        with chk.Elif(r2.len + size > rec.avail):
            chk.d.comb += status.eq(trunc)
        unused_bits = Signal(4)
        magnitude = Signal(11)
        chk.d.comb += [unused_bits.eq(11 - size), magnitude.eq(r2.after >> unused_bits)]
        value = Signal(signed(17))
        with chk.If(size == 0):
            chk.d.comb += value.eq(0)
        with chk.Elif(magnitude.bit_select((size - 1)[:4], 1)):
            chk.d.comb += value.eq(magnitude)
        with chk.Else():
            chk.d.comb += value.eq(magnitude - (Const(1, 17) << size) + 1)

        r3 = SimpleNamespace()
        r3.rec = Signal(data.StructLayout({"kind": 2, "status": 8, "marker": 8, "comp": 2,
                                           "is_dc": 1, "emits": 1, "beat": CoefficientLayout}),
                        name="r3")
        r3.valid = Signal(name="r3_valid")
        out = r3.rec
        m.d.sync += [r3.valid.eq(r2.valid), out.kind.eq(rec.kind), out.comp.eq(rec.comp),
                     out.is_dc.eq(dc), out.marker.eq(rec.marker),
                     out.status.eq(Mux(rec.kind == _Kind.FINAL, rec.status, status)),
                     out.beat.component.eq(rec.comp), out.beat.value.eq(value[:16]),
                     out.beat.zz.eq(0), out.beat.write.eq(0), out.beat.end.eq(0),
                     out.emits.eq(1)]
        with m.If(dc):
            m.d.sync += out.beat.write.eq(1)
        with m.Elif(eob):
            m.d.sync += [out.beat.value.eq(0), out.beat.end.eq(1)]
        with m.Elif(zrl):
            m.d.sync += [out.beat.value.eq(0), out.beat.end.eq(rec.k + 16 == 64),
                         out.emits.eq(rec.k + 16 == 64)]
        with m.Else():
            m.d.sync += [out.beat.zz.eq(position[:6]), out.beat.write.eq(1),
                         out.beat.end.eq(position == 63)]
        return r3, chk, sym

    def _patch_slow_entry(self, m, tables, st, r2, sym, loop, ctl, hs):
        """A slow symbol's fast-table entry is patched in for one use, so that codes longer
        than the fast tables cover cost a few clocks instead of a bigger table."""
        # The loop decodes the symbol again with it, and in that same clock the slow entry
        # goes back (the other codes at that place need it from the next clock on).  With
        # two contexts it goes back a clock later, from a register, and the loop waits that
        # clock: from the loop's ``run`` to the 32 tables' write enables was the two-file
        # core's critical path (one more clock per slow symbol).
        patch, patch_write, patched = st.patch, st.patch_write, st.patched
        dc = sym.dc
        with m.If(hs.scanning & r2.valid & (r2.rec.kind == _Kind.SLOW)):
            m.d.sync += [patch_write.eq(1), patch.ac.eq(~dc), patch.table.eq(r2.rec.table[:2]),
                         patch.length.eq(r2.len), patch.code.eq(r2.code),
                         patch.entry.total.eq(r2.len + sym.size),
                         patch.entry.run.eq(Mux(dc, 0, sym.srun)),
                         patch.entry.eob.eq(sym.eob), patch.entry.adv.eq(1)]
        restore = Signal()
        if self.contexts == 2:
            used = Signal()                 # the loop decoded with the patch last clock
            using = patched & loop.run & ~used
            m.d.sync += used.eq(using)
            with m.If(using):
                ctl.setf("slow_wait", 1)
            with m.If(used):
                ctl.setf("slow_wait", 0)
            m.d.comb += restore.eq(patched & (used | ~hs.scanning))
        else:
            m.d.comb += restore.eq(patched & (loop.run | ~hs.scanning))
        m.d.comb += [tables.patch.eq(patch), tables.patch_en.eq(patch_write | restore),
                     hs.patching.eq(patch_write | patched), tables.patching.eq(hs.patching)]
        with m.If(patched):                 # the restore's data, from a register
            m.d.comb += tables.patch.entry.eq(0)
        with m.If(restore):
            m.d.sync += patched.eq(0)
        with m.If(patch_write):
            m.d.sync += [patch_write.eq(0), patched.eq(1)]
            ctl.setf("slow_wait", 0)

    def _pipeline_output(self, m, fifo, st, r3, chk, ctl, hs):
        """Pipeline 4: DC prediction, output, verdicts."""
        preds, out = st.preds, r3.rec
        pred_new = (preds[out.comp] + out.beat.value)[:16]
        beat = Signal(CoefficientLayout)
        chk.d.comb += [beat.eq(out.beat), fifo.w_data.eq(beat)]
        with chk.If(out.is_dc):
            chk.d.comb += beat.value.eq(pred_new)
        with m.If(hs.scanning & r3.valid):
            with m.Switch(out.kind):
                with m.Case(_Kind.SYMBOL):
                    with m.If(out.status != 0):
                        ctl.finish(out.status)
                    with m.Else():
                        m.d.sync += self.symbols_decoded.eq(self.symbols_decoded + 1)
                        m.d.comb += fifo.w_en.eq(out.emits)
                        with m.If(out.is_dc):
                            m.d.sync += preds[out.comp].eq(pred_new)
                with m.Case(_Kind.RESTART):
                    m.d.sync += [pr.eq(0) for pr in preds]
                with m.Case(_Kind.FINAL):
                    ctl.finish(out.status, out.marker)

    def _start_scan(self, m, tables, st, win, ctl, hs, pipes):
        """A new scan starts afresh (last, so that it wins over the loop's own updates)."""
        with m.If(self.scan.valid & self.scan.ready):
            p = self.scan.payload
            self._restart_window(m, win, ctl)
            m.d.sync += [st.cfg.eq(p), hs.scanning.eq(1), st.comp.eq(0),
                         st.blk.eq(0), st.k.eq(0), st.is_dc.eq(1), st.mcus_left.eq(p.mcus),
                         st.in_interval.eq(0), st.rst_next.eq(0), st.phase.eq(0),
                         st.mcu_ended.eq(0), st.last_mcu.eq(p.mcus == 1),
                         st.last_in_interval.eq(p.restart_interval == 1)]
            ctl.setf("slow_wait", 0)
            # h * v of 2-bit factors, as shifts and an add (a '*' would take a DSP block).
            m.d.sync += [st.blocks_here[c].eq(Mux(p.v[c][0], p.h[c], 0)
                                              + Mux(p.v[c][1], p.h[c] << 1, 0))
                         for c in range(MAX_COMPONENTS)]
            m.d.sync += [pr.eq(0) for pr in st.preds]
            m.d.sync += [st.rec_valid.eq(0)] + [r.valid.eq(0) for r in pipes]
            with m.If(tables.error):
                ctl.finish(S.BAD_TABLE)
