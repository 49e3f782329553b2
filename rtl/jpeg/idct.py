"""The 8x8 inverse DCT of the JPEG decoder, bit-exact to libjpeg-turbo's ``jpeg_idct_islow``.

Dataflow: dequantise (coefficient x quant value) -> corner-turn into columns -> column pass ->
corner-turn into rows -> row pass -> libjpeg's masked range limit -> samples in raster order.
Both passes handle a whole 8-vector per clock; ``samples_per_clock`` sets how many
coefficients enter and samples leave per clock (1, 2, 4 or 8), so a block takes
``64 / samples_per_clock`` clocks and blocks follow each other without gaps.
"""

from amaranth import Module, Mux, Cat, signed, unsigned
from amaranth.lib import wiring, stream, data
from amaranth.lib.wiring import In, Out

from ..stream_pipe import PipeStage, Narrow
from . import idct_constants as K
from .column_gather import ColumnGather
from .idct_1d import Idct1D

__all__ = ["Idct", "CoefLayout", "SAMPLES_PER_CLOCK"]

SAMPLES_PER_CLOCK = (1, 2, 4, 8)

#: One input element: a quantised coefficient and the quantisation value it is scaled by.
CoefLayout = data.StructLayout({"coef": signed(16), "quant": unsigned(16)})

#: Dequantised coefficients: int16 x uint16, always exact in 32 signed bits.
DEQUANT_SHAPE = signed(32)


def _range_limit(raw10):
    """libjpeg's ``range_limit[x & RANGE_MASK]``: clamp the 10-bit signed value + 128 to 0..255."""
    s = raw10.as_signed()
    return Mux(s < -K.CENTERJSAMPLE, 0,
               Mux(s > K.MAXJSAMPLE - K.CENTERJSAMPLE, K.MAXJSAMPLE, s + K.CENTERJSAMPLE))


class Idct(wiring.Component):
    """Coefficients (natural, row-major order) with their quant values in; 8-bit samples out.

    Input beats carry ``samples_per_clock`` consecutive coefficients of a block, output beats
    the same number of consecutive samples; block boundaries are implicit (every 64 elements).
    """

    def __init__(self, samples_per_clock=1):
        if samples_per_clock not in SAMPLES_PER_CLOCK:
            self._MustUse__silence = True   # never elaborated: no "unused" warning for it
            raise ValueError(f"samples_per_clock must be one of {SAMPLES_PER_CLOCK}, "
                             f"not {samples_per_clock!r}")
        self.samples_per_clock = samples_per_clock
        super().__init__({
            "i": In(stream.Signature(data.ArrayLayout(CoefLayout, samples_per_clock))),
            "o": Out(stream.Signature(data.ArrayLayout(unsigned(8), samples_per_clock))),
        })

    @staticmethod
    def timing(samples_per_clock):
        """(latency, block interval) in clocks for a width, without building the component.

        Interval: ``64 / samples_per_clock``.  Latency, from the first coefficient of a block
        entering to its first sample leaving: dequantiser (1) + the rest of the block arriving
        (interval - 1) + slot hand-over (1) + column register (1) + column pass + the eight
        columns (8) + row register (1) + row pass + the narrowing register (only when fewer
        than 8 samples leave per clock).  The
        testbench measures both figures and checks them against these.
        """
        interval = 64 // samples_per_clock
        narrow = 1 if samples_per_clock < 8 else 0
        latency = 1 + (interval - 1) + 1 + 1 + Idct1D.latency + 8 + 1 + Idct1D.latency + narrow
        return latency, interval

    @property
    def block_interval(self):
        """Clocks between consecutive blocks at full rate."""
        return self.timing(self.samples_per_clock)[1]

    @property
    def latency(self):
        """Clocks from a block's first coefficient in to its first sample out (see ``timing``)."""
        return self.timing(self.samples_per_clock)[0]

    def parameters(self):
        return {"samples_per_clock": self.samples_per_clock}

    def elaborate(self, platform):
        m = Module()
        lanes = self.samples_per_clock

        def dequantize(m, payload):
            # int16 x uint16 fits in 32 signed bits exactly; keep those bits of each product.
            return Cat(*[(payload[k].coef * payload[k].quant)[:32] for k in range(lanes)])

        m.submodules.dequant = dequant = PipeStage(
            data.ArrayLayout(CoefLayout, lanes), data.ArrayLayout(DEQUANT_SHAPE, lanes), dequantize)
        m.submodules.columns = columns = ColumnGather(DEQUANT_SHAPE, lanes)
        # A register after each corner-turn keeps its RAM read and rotation out of the
        # first adders of the pass that follows.
        m.submodules.columns_reg = columns_reg = PipeStage(columns.o.payload.shape(),
                                                           columns.o.payload.shape())
        m.submodules.pass1 = pass1 = Idct1D(DEQUANT_SHAPE, K.PASS1_MOD_BITS, K.PASS1_DESCALE)
        m.submodules.rows = rows = ColumnGather(unsigned(pass1.out_bits), 8)
        m.submodules.rows_reg = rows_reg = PipeStage(rows.o.payload.shape(), rows.o.payload.shape())
        m.submodules.pass2 = pass2 = Idct1D(unsigned(pass1.out_bits), K.PASS2_BITS, K.PASS2_DESCALE)
        m.submodules.narrow = narrow = Narrow(unsigned(8), 8, lanes)

        wiring.connect(m, wiring.flipped(self.i), dequant.i)
        wiring.connect(m, dequant.o, columns.i)
        wiring.connect(m, columns.o, columns_reg.i)
        wiring.connect(m, columns_reg.o, pass1.i)
        # Pass 1 emits columns; gathering them as "raster" beats of a transposed block and
        # reading that block's columns yields the rows of the original one.
        wiring.connect(m, pass1.o, rows.i)
        wiring.connect(m, rows.o, rows_reg.i)
        wiring.connect(m, rows_reg.o, pass2.i)
        m.d.comb += [
            narrow.i.valid.eq(pass2.o.valid),
            pass2.o.ready.eq(narrow.i.ready),
        ]
        for k in range(8):
            m.d.comb += narrow.i.payload[k].eq(_range_limit(pass2.o.payload[k]))
        wiring.connect(m, narrow.o, wiring.flipped(self.o))
        return m

