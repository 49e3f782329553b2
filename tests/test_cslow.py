"""C-slowing by two: the C-slowed circuit, fed two jobs on alternate clocks, gives each job
exactly what a circuit of its own gives it (two separate instances are the reference)."""

import random
import re

import pytest
from amaranth import Array, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from dlforge.rtl.cslow import c_slow, toggle


class _Toy(wiring.Component):
    """Registers with enables, partial and indexed assignments, a synchronous read port with
    an enable (transparent), a combinational read port, and a register fed back through both."""

    op: In(2)
    arg: In(8)
    addr: In(3)
    out: Out(8)
    peek: Out(8)
    acc_o: Out(8)

    def __init__(self):
        self.registers = {}
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = Memory(shape=8, depth=6, init=[3, 1, 4, 1, 5])
        wr = mem.write_port()
        rd = mem.read_port(transparent_for=(wr,))
        peek = mem.read_port(domain="comb")
        acc = Signal(8, init=7)
        regs = [Signal(4, name=f"r{i}") for i in range(4)]
        arr = Array(regs)
        self.registers.update(acc=acc, regs=regs)
        m.d.comb += [wr.addr.eq(self.addr), wr.data.eq(acc + self.arg),
                     rd.addr.eq(self.addr), rd.en.eq(self.op == 2), peek.addr.eq(acc[:3] % 6),
                     self.out.eq(rd.data), self.peek.eq(peek.data), self.acc_o.eq(acc)]
        with m.Switch(self.op):
            with m.Case(0):
                m.d.sync += acc.eq(acc + self.arg)
            with m.Case(1):
                m.d.comb += wr.en.eq(1)
                m.d.sync += acc[4:].eq(self.arg[:4])
            with m.Case(2):
                m.d.sync += arr[self.arg[:2]].eq(acc ^ rd.data)
            with m.Case(3):
                m.d.sync += acc.eq(Mux(peek.data[0], regs[0] + regs[1], Cat(regs[2], regs[3])))
        return m


def _stimulus(rng, n):
    return [(rng.randrange(4), rng.randrange(256), rng.randrange(6)) for _ in range(n)]


def _simulate(top, toy, stims, job_of):
    """Each stimulus step on the toy's ports, in the clock of its job (``job_of(ctx)``);
    what each job saw at its steps."""
    seen = tuple([] for _ in stims)

    async def bench(ctx):
        steps = [iter(s) for s in stims]
        for _ in range(sum(len(s) for s in stims)):
            job = job_of(ctx)
            op, arg, addr = next(steps[job])
            ctx.set(toy.op, op), ctx.set(toy.arg, arg), ctx.set(toy.addr, addr)
            await ctx.delay(1e-9)
            seen[job].append((ctx.get(toy.out), ctx.get(toy.peek), ctx.get(toy.acc_o)))
            await ctx.tick()

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return seen


def _run_single(stim):
    toy = _Toy()
    return _simulate(toy, toy, [stim], lambda ctx: 0)[0]


class _Later:
    """Registers named once the toy has elaborated (as the decoder's lists are filled)."""

    def __init__(self, chosen):
        self.chosen = chosen

    def __iter__(self):
        return iter(self.chosen())


def _run_pair(stims, retime):
    toy = _Toy()
    ctx_sig = Signal()
    m = Module()
    acc, regs = (lambda: [toy.registers["acc"]]), (lambda: toy.registers["regs"])
    chosen, steady = {"none": (lambda: [], lambda: []), "acc": (acc, lambda: []),
                      "all": (lambda: acc() + regs(), lambda: []),
                      "acc, regs steady": (acc, regs)}[retime]
    m.submodules.toy = c_slow(toy, ctx_sig, retime=_Later(chosen), steady=_Later(steady))
    toggle(m, ctx_sig)
    return _simulate(m, toy, stims, lambda ctx: ctx.get(ctx_sig))


@pytest.mark.parametrize("retime", ["none", "acc", "all", "acc, regs steady"])
@pytest.mark.parametrize("seed", [1, 2])
def test_each_job_sees_a_circuit_of_its_own(seed, retime):
    """Also with registers retimed (their assignments a clock later on registered copies of
    what they read): indexed and partial assignments under conditions.  The ``regs`` may be
    read steady (from their first registers) by ``acc``: it reads them (op 3) only in steps
    that do not write them (op 2)."""
    rng = random.Random(seed)
    stims = (_stimulus(rng, 300), _stimulus(rng, 300))
    alone = [_run_single(s) for s in stims]
    together = _run_pair(stims, retime)
    assert together[0] == alone[0]
    assert together[1] == alone[1]
    assert alone[0] != alone[1]


def test_a_steady_read_of_a_signal_that_is_not_a_pair_is_refused():
    toy = _Toy()
    m = Module()
    m.submodules.toy = c_slow(toy, Signal(), retime=_Later(lambda: [toy.registers["acc"]]),
                              steady=_Later(lambda: [toy.arg]))
    with pytest.raises(TypeError, match="steady .* is not a register paired"):
        Simulator(m)


def test_other_domains_are_refused():
    class _Other(wiring.Component):
        o: Out(1)

        def elaborate(self, platform):
            m = Module()
            m.d.pix += self.o.eq(~self.o)
            return m

    m = Module()
    m.submodules.x = c_slow(_Other(), Signal())
    with pytest.raises(TypeError, match="only the 'sync' domain"):
        Simulator(m)


def test_a_memory_is_exactly_twice_as_deep():
    """``ctx`` is the lowest address bit, so a depth that is not a power of two is not padded
    to one (the raster's chroma line memories, 24 lines of words, would take a third more
    block RAM)."""
    from amaranth.back import rtlil

    toy, ctx = _Toy(), Signal(name="ctx")
    text = rtlil.convert(c_slow(toy, ctx), ports=[ctx, toy.op, toy.arg, toy.addr, toy.out,
                                                  toy.peek, toy.acc_o])
    assert re.findall(r"memory width 8 size (\d+)", text) == ["12"]
