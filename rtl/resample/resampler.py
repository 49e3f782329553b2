"""Crop, then resize, in gateware: torchvision's ``resized_crop`` on a Pillow image
(``Image.crop(box).resize(size, BILINEAR)``), bit-exact; the golden model is
``sim/resample_model.crop_resize``.

A decoded image comes in as rows (``last`` on each row's final beat).  The crop stage keeps
the pixels inside the box and drops the rest; the two passes follow in the order Pillow runs
them, chosen per image by ``vertical_first`` (Pillow 13: vertical first when the height
loses more than twice as many pixels as the width; ``resample_model.vertical_first``), since
the intermediate image is rounded to 8 bits and the order changes the pixels.  The host
loads both passes' tables (:func:`~.table.table_entries`) and the sizes before the image, and pulses
``restart``.  A pass whose size does not change runs with identity weights, which gives the
pixels Pillow gives by skipping it.

Every stage passes beats of up to four pixels of a row (:mod:`.beats`), a beat a clock: the
crop keeps the part of a beat inside the box and moves it to the low lanes.  Behind a
decoder core (``rtl/jpeg/core.py``) the input is the raster stage's beats, and the tables
and sizes come from the file's resize request (``request_reader.py``).
"""

from amaranth import Module, Mux, ResetInserter, Signal, unsigned
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .beats import LANES, beat_layout, check_lanes
from .column_resampler import ColumnResampler
from .row_resampler import RowResampler

__all__ = ["Resampler"]


class Resampler(wiring.Component):
    """Crops and outputs up to ``max_columns`` x ``max_rows``, ``taps`` per pass, beats of
    ``lanes`` pixels."""

    def __init__(self, max_columns=1024, max_rows=1024, taps=7, channels=3, max_image=None,
                 lanes=LANES):
        # max_image: the (width, height) of the largest decoded image the crop takes
        # (default: the crop and output limits)
        self.max_columns, self.max_rows, self.taps = max_columns, max_rows, taps
        self.lanes = check_lanes(lanes)
        self.rows = RowResampler(max_columns=max_columns, taps=taps, channels=channels,
                                 lanes=lanes)
        self.columns = ColumnResampler(max_columns=max_columns, max_rows=max_rows, taps=taps,
                                       channels=channels, lanes=lanes)
        beat = beat_layout(channels, lanes)
        image_w, image_h = max_image or (max_columns, max_rows)
        size = unsigned(max(max_columns, max_rows, image_w, image_h).bit_length() + 1)
        super().__init__({
            "i": In(stream.Signature(beat)),
            "o": Out(stream.Signature(beat)),
            "left": In(size), "top": In(size), "crop_width": In(size), "crop_height": In(size),
            "out_width": In(size), "out_height": In(size),
            "vertical_first": In(1),
            "row_table_addr": In(self.rows.table_addr.shape()),
            "row_table_data": In(self.rows.entry),
            "row_table_we": In(1),
            "column_table_addr": In(self.columns.table_addr.shape()),
            "column_table_data": In(self.columns.entry),
            "column_table_we": In(1),
            "restart": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.rows = rows = self.rows
        m.submodules.columns = columns = self.columns
        m.d.comb += [rows.table_addr.eq(self.row_table_addr),
                     rows.table_data.eq(self.row_table_data),
                     rows.table_we.eq(self.row_table_we),
                     columns.table_addr.eq(self.column_table_addr),
                     columns.table_data.eq(self.column_table_data),
                     columns.table_we.eq(self.column_table_we),
                     columns.restart.eq(self.restart),
                     rows.restart.eq(self.restart),
                     columns.out_height.eq(self.out_height),
                     rows.out_width.eq(self.out_width)]

        # the crop, a beat a clock: the beat's part inside the box, moved to the low lanes
        x = Signal.like(self.left)                      # the column of the beat's lane 0
        y = Signal.like(self.top)
        count = self.i.payload.count
        right = self.left + self.crop_width
        end = x + count
        lo = Signal.like(self.left)
        hi = Signal.like(self.left)
        m.d.comb += [lo.eq(Mux(x > self.left, x, self.left)),
                     hi.eq(Mux(end < right, end, right))]
        inside = (y >= self.top) & (y < self.top + self.crop_height) & (hi > lo)
        shift = Signal(range(max(2, self.lanes)))
        m.d.comb += shift.eq(lo - x)
        cropped = stream.Signature(self.i.payload.shape()).create()
        m.d.comb += [cropped.valid.eq(self.i.valid & inside),
                     cropped.payload.count.eq(hi - lo),
                     cropped.payload.last.eq(hi == right),
                     self.i.ready.eq(~inside | cropped.ready)]
        with m.Switch(shift):
            for s in range(self.lanes):
                with m.Case(s):
                    m.d.comb += [cropped.payload.pixels[k].eq(self.i.payload.pixels[k + s])
                                 for k in range(self.lanes - s)]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += x.eq(end)
            with m.If(self.i.payload.last):
                m.d.sync += [x.eq(0), y.eq(y + 1)]
        with m.If(self.restart):
            m.d.sync += [x.eq(0), y.eq(0)]
        # the passes, in Pillow's order for this image, each stage's output through a
        # two-beat FIFO, whose ready is a register: no combinational path runs from one
        # pass's ready through the other (or through both orders' multiplexers)
        def decoupled(name, source):
            fifo = ResetInserter(self.restart)(SyncFIFO(width=beat.size, depth=2))
            m.submodules[name] = fifo
            m.d.comb += [fifo.w_data.eq(source.payload), fifo.w_en.eq(source.valid),
                         source.ready.eq(fifo.w_rdy)]
            sink = stream.Signature(beat).create()
            m.d.comb += [sink.valid.eq(fifo.r_rdy), sink.payload.eq(fifo.r_data),
                         fifo.r_en.eq(sink.ready)]
            return sink

        beat = self.i.payload.shape()
        crop_out = decoupled("crop_out", cropped)
        rows_out = decoupled("rows_out", rows.o)
        columns_out = decoupled("columns_out", columns.o)

        def connect(source, sink):
            m.d.comb += [sink.valid.eq(source.valid), sink.payload.eq(source.payload),
                         source.ready.eq(sink.ready)]

        with m.If(self.vertical_first):
            m.d.comb += columns.width.eq(self.crop_width)
            connect(crop_out, columns.i)
            connect(columns_out, rows.i)
            connect(rows_out, self.o)
        with m.Else():
            m.d.comb += columns.width.eq(self.out_width)
            connect(crop_out, rows.i)
            connect(rows_out, columns.i)
            connect(columns_out, self.o)
        return m
