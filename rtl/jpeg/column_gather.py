"""Turn an 8x8 block arriving in raster order into its eight columns, one column per beat.

Both IDCT passes need whole columns (pass 1) or rows (pass 2) while data arrives the other way
round; this is the corner-turn between them.  Two banks alternate so that one block is read
while the next is written: with 8-lane input it sustains one block every 8 clocks.
"""

from amaranth import Module, Signal, Array, Mux
from amaranth.lib import wiring, stream, data
from amaranth.lib.wiring import In, Out

__all__ = ["ColumnGather"]


class ColumnGather(wiring.Component):
    """Raster-order beats of ``lanes`` elements in; column vectors (row 0 first) out."""

    def __init__(self, shape, lanes):
        if lanes not in (1, 2, 4, 8):
            self._MustUse__silence = True   # never elaborated: no "unused" warning for it
            raise ValueError(f"lanes must be 1, 2, 4 or 8, not {lanes}")
        self._shape, self._lanes = shape, lanes
        super().__init__({
            "i": In(stream.Signature(data.ArrayLayout(shape, lanes))),
            "o": Out(stream.Signature(data.ArrayLayout(shape, 8))),
        })

    def elaborate(self, platform):
        m = Module()
        lanes = self._lanes
        beats = 64 // lanes
        banks = [[Signal(self._shape, name=f"bank{b}_r{e // 8}c{e % 8}") for e in range(64)]
                 for b in range(2)]
        full = Signal(2)
        wbank = Signal()
        wbeat = Signal(range(beats))
        rbank = Signal()
        rcol = Signal(3)

        # Write side: a beat lands in the bank being filled; the last beat hands it to the reader.
        m.d.comb += self.i.ready.eq(~full.bit_select(wbank, 1))
        write = self.i.valid & self.i.ready
        for b, bank in enumerate(banks):
            for e, cell in enumerate(bank):
                with m.If(write & (wbank == b) & (wbeat == e // lanes)):
                    m.d.sync += cell.eq(self.i.payload[e % lanes])
        set_full = Signal(2)
        clear_full = Signal(2)
        with m.If(write):
            m.d.sync += wbeat.eq(wbeat + 1)
            with m.If(wbeat == beats - 1):
                m.d.sync += [wbeat.eq(0), wbank.eq(~wbank)]
                m.d.comb += set_full.eq(1 << wbank)

        # Read side: column rcol of the full bank.
        m.d.comb += self.o.valid.eq(full.bit_select(rbank, 1))
        for r in range(8):
            options = [Array(bank[r * 8 + c] for c in range(8))[rcol] for bank in banks]
            m.d.comb += self.o.payload[r].eq(Mux(rbank, options[1], options[0]))
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += rcol.eq(rcol + 1)
            with m.If(rcol == 7):
                m.d.sync += rbank.eq(~rbank)
                m.d.comb += clear_full.eq(1 << rbank)
        m.d.sync += full.eq((full | set_full) & ~clear_full)
        return m
