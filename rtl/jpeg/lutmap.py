"""Logic of a fixed shape, for the few paths where the LUT mapper's own choice is too slow.

Yosys' ABC9 maps the Huffman decoder's one-clock loop badly for ECP5: it models a LUT-RAM
read as free and a wire as 0.3 ns (routing is 0.5 to 2 ns), believes most of the loop has
slack and "recovers area" by turning and-or trees and shifters into long chains of LUTs
(17 levels where 3 would do).  A wire marked ``keep`` is a boundary ABC9 maps up to and not
across, so logic cut into kept pieces of at most four inputs per bit becomes one LUT4 per
bit and piece, in the shape written here.

Each piece is written as bitwise operations on whole vectors (the same LUTs for yosys, few
operations for Amaranth's Python simulator), in a submodule of its own: the simulator settles
a chain of signals one link per delta cycle and re-runs the whole module of a link each time,
so the chains stay out of the decoder's own module.  ``keep`` is only an attribute.
"""

from amaranth import Module, Signal, Cat, Mux, Const

__all__ = ["kept", "select", "first_of", "any_of", "shift_left"]

_KEEP = {"keep": 1}


def kept(m, value, name, shape=None):
    """``value`` through a kept wire (a LUT boundary), computed in a submodule of ``m``."""
    s = Signal(shape if shape is not None else len(value), name=name, attrs=_KEEP)
    sub = Module()
    sub.d.comb += s.eq(value)
    m.submodules += sub
    return s


def _spread(bit, width):
    return Cat(*[bit] * width)


def select(m, pairs, name):
    """The OR of ``value`` over the ``(select, value)`` pairs whose 1-bit ``select`` is set
    (a one-hot pick when at most one is).  Per bit: one LUT4 for every two pairs, then
    four-input ORs; 32 pairs take three levels."""
    width = max(len(v) for _, v in pairs)
    terms = [_spread(s, width) & v for s, v in pairs]
    if len(terms) % 2:
        terms.append(Const(0, width))
    level = kept(m, Cat(*[terms[i] | terms[i + 1] for i in range(0, len(terms), 2)]),
                 f"{name}_l0")
    return _or_levels(m, level, width, f"{name}_l", 1)


def first_of(m, thermometer, values, name):
    """The value at the first set bit of ``thermometer`` (a code whose bits, once set, stay
    set: 0001111...), as two words to be ORed: per bit, one five-input LUT (two LUT4 and the
    slice's multiplexer, no route between them) for every two values, then four-input ORs.
    The same function as :func:`select` over the one-hot ``t[i] & ~t[i-1]``, a LUT level
    shorter: the one-hot is folded into the first level."""
    width = max(len(v) for v in values)
    assert len(values) == len(thermometer) and len(values) % 2 == 0
    t = [Const(0)] + list(thermometer)
    terms = [_spread(t[i + 1] & ~t[i], width) & values[i]
             | _spread(t[i + 2] & ~t[i + 1], width) & values[i + 1]
             for i in range(0, len(values), 2)]
    level = kept(m, Cat(*terms), f"{name}_l0")
    words = [level[i:i + width] for i in range(0, len(level), width)]
    if len(words) > 2:
        groups = [words[i:i + 4] for i in range(0, len(words), 4)]
        level = kept(m, Cat(*[_or(g) for g in groups]), f"{name}_l1")
        words = [level[i:i + width] for i in range(0, len(level), width)]
    assert len(words) <= 2
    return words


def any_of(m, bits, name):
    """The OR of many 1-bit values, as kept four-input ORs."""
    return _or_levels(m, Cat(*bits), 1, f"{name}_l", 0)


def _or_levels(m, level, width, name, depth):
    """ORs of four ``width``-bit words at a time, one kept vector per level, down to one."""
    while len(level) > width:
        words = [level[i:i + width] for i in range(0, len(level), width)]
        groups = [words[i:i + 4] for i in range(0, len(words), 4)]
        level = kept(m, Cat(*[_or(g) for g in groups]), f"{name}{depth}")
        depth += 1
    return level


def _or(values):
    out = values[0]
    for v in values[1:]:
        out = out | v
    return out


def shift_left(m, value, amount, name):
    """``value << amount`` truncated to ``len(value)``: one kept 2:1 stage per bit of
    ``amount`` (a LUT per bit and stage), the smallest shift first."""
    cur = value
    for b in range(len(amount)):
        cur = kept(m, Mux(amount[b], cur << (1 << b), cur)[:len(value)], f"{name}_s{b}",
                   len(value))
    return cur
