"""The resampler's horizontal pass in gateware: rows of 8-bit pixels in, rows resized by
Pillow's integer arithmetic out (``sim/resample_model.py`` is the golden model).

Output pixel ``x`` of a row is ``clip8((2**21 + sum(in[first + k] * w[k])) >> 22)`` over its
``count`` taps.  The host computes ``first``, ``count`` and the weights from the sizes
(Pillow's coefficients) and loads them per output column into a table (:func:`row_table`
packs an entry).  The input goes through a window of the last ``taps`` pixels; output ``x``
is computed in the clock when input ``first + count - 1`` is the newest in the window, so
its weights are stored already aligned to the window (newest first) and the multiply-add
needs no multiplexer: ``taps`` multipliers per channel, one output per clock.  Pillow's
bounds only grow from one output to the next, so the rule "emit when the newest input is
the last one output ``x`` needs, else take an input" visits every input and output of a row
once, in order: ``in_width + out_width`` clocks a row at most.  Rows are delimited by
``last`` on the input; the output marks its rows' last pixels too.

Not yet here (issue 18): a rate of more than one pixel a clock, and taking an input while an
output is made.
"""

import numpy as np
from amaranth import Cat, Module, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..jpeg.ycc_rgb import clamp_u8

__all__ = ["RowResampler", "row_table", "row_arrays", "check_counts", "weighted_pixel", "entry_layout", "PRECISION_BITS",
           "WEIGHT_BITS"]

#: Pillow's fraction bits; a weight is a signed 24-bit integer (|w| < 2**23).
PRECISION_BITS = 22
WEIGHT_BITS = 24


def entry_layout(taps, width_bits):
    """One output column's table entry: the input index it waits for (``first + count -
    1``) and its weights aligned to the window (index 0: the newest input)."""
    return data.StructLayout({
        "need": unsigned(width_bits),
        "weights": data.ArrayLayout(signed(WEIGHT_BITS), taps),
    })


def check_counts(count, taps):
    """Raise unless every output reads 1 to ``taps`` inputs."""
    count = np.asarray(count)
    if count.size and count.max() > taps:
        raise ValueError(f"an output needs {int(count.max())} taps, the resampler has {taps}")
    if count.size and count.min() < 1:
        raise ValueError("an output with no input taps")


def row_arrays(coefficients, taps):
    """The table of one axis (``sim.resample_model.coefficients``) as arrays: ``need`` per
    output (its last input), and its ``taps`` weights newest-first.  Raises when an output
    needs more taps."""
    count = np.asarray(coefficients.count, np.int64)
    check_counts(count, taps)
    weights = np.asarray(coefficients.weights, np.int64)
    back = count[:, None] - 1 - np.arange(taps)[None, :]       # the weight for window slot j
    aligned = np.take_along_axis(weights, np.clip(back, 0, weights.shape[1] - 1), axis=1)
    return (np.asarray(coefficients.first, np.int64) + count - 1,
            np.where(back >= 0, aligned, 0))


def row_table(coefficients, taps):
    """:func:`row_arrays` as (need, weights) pairs of ints, an entry per output column."""
    needs, weights = row_arrays(coefficients, taps)
    return [(int(n), [int(v) for v in w]) for n, w in zip(needs, weights)]


def weighted_pixel(m, samples, weights, channels):
    """Pillow's ``clip8((2**21 + sum(sample * weight)) >> 22)`` per channel of the packed
    pixels ``samples`` (one a tap) and the signed ``weights`` (combinational, into ``m``);
    the channels packed again."""
    channels_out = []
    for c in range(channels):
        acc = 1 << (PRECISION_BITS - 1)
        for sample, weight in zip(samples, weights):
            acc = acc + sample[8 * c:8 * c + 8] * weight
        total = Signal(signed(8 + WEIGHT_BITS + len(samples).bit_length() + 1),
                       name=f"sum{c}")
        m.d.comb += total.eq(acc)
        channels_out.append(clamp_u8(total >> PRECISION_BITS))
    return Cat(*channels_out)


class RowResampler(wiring.Component):
    """``channels`` 8-bit channels a pixel; rows up to ``max_columns`` pixels in and out;
    ``taps`` weights an output (bilinear downscaling by s needs 2 ceil(s) + 1)."""

    def __init__(self, max_columns=4096, taps=7, channels=3):
        self.max_columns, self.taps, self.channels = max_columns, taps, channels
        self.width_bits = max(1, (max_columns - 1).bit_length())
        pixel = data.StructLayout({"pixel": unsigned(8 * channels), "last": 1})
        self.entry = entry_layout(taps, self.width_bits + 1)
        super().__init__({
            "i": In(stream.Signature(pixel)),
            "o": Out(stream.Signature(pixel)),
            "out_width": In(unsigned(self.width_bits + 1)),
            # the table's write port: entry ``table_addr`` for output column table_addr
            "table_addr": In(unsigned(self.width_bits)),
            "table_data": In(self.entry),
            "table_we": In(1),
            "restart": In(1),                       # drop a row begun (a new image)
        })

    def elaborate(self, platform):
        m = Module()
        taps, channels = self.taps, self.channels
        m.submodules.table = table = Memory(shape=self.entry, depth=self.max_columns, init=[])
        write = table.write_port()
        read = table.read_port()
        m.d.comb += [write.addr.eq(self.table_addr), write.data.eq(self.table_data),
                     write.en.eq(self.table_we)]

        window = [Signal(8 * channels, name=f"window{j}") for j in range(taps)]
        received = Signal(self.width_bits + 1)      # inputs of this row taken so far
        column = Signal(self.width_bits + 1)        # the next output column
        row_in_done = Signal()                      # the row's last input was taken
        entry = self.entry(read.data)

        outputs_left = column < self.out_width
        ready_to_emit = outputs_left & (received == entry.need + 1)
        emit = ready_to_emit & (~self.o.valid | self.o.ready)
        take = ~ready_to_emit & ~row_in_done & self.i.valid
        row_done = row_in_done & ~outputs_left

        # the table entry of the column after this clock (the read port answers a clock on)
        next_column = Signal.like(column)
        m.d.comb += next_column.eq(column)
        with m.If(emit):
            m.d.comb += next_column.eq(column + 1)
        with m.If(row_done):
            m.d.comb += next_column.eq(0)
        m.d.comb += read.addr.eq(next_column)
        m.d.sync += column.eq(next_column)

        # the multiply-add: per channel, taps products of the window and the aligned weights
        pixel = weighted_pixel(m, window, entry.weights, channels)

        m.d.comb += self.i.ready.eq(take)
        with m.If(take):
            m.d.sync += [window[0].eq(self.i.payload.pixel),
                         received.eq(received + 1)]
            m.d.sync += [window[j].eq(window[j - 1]) for j in range(1, taps)]
            with m.If(self.i.payload.last):
                m.d.sync += row_in_done.eq(1)
        with m.If(row_done | self.restart):
            m.d.sync += [received.eq(0), row_in_done.eq(0)]
        with m.If(self.restart):
            m.d.comb += next_column.eq(0)

        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(emit):
            m.d.sync += [self.o.valid.eq(1), self.o.payload.pixel.eq(pixel),
                         self.o.payload.last.eq(column + 1 == self.out_width)]
        return m
