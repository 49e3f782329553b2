"""The resampler's vertical pass in gateware: rows of 8-bit pixels in, each output row the
weighted sum of up to ``taps`` consecutive input rows by Pillow's integer arithmetic, a beat
of up to four pixels a clock each way (``sim/models/resample_model.py`` is the golden model; the
table is :mod:`.table`'s, newest row first).

Input row ``r`` goes into line buffer ``r mod (taps + 1)``.  A buffer is ``lanes`` (4)
memories, one per column mod 4, so that a beat of any four adjacent pixels is written in one clock
wherever it starts.  Output row ``y`` is made once its ``need`` row has arrived: every
buffer is read at the same four columns in one clock, and each buffer's weight is picked
from the entry by the row it holds (weight ``(need - b) mod (taps + 1)``).  The spare
buffer lets the next input row come in while an output row is made: input row ``r`` may be
written while ``r <= need + 1``, so it never overwrites a row the current output reads.  The
products are registered before the adder tree, and the per-buffer weights once per row,
so an output word leaves three clocks after its read.
"""

from amaranth import Module, Mux, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .beats import LANES, beat_layout, check_lanes
from .table import WEIGHT_BITS, entry_layout, weighted_pixel

__all__ = ["ColumnResampler"]


class ColumnResampler(wiring.Component):
    """Rows up to ``max_columns`` pixels of ``channels`` 8-bit channels; images up to
    ``max_rows`` output rows; ``taps + 1`` line buffers; beats of ``lanes`` pixels."""

    def __init__(self, max_columns=4096, max_rows=4096, taps=7, channels=3, lanes=LANES):
        self.max_columns, self.max_rows = max_columns, max_rows
        self.lanes = check_lanes(lanes)
        self.taps, self.channels = taps, channels
        self.x_bits = max(1, (max_columns - 1).bit_length())
        self.y_bits = max(1, (max_rows - 1).bit_length())
        self.entry = entry_layout(taps, self.y_bits + 1)
        beat = beat_layout(channels, lanes)
        super().__init__({
            "i": In(stream.Signature(beat)),
            "o": Out(stream.Signature(beat)),
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
        taps, channels, lanes = self.taps, self.channels, self.lanes
        lane_bits = (lanes - 1).bit_length()
        buffers = taps + 1
        words = -(-self.max_columns // lanes)
        m.submodules.table = table = Memory(shape=self.entry, depth=self.max_rows, init=[])
        write = table.write_port()
        read = table.read_port()
        m.d.comb += [write.addr.eq(self.table_addr), write.data.eq(self.table_data),
                     write.en.eq(self.table_we)]
        entry = self.entry(read.data)

        rows_in = Signal(self.y_bits + 2)               # input rows taken completely
        row = Signal(self.y_bits + 1)                   # the next output row
        slot = Signal(range(buffers))                   # the buffer of the row coming in
        column_in = Signal(self.x_bits + 1)
        word_out = Signal(self.x_bits + 1)              # the next word to read
        pending = Signal()                              # a read's data is at the ports
        rows_left = row < self.out_height
        making = rows_left & (rows_in > entry.need)

        ports = []                                      # [buffer][lane] (write, read)
        for b in range(buffers):
            ports.append([])
            for lane in range(lanes):
                mem = Memory(shape=unsigned(8 * channels), depth=words, init=[])
                m.submodules[f"line{b}_{lane}"] = mem
                ports[b].append((mem.write_port(), mem.read_port()))

        # input: a beat into the buffer of its row, each pixel into the memory of its column
        count = self.i.payload.count
        room = ~rows_left | (rows_in <= entry.need + (buffers - taps))
        take = self.i.valid & room
        m.d.comb += self.i.ready.eq(take)
        for lane in range(lanes):
            source = Signal(max(1, lane_bits), name=f"source{lane}")    # the beat's pixel for it
            pixel = Signal(8 * channels, name=f"in{lane}")
            if lane_bits:
                m.d.comb += source.eq((lane - column_in)[:lane_bits])
            with m.Switch(source):
                for k in range(lanes):
                    with m.Case(k):
                        m.d.comb += pixel.eq(self.i.payload.pixels[k])
            for b in range(buffers):
                w, _ = ports[b][lane]
                m.d.comb += [w.addr.eq((column_in + source) >> lane_bits), w.data.eq(pixel),
                             w.en.eq(take & (slot == b) & (source < count))]
        with m.If(take):
            m.d.sync += column_in.eq(column_in + count)
            with m.If(self.i.payload.last):
                m.d.sync += [column_in.eq(0), rows_in.eq(rows_in + 1), slot.eq(slot + 1)]
                with m.If(slot == buffers - 1):
                    m.d.sync += slot.eq(0)

        # each buffer's weight for this output row: the row it holds is need - j
        need_slot = Signal(range(buffers))
        m.d.comb += need_slot.eq(entry.need % buffers)
        # (registered: the entry of a new row is at the port a clock before its first read,
        # and its data two clocks before its products are taken)
        weights = [Signal(WEIGHT_BITS, name=f"buffer_weight{b}") for b in range(buffers)]
        with m.Switch(need_slot):
            for s in range(buffers):
                with m.Case(s):
                    for b in range(buffers):
                        j = (s - b) % buffers
                        m.d.sync += weights[b].eq(entry.weights[j] if j < taps else 0)
        signed_weights = [w.as_signed() for w in weights]
        # (stalls: every stage moves when the output register is free)
        free = ~self.o.valid | self.o.ready
        pixels = [weighted_pixel(m, [ports[b][lane][1].data for b in range(buffers)],
                                 signed_weights, channels, enable=free)
                  for lane in range(lanes)]

        # output: read every buffer at one word; a clock later the products of the data at
        # the ports are registered (stage 1), and summed into the output register (stage 2)
        row_words = (self.width + lanes - 1) >> lane_bits
        advance = making & free
        issue = advance & (word_out < row_words)
        for b in range(buffers):
            for _, r in ports[b]:
                m.d.comb += [r.addr.eq(word_out), r.en.eq(advance)]
        left = Signal.like(self.width)                  # pixels of the row from the word read
        m.d.comb += left.eq(self.width - ((word_out - 1) << lane_bits))
        staged, staged_last = Signal(), Signal()
        staged_count = Signal.like(self.o.payload.count)
        with m.If(free):
            m.d.sync += [staged.eq(advance & pending),
                         staged_count.eq(Mux(left >= lanes, lanes, left)),
                         staged_last.eq(word_out == row_words),
                         self.o.valid.eq(staged), self.o.payload.count.eq(staged_count),
                         self.o.payload.last.eq(staged_last)]
            m.d.sync += [self.o.payload.pixels[k].eq(p) for k, p in enumerate(pixels)]
        with m.If(advance):
            m.d.sync += pending.eq(issue)
            with m.If(issue):
                m.d.sync += word_out.eq(word_out + 1)
        row_made = advance & ~issue & pending
        # the table entry of the row after this clock (the read port answers a clock on)
        next_row = Signal.like(row)
        m.d.comb += next_row.eq(row)
        with m.If(row_made):
            m.d.comb += next_row.eq(row + 1)
            m.d.sync += word_out.eq(0)
        m.d.comb += read.addr.eq(next_row)
        m.d.sync += row.eq(next_row)
        with m.If(self.restart):
            m.d.comb += read.addr.eq(0)
            m.d.sync += [rows_in.eq(0), row.eq(0), slot.eq(0), column_in.eq(0), staged.eq(0),
                         word_out.eq(0), pending.eq(0)]
        return m
