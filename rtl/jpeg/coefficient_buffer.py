"""Between the Huffman decoder and the IDCT: sparse zigzag coefficients in, whole blocks out.

The Huffman decoder writes only the coefficients it decodes, in zigzag order; the IDCT wants
all 64 in natural order with their quantisation values.  ``slots`` block slots form a ring:
the decoder fills one while the full ones are read out in order, ``lanes`` coefficients per
clock.  A bitmap of the positions written stands in for clearing the slot, so a block needs
no extra clocks.  Quantisation tables arrive as DQT segment bodies (8- or 16-bit entries,
zigzag order).

Why more than two slots: the decoder takes a clock per symbol, the read-out 64 / ``lanes``
clocks per block, and blocks of few symbols (smooth areas, chroma) come in runs.  With two
slots the decoder waits through every run of light blocks and the read-out through every
run of heavy ones, so a file costs about the sum over its blocks of the slower side.  Eight
slots let each side run ahead through such runs: on the 64 photos the two-file core went from
0.71 to 0.76 symbols per clock, 2.453 to 2.642 pixels per clock (4:4:4 files +11 %, 4:2:0
+5 %); the model behind the choice is docs/studies/coefficient_ring.py.

All lanes read the same address in a clock, so the tables and the slots are each one memory
``lanes`` x 16 bits wide (a 16-bit write enable per lane), read through a register like a
block RAM: one clock more per block, the same rate.  ``small_ram`` says whether they are block
RAM (8 EBR at 8 lanes, whatever the slots: a block RAM is 512 entries deep) or LUT RAM.
"""

from amaranth import Module, Signal, Array, Cat, Mux, Const, Value
from amaranth.lib import wiring, stream, data
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..small_ram import check_small_ram, ram_style
from .huffman_decoder import CoefficientLayout, MAX_COMPONENTS
from .idct import CoefLayout
from .idct_constants import ZIGZAG

__all__ = ["CoefficientBuffer", "DqtLayout"]

DqtLayout = data.StructLayout({"byte": 8, "last": 1})

#: Block slots in the ring (see the module's docstring for why eight).
SLOTS = 8


class CoefficientBuffer(wiring.Component):
    """Bridges the Huffman decoder, which writes only the coefficients it decodes in zigzag
    order, and the IDCT, which wants whole blocks in natural order with their quantisation
    values, without clocks spent clearing blocks."""

    def __init__(self, lanes=1, small_ram="block", slots=SLOTS):
        problem = check_small_ram(small_ram)
        if lanes not in (1, 2, 4, 8):
            problem = f"lanes must be 1, 2, 4 or 8, not {lanes}"
        if slots not in (2, 4, 8, 16):
            problem = f"slots must be 2, 4, 8 or 16, not {slots}"
        if problem:
            self._MustUse__silence = True
            raise ValueError(problem)
        self.lanes = lanes
        self.slots = slots
        self.small_ram = small_ram          # where the tables and slots go (rtl.small_ram)
        super().__init__({
            "dqt": In(stream.Signature(DqtLayout)),
            "quant_select": In(data.ArrayLayout(2, MAX_COMPONENTS)),   # Tq of each component
            "i": In(stream.Signature(CoefficientLayout)),
            "o": Out(stream.Signature(data.ArrayLayout(CoefLayout, lanes))),
            "table_error": Out(1),
        })

    def _wide_memory(self, m, name, depth):
        """A ``lanes`` x 16-bit memory of ``depth`` entries, a write enable per lane; returns
        its write port and its registered read port (``en`` holds the data)."""
        m.submodules[name] = memory = Memory(
            shape=16 * self.lanes, depth=depth, init=[],
            # A read never meets a write of the same entry in one clock (see elaborate).
            attrs={"ram_style": ram_style(self.small_ram), "no_rw_check": 1})
        return memory.write_port(granularity=16), memory.read_port(transparent_for=())

    def elaborate(self, platform):
        m = Module()
        lanes = self.lanes

        # ---- Quantisation tables: 4 x 64 entries, natural order ------------------------
        # Entry {table, n // lanes} holds positions n .. n + lanes - 1, lane k in bits
        # 16k..16k+15: one write port (a lane's enable per write) and one read port.  Separate
        # memories per read port would be copied per port (issue 20: 6,980 LUT4 that way).
        # Tables are written only while a file's headers are read, and the core lets the next
        # file in only after this one's trailer left, so a read never meets a write.
        lane_bits = lanes.bit_length() - 1
        q_w, q_r = self._wide_memory(m, "quant", 256 // lanes)
        natural_of = Array(Const(n, 6) for n in ZIGZAG)
        q_state = Signal(2)            # 0: Pq/Tq, 1: high byte (16-bit), 2: low/only byte
        q_table = Signal(2)
        q_wide = Signal()
        q_k = Signal(7)
        q_high = Signal(8)
        m.d.comb += self.dqt.ready.eq(1)
        byte = self.dqt.payload.byte
        with m.If(self.dqt.valid):
            with m.Switch(q_state):
                with m.Case(0):
                    m.d.sync += [q_table.eq(byte[0:2]), q_wide.eq(byte[4]), q_k.eq(0),
                                 q_state.eq(Mux(byte[4], 1, 2))]
                    with m.If((byte[4:8] > 1) | (byte[0:4] > 3) | self.dqt.payload.last):
                        m.d.sync += [self.table_error.eq(1), q_state.eq(0)]
                with m.Case(1):
                    m.d.sync += [q_high.eq(byte), q_state.eq(2)]
                with m.Case(2):
                    q_nat = Signal(6)
                    m.d.comb += q_nat.eq(natural_of[q_k[:6]])
                    m.d.comb += [q_w.addr.eq(Cat(q_nat[lane_bits:], q_table)),
                                 q_w.data.eq(Mux(q_wide, Cat(byte, q_high), byte)
                                             .replicate(lanes)),
                                 q_w.en.eq(1 << q_nat[:lane_bits] if lanes > 1 else 1)]
                    m.d.sync += [q_k.eq(q_k + 1), q_state.eq(Mux(q_wide, 1, 2))]
                    with m.If(q_k == 63):
                        m.d.sync += q_state.eq(0)
            with m.If(self.dqt.payload.last & ~((q_state == 2) & (q_k == 63))):
                m.d.sync += [self.table_error.eq(1), q_state.eq(0)]

        # ---- The ring of block slots -------------------------------------------------------
        # As the quantisation tables: entry {slot, n // lanes}.  A slot is read only while full
        # and written only while not, and the read port is enabled only for a real read, so
        # here too a read never meets a write of its entry.
        slots = self.slots
        v_w, v_r = self._wide_memory(m, "slots", slots * 64 // lanes)
        # Which positions of each slot were written, per lane (bit = the lane's beat): a
        # read then picks one of 64 / lanes bits, not one of 64 (8 lanes, synth_ecp5: 804
        # -> 720 LUT4 for the whole buffer).
        beats = 64 // lanes
        written = [[Signal(beats, name=f"slot{s}_written{lane}") for lane in range(lanes)]
                   for s in range(slots)]
        # Each slot's quantisation table, chosen when the block is written: the read-out's
        # address then comes from one multiplexer of registers.
        table = [Signal(2, name=f"slot{s}_table") for s in range(slots)]
        full = Signal(slots)
        wslot = Signal(range(slots))
        rslot = Signal(range(slots))
        rbeat = Signal(range(64 // lanes))
        set_full = Signal(slots)
        clear_full = Signal(slots)

        m.d.comb += self.i.ready.eq(~full.bit_select(wslot, 1))
        beat = self.i.payload
        nat = Signal(6)
        m.d.comb += nat.eq(natural_of[beat.zz])
        with m.If(self.i.valid & self.i.ready & beat.write):
            m.d.comb += v_w.en.eq(1 << nat[:lane_bits] if lanes > 1 else 1)
        m.d.comb += [v_w.addr.eq(Cat(nat[lane_bits:], wslot)),
                     v_w.data.eq(Value.cast(beat.value).replicate(lanes))]
        with m.If(self.i.valid & self.i.ready):
            for s in range(slots):
                with m.If(wslot == s):
                    with m.If(beat.write):
                        for lane in range(lanes):
                            with m.If(nat[:lane_bits] == lane if lanes > 1 else 1):
                                m.d.sync += written[s][lane].eq(
                                    written[s][lane] | (1 << nat[lane_bits:]))
                    m.d.sync += table[s].eq(self.quant_select[beat.component])
            with m.If(beat.end):
                m.d.comb += set_full.eq(1 << wslot)
                m.d.sync += wslot.eq(wslot + 1)

        # Read-out: a beat's address goes to the memories in the clock it is taken from the
        # slot, its data comes out of their read registers a clock later, held while the
        # output stalls (the ports' ``en``).
        o_valid = Signal()
        present = Signal(lanes)             # the beat's positions that were written
        advance = ~o_valid | self.o.ready
        take = advance & full.bit_select(rslot, 1)
        m.d.comb += [v_r.addr.eq(Cat(rbeat, rslot)),
                     q_r.addr.eq(Cat(rbeat, Array(table)[rslot])),
                     v_r.en.eq(take), q_r.en.eq(take), self.o.valid.eq(o_valid)]
        for lane in range(lanes):
            m.d.comb += [self.o.payload[lane].coef.eq(
                             Mux(present[lane], v_r.data.word_select(lane, 16), 0)),
                         self.o.payload[lane].quant.eq(q_r.data.word_select(lane, 16))]
        with m.If(advance):
            m.d.sync += o_valid.eq(take)
        with m.If(take):
            m.d.sync += [present[lane].eq(
                             Array(written[s][lane] for s in range(slots))[rslot]
                             .bit_select(rbeat, 1))
                         for lane in range(lanes)]
            m.d.sync += rbeat.eq(rbeat + 1)
            with m.If(rbeat == 64 // lanes - 1):
                m.d.sync += [rbeat.eq(0), rslot.eq(rslot + 1)]
                m.d.comb += clear_full.eq(1 << rslot)
                for s in range(slots):
                    with m.If(rslot == s):
                        m.d.sync += [bits.eq(0) for bits in written[s]]
        m.d.sync += full.eq((full | set_full) & ~clear_full)
        return m
