"""Turn an 8x8 block arriving in raster order into its eight columns, one column per beat.

Both IDCT passes need whole columns (pass 1) or rows (pass 2) while data arrives the other way
round; this is the corner-turn between them.  The block is kept in eight small RAMs with a
skewed layout: element (row r, column c) lives in RAM (r + c) mod 8 at address r.  Any run of
up to eight elements of one row, and any whole column, then touches eight different RAMs, so
a row segment is written and a column read in one clock with a single port per RAM.  Each
RAM holds ``slots`` blocks (two: 16 entries, a LUT-RAM on most FPGAs) so that one block is
read while the next is written: with 8-lane input it sustains one block every 8 clocks.
``freed`` pulses as a slot's last column is read, for a producer that counts credits (the
IDCT's free-running passes, which need four slots to cover their round trip).

The skew costs a rotation on each side (8 lanes of the element's width).  They are written
as log2(8) stages of two-way multiplexers: as indexed ``Array`` reads they became yosys
``$pmux`` cells that synth_ecp5 maps to more LUT4s (the 8-lane IDCT with both gathers: 5,559
LUT4 against 3,698; docs/architecture.md, "Area").
"""

from amaranth import Module, Signal, Mux, Cat
from amaranth.lib import wiring, stream, data
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..small_ram import check_small_ram, ram_style

__all__ = ["ColumnGather"]


def _rotate(values, amount):
    """The list ``values[(k + amount) % n]`` for k = 0..n-1 (n a power of two, ``amount``
    a signal of log2(n) bits), as log2(n) stages of two-way multiplexers."""
    n = len(values)
    for bit in range(n.bit_length() - 1):
        step = 1 << bit
        values = [Mux(amount[bit], values[(k + step) % n], values[k]) for k in range(n)]
    return values


class ColumnGather(wiring.Component):
    """Raster-order beats of ``lanes`` elements in; column vectors (row 0 first) out.

    ``small_ram="block"`` reads the RAMs through their output registers, as block RAM reads
    (one clock more of latency, the same rate): on the ECP5 a 16x4 LUT RAM costs six logic
    cells, so the eight RAMs of a 32-bit gather are 384 of them, where eight of the 208
    block RAMs hold them.  ``"lut"`` reads them in the same clock (LUT RAM's own read)."""

    def __init__(self, shape, lanes, small_ram="lut", slots=2):
        problem = check_small_ram(small_ram)
        if lanes not in (1, 2, 4, 8):
            problem = f"lanes must be 1, 2, 4 or 8, not {lanes}"
        if slots not in (2, 4):
            problem = f"slots must be 2 or 4, not {slots}"
        if problem:
            self._MustUse__silence = True   # never elaborated: no "unused" warning for it
            raise ValueError(problem)
        self._shape, self._lanes = shape, lanes
        self._block_ram = small_ram == "block"
        self.slots = slots
        super().__init__({
            "i": In(stream.Signature(data.ArrayLayout(shape, lanes))),
            "o": Out(stream.Signature(data.ArrayLayout(shape, 8))),
            "freed": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        lanes = self._lanes
        beats = 64 // lanes
        rams = []
        for b in range(8):
            if self._block_ram:
                # A slot is written only while no read of it is pending (``full``), so a
                # read never meets a write to its address.
                ram = Memory(shape=self._shape, depth=8 * self.slots, init=[],
                             attrs={"ram_style": ram_style("block"), "no_rw_check": 1})
                rams.append((ram.write_port(), ram.read_port()))
            else:
                ram = Memory(shape=self._shape, depth=8 * self.slots, init=[])
                rams.append((ram.write_port(), ram.read_port(domain="comb")))
            m.submodules[f"ram{b}"] = ram

        slots = self.slots
        full = Signal(slots)      # which block slots hold a complete block
        wslot = Signal(range(slots))
        wbeat = Signal(range(beats))
        rslot = Signal(range(slots))
        rcol = Signal(3)
        set_full = Signal(slots)
        clear_full = Signal(slots)

        # Write side: beat k carries row (k*lanes)//8, columns (k*lanes)%8 + l.
        m.d.comb += self.i.ready.eq(~full.bit_select(wslot, 1))
        write = self.i.valid & self.i.ready
        index = Signal(6)
        m.d.comb += index.eq(wbeat * lanes)
        row, col0 = index[3:6], index[0:3]
        # RAM b takes lane (b - row - col0) mod 8 when that lane exists, which (lanes dividing
        # 8) is lane (b - row - col0) mod lanes: the lanes rotated by -(row + col0).
        back = Signal(3)
        m.d.comb += back.eq(-(row + col0))
        lanes_in = _rotate([self.i.payload[l] for l in range(lanes)],
                           back[:lanes.bit_length() - 1])
        for b, (wport, _) in enumerate(rams):
            lane = Signal(3, name=f"lane_for_ram{b}")   # which input lane lands in RAM b
            m.d.comb += [
                lane.eq(b - row - col0),
                wport.addr.eq(Cat(row, wslot)),
                wport.data.eq(lanes_in[b % lanes]),
                wport.en.eq(write & (lane < lanes)),
            ]
        with m.If(write):
            m.d.sync += wbeat.eq(wbeat + 1)
            with m.If(wbeat == beats - 1):
                m.d.sync += [wbeat.eq(0), wslot.eq(wslot + 1)]
                m.d.comb += set_full.eq(1 << wslot)

        # Read side: column c has row r in RAM (r + c) mod 8, so RAM b supplies row (b - c).
        # With block RAM a column is read into the RAMs' output registers when they are
        # empty or being emptied (``take``), and leaves from there a clock later.
        available = full.bit_select(rslot, 1)
        take = Signal()                         # column rcol is read this clock
        if self._block_ram:
            out_valid = Signal()
            out_col = Signal(3)                 # the column in the output registers
            m.d.comb += [take.eq(available & (~out_valid | self.o.ready)),
                         self.o.valid.eq(out_valid)]
            with m.If(take):
                m.d.sync += [out_valid.eq(1), out_col.eq(rcol)]
            with m.Elif(self.o.ready):
                m.d.sync += out_valid.eq(0)
            rotate_by = out_col
        else:
            m.d.comb += [take.eq(available & self.o.ready), self.o.valid.eq(available)]
            rotate_by = rcol
        for b, (_, rport) in enumerate(rams):
            row_of_b = Signal(3, name=f"row_in_ram{b}")
            m.d.comb += [row_of_b.eq(b - rcol), rport.addr.eq(Cat(row_of_b, rslot))]
            if self._block_ram:
                m.d.comb += rport.en.eq(take)
        for r, value in enumerate(_rotate([rport.data for _, rport in rams], rotate_by)):
            m.d.comb += self.o.payload[r].eq(value)
        with m.If(take):
            m.d.sync += rcol.eq(rcol + 1)
            with m.If(rcol == 7):
                m.d.sync += rslot.eq(rslot + 1)
                m.d.comb += [clear_full.eq(1 << rslot), self.freed.eq(1)]
        m.d.sync += full.eq((full | set_full) & ~clear_full)
        return m
