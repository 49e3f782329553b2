"""One pipelined 8-point pass of libjpeg's islow IDCT, one vector per clock.

The arithmetic is jidctint.c's, computed modulo ``2**mod_bits``: every operation before the
final descale is an addition, a constant multiplication or a left shift, so the bits that
survive the descale (and libjpeg's later truncations) are exact for any input, corrupt blocks
included.  Operands keep their natural widths up to that cap, so the multipliers stay as small
as the data allows.
"""

from amaranth import Module, Signal, signed, unsigned
from amaranth.lib import wiring, stream, data
from amaranth.lib.wiring import In, Out

from . import idct_constants as K

__all__ = ["Idct1D"]

#: Register stages from input to output (the latency in clocks when the output is not stalled).
STAGES = 5


class Idct1D(wiring.Component):
    """Eight ``in_shape`` values in; bits ``[descale, mod_bits)`` of the eight rounded sums out."""

    latency = STAGES

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
        valids = [Signal(name=f"valid_{c}") for c in "ABCDE"]
        enables = [Signal(name=f"move_{c}") for c in "ABCDE"]
        m.d.comb += enables[-1].eq(~valids[-1] | self.o.ready)
        for k in reversed(range(STAGES - 1)):
            m.d.comb += enables[k].eq(~valids[k] | enables[k + 1])
        m.d.comb += [self.i.ready.eq(enables[0]), self.o.valid.eq(valids[-1])]
        previous_valid = self.i.valid
        for valid, enable in zip(valids, enables):
            with m.If(enable):
                m.d.sync += valid.eq(previous_valid)
            previous_valid = valid
        stage = {"A": enables[0], "B": enables[1], "C": enables[2], "D": enables[3], "E": enables[4]}

        def reg(expr, name):
            """A stage register (stage = first letter of ``name``) holding ``expr`` mod 2**cap."""
            width = len(expr) + (0 if expr.shape().signed else 1)   # room for a sign bit
            sig = Signal(signed(min(width, cap)), name=name)
            with m.If(stage[name[0].upper()]):
                m.d.sync += sig.eq(expr)
            return sig

        x = [self.i.payload[k].as_signed() if not self._in_shape.signed else self.i.payload[k]
             for k in range(8)]

        # Stage A: the sums that feed the multipliers.
        e_z23 = reg(x[2] + x[6], "a_z23")
        e_x2, e_x6 = reg(x[2], "a_x2"), reg(x[6], "a_x6")
        e_sum04 = reg(x[0] + x[4], "a_sum04")
        e_dif04 = reg(x[0] - x[4], "a_dif04")
        o_t0, o_t1, o_t2, o_t3 = (reg(x[7], "a_t0"), reg(x[5], "a_t1"),
                                  reg(x[3], "a_t2"), reg(x[1], "a_t3"))
        o_z1 = reg(x[7] + x[1], "a_z1")
        o_z2 = reg(x[5] + x[3], "a_z2")
        o_z3 = reg(x[7] + x[3], "a_z3")
        o_z4 = reg(x[5] + x[1], "a_z4")
        o_z34 = reg((x[7] + x[3]) + (x[5] + x[1]), "a_z34")

        # Stage B: constant multiplications (the MULTIPLY() calls of jidctint.c).
        b_z1 = reg(e_z23 * K.FIX_0_541196100, "b_z1")
        b_m6 = reg(e_x6 * -K.FIX_1_847759065, "b_m6")
        b_m2 = reg(e_x2 * K.FIX_0_765366865, "b_m2")
        b_t0 = reg(e_sum04 << K.CONST_BITS, "b_t0")
        b_t1 = reg(e_dif04 << K.CONST_BITS, "b_t1")
        b_p0 = reg(o_t0 * K.FIX_0_298631336, "b_p0")
        b_p1 = reg(o_t1 * K.FIX_2_053119869, "b_p1")
        b_p2 = reg(o_t2 * K.FIX_3_072711026, "b_p2")
        b_p3 = reg(o_t3 * K.FIX_1_501321110, "b_p3")
        b_q1 = reg(o_z1 * -K.FIX_0_899976223, "b_q1")
        b_q2 = reg(o_z2 * -K.FIX_2_562915447, "b_q2")
        b_q3 = reg(o_z3 * -K.FIX_1_961570560, "b_q3")
        b_q4 = reg(o_z4 * -K.FIX_0_390180644, "b_q4")
        b_z5 = reg(o_z34 * K.FIX_1_175875602, "b_z5")

        # Stage C: even-part rotations, odd-part z3/z4 with z5 folded in.
        c_tmp2 = reg(b_z1 + b_m6, "c_tmp2")
        c_tmp3 = reg(b_z1 + b_m2, "c_tmp3")
        c_t0, c_t1 = reg(b_t0, "c_t0"), reg(b_t1, "c_t1")
        c_z3 = reg(b_q3 + b_z5, "c_z3")
        c_z4 = reg(b_q4 + b_z5, "c_z4")
        c_p = [reg(p, f"c_p{k}") for k, p in enumerate((b_p0, b_p1, b_p2, b_p3))]
        c_q1, c_q2 = reg(b_q1, "c_q1"), reg(b_q2, "c_q2")

        # Stage D: even butterflies (with DESCALE's rounding constant) and odd sums.
        rnd = 1 << (self._descale - 1)
        d_tmp10 = reg(c_t0 + c_tmp3 + rnd, "d_tmp10")
        d_tmp13 = reg(c_t0 - c_tmp3 + rnd, "d_tmp13")
        d_tmp11 = reg(c_t1 + c_tmp2 + rnd, "d_tmp11")
        d_tmp12 = reg(c_t1 - c_tmp2 + rnd, "d_tmp12")
        d_a0 = reg(c_p[0] + c_q1 + c_z3, "d_a0")
        d_a1 = reg(c_p[1] + c_q2 + c_z4, "d_a1")
        d_a2 = reg(c_p[2] + c_q2 + c_z3, "d_a2")
        d_a3 = reg(c_p[3] + c_q1 + c_z4, "d_a3")

        # Stage E: output butterflies, keeping the bits that survive the descale.
        outs = [d_tmp10 + d_a3, d_tmp11 + d_a2, d_tmp12 + d_a1, d_tmp13 + d_a0,
                d_tmp13 - d_a0, d_tmp12 - d_a1, d_tmp11 - d_a2, d_tmp10 - d_a3]
        lo, hi = self._descale, self._mod_bits
        for k, y in enumerate(outs):
            with m.If(stage["E"]):
                m.d.sync += self.o.payload[k].eq(y[lo:hi])
        return m
