"""Reads a resize request (``request.py``) a word a clock into the resampler's tables and
sizes, and checks it, so that no request can make the resampler hang or overrun.

Refused (``bad`` in the clock of the word that shows it): a word that is not whole or
ends the file, a wrong magic, tables made for other taps, a crop or output of zero or
beyond the limits, and table entries whose ``need`` goes backwards or past the crop (the
passes wait for that input: it would never come).  ``complete`` marks the request's last
word.  The crop box against the image is the core's check, once the frame header is read.
"""

from amaranth import Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .request import HEADER_WORDS, MAGIC, TAPS_SHIFT, VERTICAL_FIRST
from .resampler import Resampler

__all__ = ["RequestReader"]


class RequestReader(wiring.Component):
    """A resize request comes from the host inside the file, so it is checked here word by word
    on its way into the resampler's tables: a bad one is refused instead of making the resampler
    hang or overrun."""

    def __init__(self, resampler: Resampler):
        self.taps = resampler.taps
        self.max_columns, self.max_rows = resampler.max_columns, resampler.max_rows
        size = resampler.left.shape()
        super().__init__({
            "start": In(1),                 # a request begins with the next word
            "valid": In(1),                 # a word is offered (and taken) this clock
            "word": In(32),
            "whole": In(1),                 # all four bytes of it are real
            "last": In(1),                  # it ends the file
            "bad": Out(1),
            "complete": Out(1),
            "left": Out(size), "top": Out(size), "crop_width": Out(size),
            "crop_height": Out(size), "out_width": Out(size), "out_height": Out(size),
            "vertical_first": Out(1),
            "row_table_addr": Out(resampler.row_table_addr.shape()),
            "row_table_data": Out(resampler.row_table_data.shape()),
            "row_table_we": Out(1),
            "column_table_addr": Out(resampler.column_table_addr.shape()),
            "column_table_data": Out(resampler.column_table_data.shape()),
            "column_table_we": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        taps, word = self.taps, self.word
        low, high = word[:16], word[16:]
        header = Signal(range(HEADER_WORDS + 1))        # header words read
        columns = Signal()                              # reading the column table
        index = Signal(16)                              # the entry being read
        k = Signal(range(taps + 1))                     # its word: 0 need, 1.. weights
        need = Signal(16)
        floor = Signal(16)                              # the least need the entry may have
        weights = [Signal(signed(24), name=f"weight{j}") for j in range(taps - 1)]
        entries = Signal(16)
        limit = Signal(17)                              # needs stay below the crop's size
        m.d.comb += [entries.eq(Mux(columns, self.out_height, self.out_width)),
                     limit.eq(Mux(columns, self.crop_height, self.crop_width))]

        def out_of(value, most):
            return (value == 0) | (value > most)

        bad = self.bad
        with m.If(self.valid):
            with m.If(~self.whole | self.last):
                m.d.comb += bad.eq(1)
            with m.If(header < HEADER_WORDS):
                m.d.sync += header.eq(header + 1)
                with m.Switch(header):
                    with m.Case(0):
                        with m.If(word != MAGIC):
                            m.d.comb += bad.eq(1)
                    with m.Case(1):
                        m.d.sync += self.vertical_first.eq((word & VERTICAL_FIRST) != 0)
                        with m.If(word[TAPS_SHIFT:TAPS_SHIFT + 8] != taps):
                            m.d.comb += bad.eq(1)
                    with m.Case(2):
                        m.d.sync += [self.left.eq(low), self.top.eq(high)]
                    with m.Case(3):
                        m.d.sync += [self.crop_width.eq(low), self.crop_height.eq(high)]
                        with m.If(out_of(low, self.max_columns) | out_of(high, self.max_rows)):
                            m.d.comb += bad.eq(1)
                    with m.Case(4):
                        m.d.sync += [self.out_width.eq(low), self.out_height.eq(high)]
                        with m.If(out_of(low, self.max_columns) | out_of(high, self.max_rows)):
                            m.d.comb += bad.eq(1)
            with m.Else():
                m.d.sync += k.eq(k + 1)
                with m.If(k == 0):
                    m.d.sync += need.eq(low)
                    with m.If((high != 0) | (low < floor) | (low >= limit)):
                        m.d.comb += bad.eq(1)
                for j, weight in enumerate(weights):
                    with m.If(k == j + 1):
                        m.d.sync += weight.eq(word[:24].as_signed())
                with m.If(k == taps):
                    # the entry's last weight: write it
                    m.d.sync += [k.eq(0), index.eq(index + 1), floor.eq(need)]
                    with m.If(columns):
                        m.d.comb += [self.column_table_addr.eq(index),
                                     self.column_table_we.eq(1)]
                    with m.Else():
                        m.d.comb += [self.row_table_addr.eq(index), self.row_table_we.eq(1)]
                    for port in (self.row_table_data, self.column_table_data):
                        m.d.comb += port.need.eq(need)
                        m.d.comb += [port.weights[j].eq(v) for j, v in
                                     enumerate([*weights, word[:24].as_signed()])]
                    with m.If(index + 1 == entries):
                        m.d.sync += [index.eq(0), floor.eq(0), columns.eq(1)]
                        with m.If(columns):
                            m.d.comb += self.complete.eq(1)
        with m.If(self.start):
            m.d.sync += [header.eq(0), columns.eq(0), index.eq(0), k.eq(0), floor.eq(0)]
        return m
