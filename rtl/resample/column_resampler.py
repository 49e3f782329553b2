"""The resampler's vertical pass in gateware: rows of 8-bit pixels in, each output row the
weighted sum of ``count`` consecutive input rows, by Pillow's integer arithmetic
(``sim/resample_model.py`` is the golden model).

Input row ``r`` is kept in line buffer ``r mod taps``.  Output row ``y`` is made once input
row ``first + count - 1`` (its ``need``) has arrived: every buffer is read at the same
column in one clock, and each buffer's weight is stored per output row in the table,
already matched to the input row that buffer then holds (:func:`column_table`), so the
multiply-add needs no multiplexer.  The pass alternates: it takes input rows until the next
output row can be made, then makes it (one pixel a clock; a row of both costs
``2 x width`` clocks), because the next input row would overwrite a row still needed.

Not yet here (issue 18): rows in and out at more than one pixel a clock, and taking the
next input row while an output row is made.
"""

import numpy as np
from amaranth import Module, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .row_resampler import WEIGHT_BITS, check_counts, weighted_pixel

__all__ = ["ColumnResampler", "column_table", "column_arrays"]


def column_arrays(coefficients, taps):
    """The vertical axis's table (``sim.resample_model.coefficients``) as arrays: ``need``
    per output row and one weight per line buffer (buffer ``b`` then holds input row
    ``need - ((need - b) mod taps)``)."""
    count = np.asarray(coefficients.count, np.int64)
    check_counts(count, taps)
    weights = np.asarray(coefficients.weights, np.int64)
    needs = np.asarray(coefficients.first, np.int64) + count - 1
    back = (needs[:, None] - np.arange(taps)[None, :]) % taps  # buffer b: input need - back
    index = count[:, None] - 1 - back
    per_buffer = np.take_along_axis(weights, np.clip(index, 0, weights.shape[1] - 1), axis=1)
    return needs, np.where(back < count[:, None], per_buffer, 0)


def column_table(coefficients, taps):
    """:func:`column_arrays` as (need, weights) pairs of ints, an entry per output row."""
    needs, weights = column_arrays(coefficients, taps)
    return [(int(n), [int(v) for v in w]) for n, w in zip(needs, weights)]


class ColumnResampler(wiring.Component):
    """Rows up to ``max_columns`` pixels of ``channels`` 8-bit channels; images up to
    ``max_rows`` output rows; ``taps`` line buffers."""

    def __init__(self, max_columns=4096, max_rows=4096, taps=7, channels=3):
        self.max_columns, self.max_rows = max_columns, max_rows
        self.taps, self.channels = taps, channels
        self.x_bits = max(1, (max_columns - 1).bit_length())
        self.y_bits = max(1, (max_rows - 1).bit_length())
        pixel = data.StructLayout({"pixel": unsigned(8 * channels), "last": 1})
        self.entry = data.StructLayout({
            "need": unsigned(self.y_bits + 1),
            "weights": data.ArrayLayout(signed(WEIGHT_BITS), taps),
        })
        super().__init__({
            "i": In(stream.Signature(pixel)),
            "o": Out(stream.Signature(pixel)),
            "width": In(unsigned(self.x_bits + 1)),        # of every row, in and out
            "out_height": In(unsigned(self.y_bits + 1)),
            "table_addr": In(unsigned(self.y_bits)),
            "table_data": In(self.entry),
            "table_we": In(1),
            # a new image: its first row comes next (the table and sizes set before)
            "restart": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        taps, channels = self.taps, self.channels
        m.submodules.table = table = Memory(shape=self.entry, depth=self.max_rows, init=[])
        write = table.write_port()
        read = table.read_port()
        m.d.comb += [write.addr.eq(self.table_addr), write.data.eq(self.table_data),
                     write.en.eq(self.table_we)]
        entry = self.entry(read.data)

        rows_in = Signal(self.y_bits + 2)               # input rows taken completely
        row = Signal(self.y_bits + 1)                   # the next output row
        slot = Signal(range(taps))                      # the buffer of the row coming in
        column_in = Signal(self.x_bits + 1)
        column_out = Signal(self.x_bits + 1)            # the next column to read
        pending = Signal()                              # a read's data is at the ports

        rows_left = row < self.out_height
        making = rows_left & (rows_in == entry.need + 1)

        buffers, ports = [], []
        for b in range(taps):
            mem = Memory(shape=unsigned(8 * channels), depth=self.max_columns, init=[])
            m.submodules[f"line{b}"] = mem
            w, r = mem.write_port(), mem.read_port()
            buffers.append((w, r))
            ports.append(r)

        # input: into the buffer of its row, while no output row can be made
        take = ~making & self.i.valid
        m.d.comb += self.i.ready.eq(take)
        for b, (w, _) in enumerate(buffers):
            m.d.comb += [w.addr.eq(column_in), w.data.eq(self.i.payload.pixel),
                         w.en.eq(take & (slot == b))]
        with m.If(take):
            m.d.sync += column_in.eq(column_in + 1)
            with m.If(self.i.payload.last):
                m.d.sync += [column_in.eq(0), rows_in.eq(rows_in + 1), slot.eq(slot + 1)]
                with m.If(slot == taps - 1):
                    m.d.sync += slot.eq(0)

        # output: read every buffer at one column, multiply-add the data a clock later
        pixel = weighted_pixel(m, [r.data for r in ports], entry.weights, channels)

        advance = making & (~pending | ~self.o.valid | self.o.ready)
        issue = advance & (column_out < self.width)
        for r in ports:
            m.d.comb += [r.addr.eq(column_out), r.en.eq(advance)]
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(advance):
            m.d.sync += pending.eq(issue)
            with m.If(pending):
                m.d.sync += [self.o.valid.eq(1), self.o.payload.pixel.eq(pixel),
                             self.o.payload.last.eq(column_out == self.width)]
            with m.If(issue):
                m.d.sync += column_out.eq(column_out + 1)
        row_made = advance & ~issue & pending
        # the table entry of the row after this clock (the read port answers a clock on)
        next_row = Signal.like(row)
        m.d.comb += next_row.eq(row)
        with m.If(row_made):
            m.d.comb += next_row.eq(row + 1)
            m.d.sync += column_out.eq(0)
        m.d.comb += read.addr.eq(next_row)
        m.d.sync += row.eq(next_row)
        with m.If(self.restart):
            m.d.comb += read.addr.eq(0)
            m.d.sync += [rows_in.eq(0), row.eq(0), slot.eq(0), column_in.eq(0),
                         column_out.eq(0), pending.eq(0)]
        return m
