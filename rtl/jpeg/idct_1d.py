"""One pipelined 8-point pass of libjpeg's islow IDCT, one vector per clock.

The arithmetic is jidctint.c's, computed modulo ``2**mod_bits``: every operation before the
final descale is an addition, a constant multiplication or a left shift, so the bits that
survive the descale (and libjpeg's later truncations) are exact for any input, corrupt blocks
included.  Operands keep their natural widths up to that cap, so the multipliers stay as small
as the data allows.  Operands wider than a DSP's 18 bits are multiplied in two 17-bit halves
whose partial products are registered before they are added, so no DSP output feeds a long
carry chain in the same clock.
"""

from amaranth import Module, Signal, signed, unsigned
from amaranth.lib import wiring, stream, data
from amaranth.lib.wiring import In, Out

from . import idct_constants as K

__all__ = ["Idct1D"]

#: Register stages: sums, partial products, products, rotations, butterflies, outputs.
STAGES = ("sums", "partials", "products", "rotations", "butterflies", "outputs")

#: Operand bits one multiplier takes (an 18x18 signed DSP, less the sign of the low half).
_HALF = 17


class Idct1D(wiring.Component):
    """Eight ``in_shape`` values in; bits ``[descale, mod_bits)`` of the eight rounded sums out."""

    #: Clocks from input to output when the output is not stalled.
    latency = len(STAGES)

    def __init__(self, in_shape, mod_bits, descale):
        self._in_shape = in_shape
        self._mod_bits = mod_bits
        self._descale = descale
        self.out_bits = mod_bits - descale
        super().__init__({
            "i": In(stream.Signature(data.ArrayLayout(in_shape, 8))),
            "o": Out(stream.Signature(data.ArrayLayout(unsigned(self.out_bits), 8))),
        })

    def elaborate(self, platform):
        m = Module()
        cap = self._mod_bits

        # Each stage moves when its successor has room, so a stalled output lets the stages
        # behind it close up their bubbles (a globally stalled pipeline would keep them and
        # delay the next block by a clock every time the consumer throttles it).
        valids = {s: Signal(name=f"valid_{s}") for s in STAGES}
        moves = {s: Signal(name=f"move_{s}") for s in STAGES}
        m.d.comb += moves[STAGES[-1]].eq(~valids[STAGES[-1]] | self.o.ready)
        for here, after in zip(reversed(STAGES[:-1]), reversed(STAGES[1:])):
            m.d.comb += moves[here].eq(~valids[here] | moves[after])
        m.d.comb += [self.i.ready.eq(moves[STAGES[0]]), self.o.valid.eq(valids[STAGES[-1]])]
        previous = self.i.valid
        for s in STAGES:
            with m.If(moves[s]):
                m.d.sync += valids[s].eq(previous)
            previous = valids[s]

        def reg(stage, expr, name):
            """A register of ``stage`` holding ``expr`` modulo 2**cap (natural width if smaller)."""
            width = len(expr) + (0 if expr.shape().signed else 1)   # room for a sign bit
            sig = Signal(signed(min(width, cap)), name=name)
            with m.If(moves[stage]):
                m.d.sync += sig.eq(expr)
            return sig

        def multiply(value, constant, name):
            """``value * constant`` over the partials and products stages."""
            if len(value) <= _HALF + 1:
                return reg("products", reg("partials", value * constant, f"{name}_p"), name)
            low = reg("partials", value[:_HALF] * constant, f"{name}_lo")      # unsigned half
            high = reg("partials", value[_HALF:].as_signed() * constant, f"{name}_hi")
            return reg("products", (high << _HALF) + low, name)

        def delay(value, name):
            return reg("products", reg("partials", value, f"{name}_p"), name)

        x = [self.i.payload[k] if self._in_shape.signed else self.i.payload[k].as_signed()
             for k in range(8)]

        # Sums that feed the multipliers.
        z23 = reg("sums", x[2] + x[6], "z23")
        x2, x6 = reg("sums", x[2], "x2"), reg("sums", x[6], "x6")
        sum04 = reg("sums", x[0] + x[4], "sum04")
        dif04 = reg("sums", x[0] - x[4], "dif04")
        t0, t1, t2, t3 = (reg("sums", x[k], f"t{n}") for n, k in enumerate((7, 5, 3, 1)))
        z1 = reg("sums", x[7] + x[1], "z1")
        z2 = reg("sums", x[5] + x[3], "z2")
        z3 = reg("sums", x[7] + x[3], "z3")
        z4 = reg("sums", x[5] + x[1], "z4")
        z34 = reg("sums", (x[7] + x[3]) + (x[5] + x[1]), "z34")

        # Constant multiplications (the MULTIPLY() calls of jidctint.c).
        m_z1 = multiply(z23, K.FIX_0_541196100, "m_z1")
        m_x6 = multiply(x6, -K.FIX_1_847759065, "m_x6")
        m_x2 = multiply(x2, K.FIX_0_765366865, "m_x2")
        e_t0 = delay(sum04 << K.CONST_BITS, "e_t0")
        e_t1 = delay(dif04 << K.CONST_BITS, "e_t1")
        m_t0 = multiply(t0, K.FIX_0_298631336, "m_t0")
        m_t1 = multiply(t1, K.FIX_2_053119869, "m_t1")
        m_t2 = multiply(t2, K.FIX_3_072711026, "m_t2")
        m_t3 = multiply(t3, K.FIX_1_501321110, "m_t3")
        m_q1 = multiply(z1, -K.FIX_0_899976223, "m_q1")
        m_q2 = multiply(z2, -K.FIX_2_562915447, "m_q2")
        m_q3 = multiply(z3, -K.FIX_1_961570560, "m_q3")
        m_q4 = multiply(z4, -K.FIX_0_390180644, "m_q4")
        m_z5 = multiply(z34, K.FIX_1_175875602, "m_z5")

        # Even-part rotations; odd-part z3/z4 with z5 folded in.
        tmp2 = reg("rotations", m_z1 + m_x6, "tmp2")
        tmp3 = reg("rotations", m_z1 + m_x2, "tmp3")
        r_t0, r_t1 = reg("rotations", e_t0, "r_t0"), reg("rotations", e_t1, "r_t1")
        q3 = reg("rotations", m_q3 + m_z5, "q3")
        q4 = reg("rotations", m_q4 + m_z5, "q4")
        p = [reg("rotations", v, f"p{k}") for k, v in enumerate((m_t0, m_t1, m_t2, m_t3))]
        q1, q2 = reg("rotations", m_q1, "q1"), reg("rotations", m_q2, "q2")

        # Even butterflies (with DESCALE's rounding constant) and odd sums.
        rnd = 1 << (self._descale - 1)
        tmp10 = reg("butterflies", r_t0 + tmp3 + rnd, "tmp10")
        tmp13 = reg("butterflies", r_t0 - tmp3 + rnd, "tmp13")
        tmp11 = reg("butterflies", r_t1 + tmp2 + rnd, "tmp11")
        tmp12 = reg("butterflies", r_t1 - tmp2 + rnd, "tmp12")
        a0 = reg("butterflies", p[0] + q1 + q3, "a0")
        a1 = reg("butterflies", p[1] + q2 + q4, "a1")
        a2 = reg("butterflies", p[2] + q2 + q3, "a2")
        a3 = reg("butterflies", p[3] + q1 + q4, "a3")

        # Output butterflies, keeping the bits that survive the descale.
        outs = [tmp10 + a3, tmp11 + a2, tmp12 + a1, tmp13 + a0,
                tmp13 - a0, tmp12 - a1, tmp11 - a2, tmp10 - a3]
        for k, y in enumerate(outs):
            with m.If(moves["outputs"]):
                m.d.sync += self.o.payload[k].eq(y[self._descale:self._mod_bits])
        return m
