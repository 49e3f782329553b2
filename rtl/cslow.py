"""C-slowing by two: one circuit that holds the state of two independent copies of itself
and serves them on alternate clocks.

Why: a circuit whose clock is set by a loop (a register feeding its own next value through
logic, like the Huffman decoder's bit window) cannot be pipelined, because each step needs
the last.  With two independent jobs in one circuit, every register of the loop becomes two
in series, each job advances every other clock, and one register of each pair can then be
moved into the middle of the loop by the design (it names those registers ``exempt``), which
halves the loop's path.  Together the two jobs still take one step per clock.

The transformation (Leiserson and Saxe's C-slow retiming, here with C = 2), on the elaborated
fragment of any design in the ``sync`` domain:

- every register becomes a pair: the design's logic computes the next value into a new
  *first* register, and the original signal, the *second*, takes it a clock later; so at any
  clock all registers hold the state of the same job, ``ctx``;
- every memory holds two copies of its contents, one per job: ``ctx`` is a new lowest address
  bit of each port;
- a synchronous read port's data register gets its pair as well (its hold while the port is
  disabled included);
- combinational logic, the signals it drives and the design's ports are shared: an input
  sampled, or an output seen, at a clock belongs to that clock's job;
- registers named in ``retime`` have the first register of their pair moved backwards,
  before the logic of their assignments: every signal those assignments read (their
  right-hand sides and the conditions they sit under) is registered once, and the
  assignments then run a clock later on the registered copies.  So the logic written in the
  assignments themselves lands in the clock after the logic that computes the signals they
  read, which is where the design cuts its loop;
- registers named in ``steady`` are read by retimed assignments from the first register of
  their pair, not from a copy of their own: a clock later the first register holds the job's
  next value, which is its present value wherever the design does not write the register in
  that step (the Huffman decoder's table floors, written only while no scan runs).  That
  saves the copy, which for the floors is 2,176 bits.

The surrounding design toggles ``ctx`` every clock (:func:`toggle`) and presents each job's
inputs on that job's clocks.  Reset resets both jobs.  Only the ``sync`` domain is supported.

Amaranth has no such transformation; this one is written on its 0.5 fragment internals
(``amaranth.hdl._xfrm``, ``_mem``), as its own ``DomainRenamer`` and ``ResetInserter`` are,
which the project's pin (``amaranth>=0.5.10,<0.6``) keeps stable.
"""

from amaranth import Cat, Mux, Shape, Signal, unsigned
from amaranth.hdl import Fragment
from amaranth.hdl._ast import Assign, Concat, Operator, Part, Print, Property, Slice, \
    SwitchValue, Switch, SignalDict, SignalSet
from amaranth.hdl._ir import Instance
from amaranth.hdl._mem import MemoryData, MemoryInstance
from amaranth.hdl._xfrm import FragmentTransformer, LHSMaskCollector, ValueTransformer

__all__ = ["c_slow", "toggle", "job_inputs", "job_outputs", "JOBS"]

_DOMAIN = "sync"
#: The jobs a C-slowed circuit serves: two (C = 2), one on each clock in turn.
JOBS = 2


def toggle(m, ctx):
    """Drive ``ctx``, the job served at each clock, from ``m``: 0, 1, 0, ... from reset."""
    m.d.sync += ctx.eq(~ctx)


def job_inputs(m, ctx, shared, owns):
    """The circuit's ``shared`` input stream from each job's own (``owns``, by job), through
    a register loaded a clock ahead with the beat of the next clock's job: ``ctx``, whose
    fanout is every memory's address, then reaches none of the logic behind the input (in
    the two-file core it did, through the marker parser's length arithmetic).  The register
    holds what was valid a clock before the job's clock; a stream's beat stays valid and
    unchanged until taken, and only the job's own clock takes it, so that is the beat still
    offered (one that arrives in the other job's clock waits for the job's next)."""
    valid = Signal(name=f"{shared.valid.name}_ahead")
    payload = Signal.like(shared.payload, name=f"{shared.valid.name}_payload_ahead")
    for j, own in enumerate(owns):
        with m.If(ctx != j):                        # (the next clock is job j's)
            m.d.sync += [valid.eq(own.valid), payload.eq(own.payload)]
        m.d.comb += own.ready.eq((ctx == j) & valid & shared.ready)
    m.d.comb += [shared.valid.eq(valid), shared.payload.eq(payload)]


def job_outputs(m, ctx, shared, owns, afters=None):
    """Each job's own output stream (``owns``, by job) from the circuit's ``shared`` one: a
    register per job, filled on the job's clocks while empty, so it holds ``valid`` until
    its consumer takes the beat (a stalled job does not stop the other).  ``afters``: other
    such outputs of the jobs whose beats must all be taken first (a verdict after its data).
    ``shared.ready`` is a register, set a clock ahead for the next clock's job: its own
    register is empty then exactly when it is empty or taken now (it is not filled in the
    other job's clock), so ``ctx`` does not reach the circuit's output logic."""
    room = Signal(name=f"{shared.ready.name}_ahead")
    for j, own in enumerate(owns):
        after = afters[j] if afters is not None else None
        with m.If(ctx != j):                        # (the next clock is job j's)
            m.d.sync += room.eq((~own.valid | own.ready)
                                & (~after.valid | after.ready if after is not None else 1))
        with m.If(own.valid & own.ready):
            m.d.sync += own.valid.eq(0)
        with m.If((ctx == j) & shared.valid & shared.ready):
            m.d.sync += [own.valid.eq(1), own.payload.eq(shared.payload)]
    m.d.comb += shared.ready.eq(room)


def c_slow(elaboratable, ctx, *, exempt=(), retime=(), steady=()):
    """``elaboratable`` C-slowed by two (see the module docstring): its ``sync`` registers,
    except the signals in ``exempt``, become pairs, and its memories hold two jobs' contents,
    addressed by the 1-bit ``ctx``.  ``exempt`` (registers the design pairs itself) is read
    after the design has elaborated, so a list the design fills while elaborating works;
    ``retime`` (registers whose pair goes around their assignments' logic) and ``steady``
    (registers retimed assignments read from their first register) likewise."""
    return _CSlow(ctx, exempt, retime, steady)(elaboratable, src_loc_at=1)


def _rewrite_lhs(value, target, read):
    """An assignment's target with each assigned signal mapped by ``target`` and each value
    read on the way (an index, a test) by ``read``."""
    t = type(value)
    if t is Signal:
        return target(value)
    if t is Slice:
        return Slice(_rewrite_lhs(value.value, target, read), value.start, value.stop)
    if t is Part:
        return Part(_rewrite_lhs(value.value, target, read), read(value.offset), value.width,
                    value.stride)
    if t is Concat:
        return Concat([_rewrite_lhs(part, target, read) for part in value.parts])
    if t is SwitchValue:
        return SwitchValue(read(value.test), [(patterns, _rewrite_lhs(v, target, read))
                                              for patterns, v in value.cases],
                           src_loc=value.src_loc)
    if t is Operator and value.operator in ("u", "s"):
        return Operator(value.operator, [_rewrite_lhs(value.operands[0], target, read)])
    raise TypeError(f"c_slow: cannot rewrite an assignment to {value!r}")


def _rewrite(stmt, target, read):
    """A statement (or list) with its targets mapped by ``target`` and what it reads (right-
    hand sides, tests, indexes) by ``read``."""
    t = type(stmt)
    if t is Assign:
        return Assign(_rewrite_lhs(stmt.lhs, target, read), read(stmt.rhs))
    if t is Switch:
        return Switch(read(stmt.test), [(patterns, [_rewrite(s, target, read) for s in stmts],
                                         src_loc) for patterns, stmts, src_loc in stmt.cases],
                      src_loc=stmt.src_loc)
    if t in (Print, Property):
        raise TypeError("c_slow: print and property statements are not supported")
    return [_rewrite(s, target, read) for s in stmt]


def _unchanged(value):
    return value


def _project(stmt, keep):
    """The part of a statement (or list) that assigns the signals ``keep`` accepts."""
    t = type(stmt)
    if t is Assign:
        targets = [keep(sig) for sig in stmt.lhs._lhs_signals()]
        if all(targets):
            return [stmt]
        if any(targets):
            raise TypeError(f"c_slow: {stmt!r} assigns retimed and other registers at once")
        return []
    if t is Switch:
        cases = [(patterns, _project(stmts, keep), src_loc)
                 for patterns, stmts, src_loc in stmt.cases]
        if not any(stmts for _, stmts, _ in cases):
            return []
        return [Switch(stmt.test, cases, src_loc=stmt.src_loc)]
    if t in (Print, Property):
        raise TypeError("c_slow: print and property statements are not supported")
    return [s for sub in stmt for s in _project(sub, keep)]


class _Delayed(ValueTransformer):
    """Reads replaced by registered copies (made on first use, driven by ``drivers``), or
    for ``steady`` registers by the first register of their pair (from ``firsts``)."""

    def __init__(self, copies, drivers, steady, firsts):
        self.copies, self.drivers, self.steady, self.firsts = copies, drivers, steady, firsts

    def on_Signal(self, value):
        if value in self.steady:
            if value not in self.firsts:
                raise TypeError(f"c_slow: steady {value!r} is not a register paired before "
                                "the assignments that read it")
            return self.firsts[value]
        if value not in self.copies:
            copy = Signal.like(value, name=f"{value.name}_h")
            self.copies[value] = copy
            self.drivers.append(copy.eq(value))
        return self.copies[value]


class _CSlow(FragmentTransformer):
    def __init__(self, ctx, exempt, retime, steady):
        assert len(ctx) == 1
        self.ctx = ctx
        self._from = (exempt, retime, steady)   # read once the design is elaborated: the
        self.exempt = self.retime = self.steady = None  # design may name its registers then
        self.copies = SignalDict()      # registered copies of what retimed assignments read
        self.firsts = SignalDict()      # every pair's first register, by its second

    def on_fragment(self, fragment):
        if isinstance(fragment, Instance):
            raise TypeError("c_slow: instances are not supported (their state is unknown)")
        for domain in fragment.statements:
            if domain not in ("comb", _DOMAIN):
                raise TypeError(f"c_slow: only the '{_DOMAIN}' domain is supported, "
                                f"not '{domain}'")
        if self.exempt is None:
            self.exempt, self.retime, self.steady = (SignalSet(s) for s in self._from)
        new = super().on_fragment(fragment)
        if isinstance(new, MemoryInstance):
            return self._memory(new)
        stmts = new.statements.get(_DOMAIN)
        if not stmts:
            return new
        paired = _project(stmts, lambda sig: sig not in self.retime)
        retimed = _project(stmts, lambda sig: sig in self.retime)
        targets = LHSMaskCollector()
        targets.visit_stmt(paired)
        firsts = SignalDict()
        for signal, _mask in targets.masks():
            if signal not in self.exempt:
                firsts[signal] = Signal.like(signal, name=f"{signal.name}_first")
        self.firsts.update(firsts)     # subfragments come first: a steady read finds its pair
        drivers = []
        delayed = _Delayed(self.copies, drivers, self.steady, self.firsts)
        held = LHSMaskCollector()
        held.visit_stmt(retimed)
        # The first register takes what the job's register holds unless the logic says
        # otherwise, as the one register did; a retimed register holds its job's value, read
        # a clock ago, unless its (delayed) assignments say otherwise.
        pairs = ([first.eq(signal) for signal, first in firsts.items()]
                 + [_rewrite(s, lambda sig: firsts.get(sig, sig), _unchanged)
                    for s in paired]
                 + [signal.eq(first) for signal, first in firsts.items()])
        later = ([signal.eq(delayed(signal)) for signal, _mask in held.masks()]
                 + [_rewrite(s, _unchanged, delayed) for s in retimed])
        new.statements[_DOMAIN] = type(stmts)(pairs + later + drivers)
        return new

    def _memory(self, memory):
        """Two copies of the contents, ``ctx`` the lowest address bit (row ``r`` of job ``j``
        at ``2 r + j``); a synchronous read's data register gets its pair.

        The lowest bit, not the top one: the memory is then exactly twice as deep.  As the
        top bit, a depth not a power of two is padded to one first: the raster's chroma
        line memories (24 lines of words) took 32, a third more block RAM (the two-file
        core at max width 2048: 198 EBR instead of about 230)."""
        data = memory._data
        width = Shape.cast(data.shape).width
        doubled = MemoryData(shape=unsigned(width), depth=JOBS * data.depth,
                             init=[row for row in data.init._raw for _ in range(JOBS)])
        doubled.name = data.name
        new = MemoryInstance(data=doubled, attrs=memory._attrs, src_loc=memory.src_loc)
        wrapper = Fragment(src_loc=memory.src_loc)
        for port in memory._write_ports:
            new.write_port(domain=port._domain, addr=Cat(self.ctx, port._addr),
                           data=port._data, en=port._en)
        for i, port in enumerate(memory._read_ports):
            addr = Cat(self.ctx, port._addr)
            if port._domain == "comb":
                new.read_port(domain="comb", addr=addr, data=port._data, en=port._en,
                              transparent_for=())
                continue
            # The port's own register is the first; ``port._data`` becomes the second, and
            # holds the job's value when the job's read was disabled.
            first = Signal(width, name=f"{data.name}_r{i}_first")
            held = Signal(width, name=f"{data.name}_r{i}_held")
            en = Signal(name=f"{data.name}_r{i}_en")
            new.read_port(domain=port._domain, addr=addr, data=first, en=port._en,
                          transparent_for=port._transparent_for)
            wrapper.add_statements(port._domain, [
                en.eq(port._en), held.eq(port._data),
                port._data.eq(Mux(en, first, held))])
        wrapper.add_subfragment(new, "storage")
        return wrapper
