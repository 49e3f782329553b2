"""The resampler's horizontal pass in gateware: rows of 8-bit pixels in, rows resized by
Pillow's integer arithmetic out, a beat of up to four pixels a clock each way
(``sim/models/resample_model.py`` is the golden model; the table is :mod:`.table`'s).

Output pixel ``x`` of a row is ``clip8((2**21 + sum(in[need - j] * w[j])) >> 22)``.  With
``lanes`` = 4 (1 and 2 alike): the input goes through a window of the newest ``taps + 3``
pixels, shifted by a whole beat (1 to 4 pixels) a clock.  Four output units read the table
entries of the next four columns (a fifth read tells whether the input may move on); unit
``j`` is ready once its ``need`` has arrived, and reads its taps at offset ``received - 1 -
need`` (0 to 3) from the newest pixel.  The ready units that lead go out together as one
beat.  A beat is taken only if the first output not made in this clock would still find
all its taps in the window afterwards, so no input is lost before it is used.  Shrinking
and copying run at a beat a clock; stretching at four outputs a clock.  The products are
registered before the adder tree (``weighted_pixel``'s stage), so an output leaves two
clocks after it is made.  Rows are delimited by ``last``; the output marks its rows' last
beats too.
"""

from amaranth import Module, Mux, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .beats import LANES, beat_layout, check_lanes
from .table import entry_layout, weighted_pixel

__all__ = ["RowResampler"]


class RowResampler(wiring.Component):
    """``channels`` 8-bit channels a pixel; rows up to ``max_columns`` pixels in and out;
    ``taps`` weights an output (bilinear shrinking by s needs 2 ceil(s) + 1); beats of
    ``lanes`` pixels and as many output units."""

    def __init__(self, max_columns=4096, taps=7, channels=3, lanes=LANES):
        self.max_columns, self.taps, self.channels = max_columns, taps, channels
        self.lanes = check_lanes(lanes)
        self.width_bits = max(1, (max_columns - 1).bit_length())
        self.entry = entry_layout(taps, self.width_bits + 1)
        beat = beat_layout(channels, lanes)
        super().__init__({
            "i": In(stream.Signature(beat)),
            "o": Out(stream.Signature(beat)),
            "out_width": In(unsigned(self.width_bits + 1)),
            # the table's write port: entry ``table_addr`` for output column table_addr
            "table_addr": In(unsigned(self.width_bits)),
            "table_data": In(self.entry),
            "table_we": In(1),
            "restart": In(1),                       # drop a row begun (a new image)
        })

    def elaborate(self, platform):
        m = Module()
        taps, channels, lanes = self.taps, self.channels, self.lanes
        span = taps + lanes - 1
        m.submodules.table = table = Memory(shape=self.entry, depth=self.max_columns, init=[])
        write = table.write_port()
        reads = [table.read_port() for _ in range(lanes + 1)]
        m.d.comb += [write.addr.eq(self.table_addr), write.data.eq(self.table_data),
                     write.en.eq(self.table_we)]

        window = [Signal(8 * channels, name=f"window{j}") for j in range(span)]
        received = Signal(self.width_bits + 2)      # inputs of this row taken so far
        column = Signal(self.width_bits + 1)        # the next output column
        row_in_done = Signal()                      # the row's last input was taken
        entries = [self.entry(r.data) for r in reads]   # columns column .. column + 4
        exists = [column + j < self.out_width for j in range(lanes + 1)]
        ready = [exists[j] & (entries[j].need < received) for j in range(lanes)]

        # the leading ready units go out together; the products are registered (stage 1)
        # and summed into the output register (stage 2); both move when the output is free
        made = Signal(range(lanes + 1))
        free = ~self.o.valid | self.o.ready
        for j in range(lanes):
            with m.If(free & _all(ready[:j + 1])):
                m.d.comb += made.eq(j + 1)
        staged, staged_count, staged_last = Signal(), Signal.like(made), Signal()

        pixels = []
        for j in range(lanes):
            offset = Signal(range(max(2, lanes)), name=f"offset{j}")
            m.d.comb += offset.eq(received - 1 - entries[j].need)
            samples = [Signal(8 * channels, name=f"unit{j}_tap{t}") for t in range(taps)]
            with m.Switch(offset):
                for o in range(lanes):
                    with m.Case(o):
                        m.d.comb += [s.eq(window[o + t]) for t, s in enumerate(samples)]
            pixels.append(weighted_pixel(m, samples, entries[j].weights, channels,
                                         enable=free))

        # take a beat if the first output not made now keeps its taps in the window
        count = self.i.payload.count
        next_need, next_exists = Signal.like(entries[0].need), Signal()
        with m.Switch(made):
            for e in range(lanes + 1):
                with m.Case(e):
                    m.d.comb += [next_need.eq(entries[e].need), next_exists.eq(exists[e])]
        room = ~next_exists | (received + count <= next_need + lanes)
        # the row's outputs are all made by this clock: the next row's first beat may come
        row_done = row_in_done & ~next_exists
        take = self.i.valid & Mux(row_in_done, row_done, room)
        m.d.comb += self.i.ready.eq(take)
        with m.If(row_done | self.restart):
            m.d.sync += [received.eq(0), row_in_done.eq(0)]
        with m.If(take):
            with m.Switch(count):
                for n in range(1, lanes + 1):
                    with m.Case(n):
                        for k in range(span):
                            source = self.i.payload.pixels[n - 1 - k] if k < n \
                                else window[k - n]
                            m.d.sync += window[k].eq(source)
            m.d.sync += [received.eq(Mux(row_done, 0, received) + count),
                         row_in_done.eq(self.i.payload.last)]

        # the table entries of the columns after this clock (the read ports answer a clock on)
        next_column = Signal.like(column)
        m.d.comb += next_column.eq(column + made)
        with m.If(row_done | self.restart):
            m.d.comb += next_column.eq(0)
        m.d.comb += [r.addr.eq(next_column + j) for j, r in enumerate(reads)]
        m.d.sync += column.eq(next_column)

        with m.If(free):
            m.d.sync += [staged.eq(made != 0), staged_count.eq(made),
                         staged_last.eq(column + made == self.out_width),
                         self.o.valid.eq(staged), self.o.payload.count.eq(staged_count),
                         self.o.payload.last.eq(staged_last)]
            m.d.sync += [self.o.payload.pixels[j].eq(p) for j, p in enumerate(pixels)]
        with m.If(self.restart):
            m.d.sync += staged.eq(0)
        return m


def _all(values):
    result = values[0]
    for v in values[1:]:
        result = result & v
    return result
