"""The array of processing elements: ``rows x cols`` PEs, each a ``simd``-wide dot product into
an accumulator of one output channel (see docs/conv-engine.md).

Every clock one element of the current pixel's dot product enters column 0: ``simd`` input
operands and the flags ``first`` / ``last`` (the pixel's first and last element).  Element and
flags move one column to the right per clock, shared by the rows of a column.  ``w`` carries
every PE's weight vector, *already skewed*: column ``c``'s weights are those of the element
that reached column ``c`` this clock (the weight banks delay their read address by ``c``
clocks, which costs an address register per column instead of ``rows * simd`` operand
registers).

A PE registers its operands, multiplies (one registered stage), sums its lanes (one
registered stage) and accumulates.  On a pixel's last element its sum goes onto its row's output lane instead of
staying in the accumulator; one column finishes per clock (the controller starts pixels at
least ``cols`` clocks apart), so the lanes carry the pixel's results one column per clock:
beat ``c`` holds channels ``c * rows`` to ``c * rows + rows - 1``.  The array never stalls;
``LATENCY`` is the clock count from an element entering column 0 to its column-0 result beat.
"""

import functools
import operator

from amaranth import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .config import EngineConfig

__all__ = ["PeArray", "LATENCY", "element_layout", "result_layout"]

#: Clocks from an element at column 0 (``i``) to its result beat (column 0) on ``o``:
#: operand registers, multiply, lane sum, accumulate-and-finish.
LATENCY = 4


def element_layout(cfg):
    return data.StructLayout({
        "x": data.ArrayLayout(signed(cfg.operand_bits), cfg.simd),
        "first": 1,
        "last": 1,
    })


def result_layout(cfg):
    return data.StructLayout({
        "col": range(cfg.cols),                                   # which channel group
        "acc": data.ArrayLayout(signed(cfg.acc_bits), cfg.rows),  # channel col * rows + r
    })


class PeArray(wiring.Component):
    """The engine's arithmetic, which the rest of the engine exists to keep busy: one element of
    a dot product enters every clock and the array never stalls."""

    def __init__(self, cfg=EngineConfig()):
        self.cfg = cfg
        vector = data.ArrayLayout(signed(cfg.operand_bits), cfg.simd)
        super().__init__({
            "i": In(stream.Signature(element_layout(cfg), always_ready=True)),
            # w[c][r]: the weights of PE (r, c) for the element now in column c
            "w": In(data.ArrayLayout(data.ArrayLayout(vector, cfg.rows), cfg.cols)),
            "o": Out(stream.Signature(result_layout(cfg), always_ready=True)),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        acc_shape = signed(cfg.acc_bits)
        product_shape = signed(2 * cfg.operand_bits)
        sum_shape = signed(2 * cfg.operand_bits + (cfg.simd - 1).bit_length())

        # The element's path across the columns, one register per column.
        elem = [Signal(element_layout(cfg), name=f"elem{c}") for c in range(cfg.cols)]
        valid = [Signal(name=f"valid{c}") for c in range(cfg.cols)]
        m.d.comb += [elem[0].eq(self.i.payload), valid[0].eq(self.i.valid)]
        for c in range(1, cfg.cols):
            m.d.sync += [elem[c].eq(elem[c - 1]), valid[c].eq(valid[c - 1])]

        lane_terms = [[] for _ in range(cfg.rows)]
        finishing = []
        for c in range(cfg.cols):
            # Operands are registered before the multipliers (memory outputs arrive late in
            # the clock); flags follow that stage and the PEs' two pipeline stages.
            x_in = Signal(data.ArrayLayout(signed(cfg.operand_bits), cfg.simd), name=f"x_c{c}")
            m.d.sync += x_in.eq(elem[c].x)
            flags0 = Signal(3, name=f"flags0_c{c}")
            flags1 = Signal(3, name=f"flags1_c{c}")
            flags2 = Signal(3, name=f"flags2_c{c}")
            m.d.sync += [flags0.eq(Cat(valid[c], elem[c].first, elem[c].last)),
                         flags1.eq(flags0), flags2.eq(flags1)]
            valid2, first2, last2 = flags2[0], flags2[1], flags2[2]
            done = Signal(name=f"done_c{c}")
            m.d.sync += done.eq(valid2 & last2)
            finishing.append(done)
            for r in range(cfg.rows):
                w_in = Signal(data.ArrayLayout(signed(cfg.operand_bits), cfg.simd),
                              name=f"w_r{r}c{c}")
                m.d.sync += w_in.eq(self.w[c][r])
                products = [Signal(product_shape, name=f"p_r{r}c{c}_{s}") for s in range(cfg.simd)]
                m.d.sync += [p.eq(x_in[s] * w_in[s]) for s, p in enumerate(products)]
                total = Signal(sum_shape, name=f"sum_r{r}c{c}")
                m.d.sync += total.eq(sum(products[1:], products[0]))
                acc = Signal(acc_shape, name=f"acc_r{r}c{c}")
                result = Signal(acc_shape, name=f"res_r{r}c{c}")
                running = Mux(first2, 0, acc) + total
                with m.If(valid2):
                    m.d.sync += acc.eq(running)
                    with m.If(last2):
                        m.d.sync += result.eq(running)
                lane_terms[r].append((done, result))

        # Row lanes: the result of the column that finished (at most one per clock).
        col = Signal(range(cfg.cols))
        for c, done in enumerate(finishing):
            with m.If(done):
                m.d.comb += col.eq(c)
        m.d.comb += [self.o.valid.eq(Cat(*finishing).any()), self.o.payload.col.eq(col)]
        for r in range(cfg.rows):
            terms = [done.replicate(cfg.acc_bits) & result.as_unsigned()
                     for done, result in lane_terms[r]]
            m.d.comb += self.o.payload.acc[r].eq(functools.reduce(operator.or_, terms))
        return m

