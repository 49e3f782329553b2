"""One pipelined 8-point pass of libjpeg's islow IDCT, one vector per clock.

The arithmetic is jidctint.c's, computed modulo ``2**mod_bits``: every operation before the
final descale is an addition, a constant multiplication or a left shift, so the bits that
survive the descale (and libjpeg's later truncations) are exact for any input, corrupt blocks
included.  Operands keep their natural widths up to that cap, so the multipliers stay as small
as the data allows.

With ``reduced`` the pass also computes jidctred.c's 4-point and 2-point passes and the 1x1
IDCT's pass (x0 alone) beside the 8-point one, each modulo its own width and descaled by its
own shift, and a ``size`` input (log2: 3, 2, 1, 0), taken with each vector, picks which
leaves: a size-``s`` vector has its ``s`` results in lanes ``0..s-1`` and zeros above.  The
size travels with the vector (``o_size``), so the caller knows which lanes are real.  All
four run every clock because consecutive vectors may have different sizes; the same stage
count keeps the latency and the handshake exactly those of the 8-point pass.
"""

from amaranth import Module, Signal, signed, unsigned
from amaranth.lib import wiring, stream, data
from amaranth.lib.wiring import In, Out

from . import idct_constants as K

__all__ = ["Idct1D"]

#: Register stages from input to output (the latency in clocks when the output is not stalled).
STAGES = 5


class Idct1D(wiring.Component):
    """Eight ``in_shape`` values in; bits ``[descale, mod_bits)`` of the eight rounded sums out.

    ``reduced``: None, or ``{log2 size: (mod_bits, descale)}`` for the reduced sizes 2, 1 and 0
    (``idct_constants.SIZE_PASS1`` / ``SIZE_PASS2``; an entry for 3 must repeat ``mod_bits``
    and ``descale``).  It adds the ports ``size`` (In, 2 bits, sampled with ``i``) and
    ``o_size`` (Out, valid with ``o``); output lanes are then as wide as the widest size's.
    """

    latency = STAGES

    def __init__(self, in_shape, mod_bits, descale, reduced=None):
        self._in_shape = in_shape
        self._mod_bits = mod_bits
        self._descale = descale
        self._reduced = None
        ports = {"i": In(stream.Signature(data.ArrayLayout(in_shape, 8)))}
        if reduced is None:
            self.out_bits = mod_bits - descale
        else:
            reduced = dict(reduced)
            if reduced.pop(3, (mod_bits, descale)) != (mod_bits, descale) or \
                    sorted(reduced) != [0, 1, 2]:
                self._MustUse__silence = True   # never elaborated: no "unused" warning for it
                raise ValueError(f"reduced must give (mod_bits, descale) for log2 sizes 2, 1, 0 "
                                 f"(and 3 only as {(mod_bits, descale)}), not {reduced!r}")
            self._reduced = reduced
            self.out_bits = max(mod - d for mod, d in [(mod_bits, descale), *reduced.values()])
            ports.update({"size": In(2), "o_size": Out(2)})
        ports["o"] = Out(stream.Signature(data.ArrayLayout(unsigned(self.out_bits), 8)))
        super().__init__(ports)

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

        reduced = self._reduced
        # Registers shared by every size (the lone inputs) keep the widest size's residue.
        shared_cap = max([cap] + [mod for mod, _ in reduced.values()]) if reduced else cap

        def reg(expr, name, cap=cap):
            """A stage register (stage = first letter of ``name``) holding ``expr`` mod 2**cap."""
            width = len(expr) + (0 if expr.shape().signed else 1)   # room for a sign bit
            sig = Signal(signed(min(width, cap)), name=name)
            with m.If(stage[name[0].upper()]):
                m.d.sync += sig.eq(expr)
            return sig

        def fit(value, cap):
            """``value`` mod 2**cap, signed: a shared register narrowed to one size's width."""
            return value[:cap].as_signed() if len(value) > cap else value

        x = [self.i.payload[k].as_signed() if not self._in_shape.signed else self.i.payload[k]
             for k in range(8)]

        # Stage A: the sums that feed the multipliers.
        e_z23 = reg(x[2] + x[6], "a_z23")
        s_x2, s_x6 = reg(x[2], "a_x2", shared_cap), reg(x[6], "a_x6", shared_cap)
        e_x2, e_x6 = fit(s_x2, cap), fit(s_x6, cap)
        e_sum04 = reg(x[0] + x[4], "a_sum04")
        e_dif04 = reg(x[0] - x[4], "a_dif04")
        s_t = [reg(x[7], "a_t0", shared_cap), reg(x[5], "a_t1", shared_cap),
               reg(x[3], "a_t2", shared_cap), reg(x[1], "a_t3", shared_cap)]
        o_t0, o_t1, o_t2, o_t3 = (fit(t, cap) for t in s_t)
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
        if reduced is None:
            for k, y in enumerate(outs):
                with m.If(stage["E"]):
                    m.d.sync += self.o.payload[k].eq(y[lo:hi])
            return m

        sized = {3: [y[lo:hi] for y in outs]}
        s_x0 = reg(x[0], "a_x0", shared_cap)
        sizes = [self.size]
        for letter in "abcd":
            sizes.append(reg(sizes[-1], f"{letter}_size"))

        def rounding(descale):
            return (1 << (descale - 1)) if descale else 0

        # 4x4 (jpeg_idct_4x4's pass), modulo its own width; the rounding joins tmp0 early.
        cap4, shift4 = reduced[2]
        x0, x2, x6 = fit(s_x0, cap4), fit(s_x2, cap4), fit(s_x6, cap4)
        z1, z2, z3, z4 = (fit(t, cap4) for t in s_t)          # x7, x5, x3, x1
        b4_t0 = reg((x0 << (K.CONST_BITS + 1)) + rounding(shift4), "b4_t0", cap4)
        b4_m2 = reg(x2 * K.FIX_1_847759065, "b4_m2", cap4)
        b4_m6 = reg(x6 * -K.FIX_0_765366865, "b4_m6", cap4)
        b4_p = [reg(z * c, f"b4_p{k}", cap4) for k, (z, c) in enumerate([
            (z1, -K.FIX_0_211164243), (z2, K.FIX_1_451774981),
            (z3, -K.FIX_2_172734803), (z4, K.FIX_1_061594337),
            (z1, -K.FIX_0_509795579), (z2, -K.FIX_0_601344887),
            (z3, K.FIX_0_899976223), (z4, K.FIX_2_562915447)])]
        c4_t0 = reg(b4_t0, "c4_t0", cap4)
        c4_tmp2 = reg(b4_m2 + b4_m6, "c4_tmp2", cap4)
        c4_s = [reg(b4_p[2 * k] + b4_p[2 * k + 1], f"c4_s{k}", cap4) for k in range(4)]
        d4_tmp10 = reg(c4_t0 + c4_tmp2, "d4_tmp10", cap4)
        d4_tmp12 = reg(c4_t0 - c4_tmp2, "d4_tmp12", cap4)
        d4_odd0 = reg(c4_s[0] + c4_s[1], "d4_odd0", cap4)
        d4_odd2 = reg(c4_s[2] + c4_s[3], "d4_odd2", cap4)
        sized[2] = [y[shift4:cap4] for y in (d4_tmp10 + d4_odd2, d4_tmp12 + d4_odd0,
                                             d4_tmp12 - d4_odd0, d4_tmp10 - d4_odd2)]

        # 2x2 (jpeg_idct_2x2's pass).
        cap2, shift2 = reduced[1]
        x0 = fit(s_x0, cap2)
        z1, z2, z3, z4 = (fit(t, cap2) for t in s_t)
        b2_t0 = reg((x0 << (K.CONST_BITS + 2)) + rounding(shift2), "b2_t0", cap2)
        b2_p = [reg(z * c, f"b2_p{k}", cap2) for k, (z, c) in enumerate([
            (z1, -K.FIX_0_720959822), (z2, K.FIX_0_850430095),
            (z3, -K.FIX_1_272758580), (z4, K.FIX_3_624509785)])]
        c2_t0 = reg(b2_t0, "c2_t0", cap2)
        c2_s = [reg(b2_p[2 * k] + b2_p[2 * k + 1], f"c2_s{k}", cap2) for k in range(2)]
        d2_t0 = reg(c2_t0, "d2_t0", cap2)
        d2_odd = reg(c2_s[0] + c2_s[1], "d2_odd", cap2)
        sized[1] = [y[shift2:cap2] for y in (d2_t0 + d2_odd, d2_t0 - d2_odd)]

        # 1x1: the DC alone, rounded and descaled (pass 1: unchanged).
        cap1, shift1 = reduced[0]
        b1_dc = reg(fit(s_x0, cap1) + rounding(shift1), "b1_dc", cap1)
        d1_dc = reg(reg(b1_dc, "c1_dc", cap1), "d1_dc", cap1)
        sized[0] = [d1_dc[shift1:cap1]]

        with m.If(stage["E"]):
            m.d.sync += self.o_size.eq(sizes[-1])
            with m.Switch(sizes[-1]):
                for log, ys in sized.items():
                    with m.Case(log):
                        m.d.sync += [self.o.payload[k].eq(ys[k] if k < len(ys) else 0)
                                     for k in range(8)]
        return m
