"""Crop, then resize, in gateware: torchvision's ``resized_crop`` on a Pillow image
(``Image.crop(box).resize(size, BILINEAR)``), bit-exact; the golden model is
``sim/resample_model.crop_resize``.

A decoded image comes in as rows (``last`` on each row's final pixel).  The crop stage keeps
the pixels inside the box and drops the rest; the two passes follow in the order Pillow runs
them, chosen per image by ``vertical_first`` (Pillow 13: vertical first when the height
loses more than twice as many pixels as the width; ``resample_model.vertical_first``), since
the intermediate image is rounded to 8 bits and the order changes the pixels.  The host
loads both passes' tables (:func:`~.row_resampler.row_table`,
:func:`~.column_resampler.column_table`) and the sizes before the image, and pulses
``restart``.  A pass whose size does not change runs with identity weights, which gives the
pixels Pillow gives by skipping it.

Behind a decoder core (``rtl/jpeg/core.py``) the tables and sizes come from the file's resize
request (``request_reader.py``).  Not yet here (issue 18): more than one pixel a clock.
"""

from amaranth import Module, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .column_resampler import ColumnResampler
from .row_resampler import RowResampler

__all__ = ["Resampler"]


class Resampler(wiring.Component):
    """Crops and outputs up to ``max_columns`` x ``max_rows``, ``taps`` per pass."""

    def __init__(self, max_columns=1024, max_rows=1024, taps=7, channels=3, max_image=None):
        # max_image: the (width, height) of the largest decoded image the crop takes
        # (default: the crop and output limits)
        self.max_columns, self.max_rows, self.taps = max_columns, max_rows, taps
        self.rows = RowResampler(max_columns=max_columns, taps=taps, channels=channels)
        self.columns = ColumnResampler(max_columns=max_columns, max_rows=max_rows, taps=taps,
                                       channels=channels)
        pixel = data.StructLayout({"pixel": unsigned(8 * channels), "last": 1})
        image_w, image_h = max_image or (max_columns, max_rows)
        size = unsigned(max(max_columns, max_rows, image_w, image_h).bit_length() + 1)
        super().__init__({
            "i": In(stream.Signature(pixel)),
            "o": Out(stream.Signature(pixel)),
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

        # the crop: count the decoded image's columns and rows, pass what is in the box
        x = Signal.like(self.left)
        y = Signal.like(self.top)
        inside = (x >= self.left) & (x < self.left + self.crop_width) & \
            (y >= self.top) & (y < self.top + self.crop_height)
        cropped = stream.Signature(self.i.payload.shape()).create()
        m.d.comb += [cropped.valid.eq(self.i.valid & inside),
                     cropped.payload.pixel.eq(self.i.payload.pixel),
                     cropped.payload.last.eq(x == self.left + self.crop_width - 1),
                     self.i.ready.eq(~inside | cropped.ready)]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += x.eq(x + 1)
            with m.If(self.i.payload.last):
                m.d.sync += [x.eq(0), y.eq(y + 1)]
        with m.If(self.restart):
            m.d.sync += [x.eq(0), y.eq(0)]

        # the passes, in Pillow's order for this image
        def connect(source, sink):
            m.d.comb += [sink.valid.eq(source.valid), sink.payload.eq(source.payload),
                         source.ready.eq(sink.ready)]

        with m.If(self.vertical_first):
            m.d.comb += columns.width.eq(self.crop_width)
            connect(cropped, columns.i)
            connect(columns.o, rows.i)
            connect(rows.o, self.o)
        with m.Else():
            m.d.comb += columns.width.eq(self.out_width)
            connect(cropped, rows.i)
            connect(rows.o, columns.i)
            connect(columns.o, self.o)
        return m
