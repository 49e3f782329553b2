"""The 8x8 inverse DCT of the JPEG decoder, bit-exact to libjpeg-turbo's ``jpeg_idct_islow``.

Dataflow: register -> dequantise (coefficient x quant value) -> corner-turn into columns ->
column pass -> corner-turn into rows -> row pass -> libjpeg's masked range limit -> samples in
raster order.
Both passes handle a whole 8-vector per clock; ``samples_per_clock`` sets how many
coefficients enter and samples leave per clock (1, 2, 4 or 8), so a block takes
``64 / samples_per_clock`` clocks and blocks follow each other without gaps.

``reduced=True`` (8 lanes only) adds libjpeg-turbo's reduced-size IDCTs (jidctred.c: 4x4, 2x2,
1x1), the DCT-domain downscale of a scaled decode, chosen per block: the ``sizes`` port
(scaling.McuSizesLayout, constant for a file) says which blocks of an MCU are luma and each
kind's log2 size, and the IDCT counts blocks from reset (block ``n`` is luma when
``n mod blocks < luma_blocks``).  Coefficients still enter as whole 8x8 blocks; a size-``s``
block leaves as ``s`` beats (its rows) with the samples in lanes ``0..s-1`` and zeros above.
Both passes compute every size side by side (``Idct1D``'s ``reduced``) and take each vector's
size from a block counter of their own; the rows a reduced block does not have are dropped
before pass 2.  Input rate, latency and back-pressure are those of the 8x8 IDCT, so a
reduced block still takes 8 clocks in but only ``s`` out.
"""

from amaranth import Module, Mux, Cat, Signal, signed, unsigned
from amaranth.lib import wiring, stream, data
from amaranth.lib.wiring import In, Out

from ..small_ram import check_small_ram, SmallRamFifo
from ..stream_pipe import PipeStage, Narrow, credits
from . import idct_constants as K
from .column_gather import ColumnGather
from .idct_1d import Idct1D
from .scaling import McuSizesLayout

__all__ = ["Idct", "CoefLayout", "SAMPLES_PER_CLOCK", "block_log_size"]

SAMPLES_PER_CLOCK = (1, 2, 4, 8)

#: One input element: a quantised coefficient and the quantisation value it is scaled by.
CoefLayout = data.StructLayout({"coef": signed(16), "quant": unsigned(16)})

#: Rows of samples the output holds for pass 2's credits: more than the round trip from a
#: credit spent to its return (pass 2, the FIFO's write and read, the credit register).
OUTPUT_FIFO_DEPTH = 16

#: Dequantised coefficients: int16 x uint16, always exact in 32 signed bits.
DEQUANT_SHAPE = signed(32)


def _range_limit(raw10):
    """libjpeg's ``range_limit[x & RANGE_MASK]``: clamp the 10-bit signed value + 128 to 0..255."""
    s = raw10.as_signed()
    return Mux(s < -K.CENTERJSAMPLE, 0,
               Mux(s > K.MAXJSAMPLE - K.CENTERJSAMPLE, K.MAXJSAMPLE, s + K.CENTERJSAMPLE))


def block_log_size(n, luma, chroma, luma_blocks, blocks):
    """The log2 IDCT size of block ``n`` (from 0) of a file, as the reduced Idct picks it
    (Python ints; the fields of a McuSizesLayout)."""
    return luma if n % blocks < luma_blocks else chroma


def _block_sizes(m, sizes, advance, name):
    """Count vectors (8 a block) taken when ``advance``; return (vector index, log2 size of
    the current block)."""
    vector = Signal(3, name=f"{name}_vector")
    block = Signal(3, name=f"{name}_block")       # within the MCU
    size = Signal(2, name=f"{name}_size")
    m.d.comb += size.eq(Mux(block < sizes.luma_blocks, sizes.luma, sizes.chroma))
    with m.If(advance):
        m.d.sync += vector.eq(vector + 1)
        with m.If(vector == 7):
            m.d.sync += block.eq(Mux(block + 1 >= sizes.blocks, 0, block + 1))
    return vector, size


class Idct(wiring.Component):
    """Coefficients (natural, row-major order) with their quant values in; 8-bit samples out.

    Input beats carry ``samples_per_clock`` consecutive coefficients of a block, output beats
    the same number of consecutive samples; block boundaries are implicit (every 64 elements).

    ``reduced=True`` (only with 8 samples per clock): per-block 8x8/4x4/2x2/1x1 IDCTs chosen
    by the ``sizes`` port (see the module docstring); a block of size ``s`` gives ``s`` beats.
    ``small_ram``: the corner turns' memories, "lut" (LUT RAM, read in the same clock) or
    "block" (block RAM, read through its output register: a clock more each, the same rate;
    on the ECP5 some 700 logic cells fewer for 16 block RAMs at 8 lanes).
    """

    #: The IDCT sizes of a reduced Idct as log2 (McuSizesLayout's encoding) and in samples.
    LOG_SIZES = K.LOG_SIZES
    SIZES = tuple(1 << log for log in K.LOG_SIZES)

    def __init__(self, samples_per_clock=1, reduced=False, small_ram="lut"):
        if check_small_ram(small_ram):
            self._MustUse__silence = True
            raise ValueError(check_small_ram(small_ram))
        if samples_per_clock not in SAMPLES_PER_CLOCK:
            self._MustUse__silence = True   # never elaborated: no "unused" warning for it
            raise ValueError(f"samples_per_clock must be one of {SAMPLES_PER_CLOCK}, "
                             f"not {samples_per_clock!r}")
        if reduced and samples_per_clock != 8:
            self._MustUse__silence = True
            raise ValueError(f"the reduced IDCT sizes need samples_per_clock 8 (whole rows per "
                             f"beat), not {samples_per_clock!r}")
        self.samples_per_clock = samples_per_clock
        self.reduced = bool(reduced)
        self.small_ram = small_ram
        ports = {
            "i": In(stream.Signature(data.ArrayLayout(CoefLayout, samples_per_clock))),
            "o": Out(stream.Signature(data.ArrayLayout(unsigned(8), samples_per_clock))),
        }
        if self.reduced:
            ports["sizes"] = In(McuSizesLayout)
        super().__init__(ports)

    @staticmethod
    def rows_out(log_size):
        """Output beats (rows) of one block of log2 size ``log_size`` in a reduced Idct."""
        return 1 << log_size

    @staticmethod
    def timing(samples_per_clock, small_ram="lut"):
        """(latency, block interval) in clocks for a width, without building the component.

        Interval: ``64 / samples_per_clock``.  Latency, from the first coefficient of a block
        entering to its first sample leaving: input register (1) + dequantiser (1) + the rest
        of the block arriving (interval - 1) + slot hand-over (1) + column register (1) +
        column pass + the eight columns (8) + row register (1) + row pass + the output
        FIFO (2: its write, and the register it is read through) + the narrowing register
        (only when fewer than 8 samples leave per clock), and one clock per corner turn in
        block RAM.  The testbench measures both figures and checks them against these.
        """
        interval = 64 // samples_per_clock
        narrow = 1 if samples_per_clock < 8 else 0
        turns = 2 if small_ram == "block" else 0
        latency = (1 + 1 + (interval - 1) + 1 + 1 + Idct1D.latency + 8 + 1 + Idct1D.latency
                   + 2 + narrow + turns)
        return latency, interval

    @property
    def block_interval(self):
        """Clocks between consecutive blocks at full rate."""
        return self.timing(self.samples_per_clock, self.small_ram)[1]

    @property
    def latency(self):
        """Clocks from a block's first coefficient in to its first sample out (see ``timing``)."""
        return self.timing(self.samples_per_clock, self.small_ram)[0]

    def parameters(self):
        params = {"samples_per_clock": self.samples_per_clock}
        if self.reduced:
            params["reduced"] = True
        if self.small_ram != "lut":
            params["small_ram"] = self.small_ram
        return params

    def elaborate(self, platform):
        m = Module()
        lanes = self.samples_per_clock

        def dequantize(m, payload):
            # int16 x uint16 fits in 32 signed bits exactly; keep those bits of each product.
            return Cat(*[(payload[k].coef * payload[k].quant)[:32] for k in range(lanes)])

        # The coefficients are registered before the multipliers: in the core they come
        # straight from the coefficient buffer's block RAM, whose output on an ECP5 arrives
        # 5.8 ns after the clock, too late for a multiplier in the same clock.
        m.submodules.coefs = coefs = PipeStage(data.ArrayLayout(CoefLayout, lanes),
                                               data.ArrayLayout(CoefLayout, lanes))
        m.submodules.dequant = dequant = PipeStage(
            data.ArrayLayout(CoefLayout, lanes), data.ArrayLayout(DEQUANT_SHAPE, lanes), dequantize)
        m.submodules.columns = columns = ColumnGather(DEQUANT_SHAPE, lanes, self.small_ram)
        # A register after each corner-turn keeps its RAM read and rotation out of the
        # first adders of the pass that follows.
        m.submodules.columns_reg = columns_reg = PipeStage(columns.o.payload.shape(),
                                                           columns.o.payload.shape())
        if self.reduced:        # every size side by side: pass 1 mod 2**43 at most, 30-bit lanes
            pass1 = Idct1D(DEQUANT_SHAPE, *K.SIZE_PASS1[3], reduced=K.SIZE_PASS1)
        else:
            pass1 = Idct1D(DEQUANT_SHAPE, K.PASS1_MOD_BITS, K.PASS1_DESCALE)
        m.submodules.pass1 = pass1
        m.submodules.rows = rows = ColumnGather(unsigned(pass1.out_bits), 8, self.small_ram,
                                                slots=4)
        m.submodules.rows_reg = rows_reg = PipeStage(rows.o.payload.shape(), rows.o.payload.shape())
        if self.reduced:
            pass2 = Idct1D(unsigned(pass1.out_bits), *K.SIZE_PASS2[3], reduced=K.SIZE_PASS2)
        else:
            pass2 = Idct1D(unsigned(pass1.out_bits), K.PASS2_BITS, K.PASS2_DESCALE)
        m.submodules.pass2 = pass2

        wiring.connect(m, wiring.flipped(self.i), coefs.i)
        wiring.connect(m, coefs.o, dequant.i)
        wiring.connect(m, dequant.o, columns.i)
        wiring.connect(m, columns.o, columns_reg.i)
        # Both passes run free (no ready: every stage moves every clock) and take a vector
        # only against a credit for the place it will need behind them: pass 1 a place in
        # the rows gather (returned eight at a time as a slot's last row is read), pass 2 a
        # place in the output FIFO.  A consumer's ready then reaches no further than a
        # credit register, where it had run back through both passes' stage enables and the
        # gathers into the coefficient side (docs/architecture.md, "Credits").
        may1 = credits(m, 8 * rows.slots, pass1.i.valid, Mux(rows.freed, 8, 0), "pass1")
        m.d.comb += [
            pass1.i.payload.eq(columns_reg.o.payload),
            pass1.i.valid.eq(columns_reg.o.valid & may1),
            columns_reg.o.ready.eq(may1),
            pass1.o.ready.eq(1),
            # Pass 1 emits columns; gathering them as "raster" beats of a transposed block
            # and reading that block's columns yields the rows of the original one.  The
            # credits guarantee the gather's ready, so it is not consulted.
            rows.i.payload.eq(pass1.o.payload),
            rows.i.valid.eq(pass1.o.valid),
        ]
        wiring.connect(m, rows.o, rows_reg.i)
        m.submodules.out = out = SmallRamFifo(width=8 * 8, depth=OUTPUT_FIFO_DEPTH,
                                              small_ram=self.small_ram)
        may2 = credits(m, out.depth, pass2.i.valid, out.r_en & out.r_rdy, "pass2")
        m.d.comb += [pass2.i.payload.eq(rows_reg.o.payload), pass2.o.ready.eq(1),
                     out.w_en.eq(pass2.o.valid)]
        if self.reduced:
            self._reduced_sizes(m, pass1, rows_reg, pass2, may2, out)
        else:
            m.d.comb += [pass2.i.valid.eq(rows_reg.o.valid & may2), rows_reg.o.ready.eq(may2)]
            m.d.comb += out.w_data.eq(Cat(*[_range_limit(pass2.o.payload[k])[:8] for k in range(8)]))
        # What the credits promise, as (write, room) pairs a testbench can watch.
        self.credited_writes = [(rows.i.valid, rows.i.ready), (out.w_en, out.w_rdy)]
        m.submodules.narrow = narrow = Narrow(unsigned(8), 8, lanes)
        m.d.comb += [
            narrow.i.valid.eq(out.r_rdy),
            narrow.i.payload.eq(out.r_data),
            out.r_en.eq(narrow.i.ready),
        ]
        wiring.connect(m, narrow.o, wiring.flipped(self.o))
        return m

    def _reduced_sizes(self, m, pass1, rows_reg, pass2, may2, out):
        """The reduced pipeline's own part: the two block counters, the rows a block lacks
        dropped before pass 2, and the lanes above a block's size zeroed."""
        # Pass 1: each column vector takes its block's size (all eight columns are computed:
        # the rows gather wants whole blocks, and the spare ones cost nothing at this rate).
        _, size1 = _block_sizes(m, self.sizes, pass1.i.valid, "pass1")
        m.d.comb += pass1.size.eq(size1)

        # Pass 2: rows past the block's size are taken from the gather and not passed on
        # (nor charged a credit).
        row, size2 = _block_sizes(m, self.sizes, rows_reg.o.valid & rows_reg.o.ready, "pass2")
        keep = Signal()
        m.d.comb += [
            keep.eq((row >> size2) == 0),
            pass2.size.eq(size2),
            pass2.i.valid.eq(rows_reg.o.valid & keep & may2),
            rows_reg.o.ready.eq(may2 | ~keep),
        ]

        # Range limit on the real lanes, zeros above them.
        lanes = []
        for k in range(8):
            real = (k >> pass2.o_size) == 0
            lanes.append(Mux(real, _range_limit(pass2.o.payload[k][:K.RANGE_BITS]), 0)[:8])
        m.d.comb += out.w_data.eq(Cat(*lanes))
