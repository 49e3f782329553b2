"""Small stream plumbing shared by the gateware: registered stages and a lane-width narrower."""

from amaranth import Module, Signal, Array
from amaranth.lib import wiring, stream, data
from amaranth.lib.wiring import In, Out

__all__ = ["PipeStage", "SkidBuffer", "Narrow", "BytesOut", "credits"]


def credits(m, capacity, spend, refund, name):
    """A register that says a free-running pipeline may take a beat this clock.

    A pipeline without ``ready`` (every stage moves every clock) cannot stall, so the buffer
    behind it must have room for everything it takes.  The count starts at ``capacity`` (the
    buffer's places), falls by ``spend`` (1 when the pipeline takes a beat, which it does only
    while the returned signal is high) and rises by ``refund`` (places the buffer's reader
    frees).  The returned signal is a register, so ``ready`` chains end at it: that, and
    the stages' lost clock enables, is the point (docs/architecture.md, "Credits").
    """
    count = Signal(range(capacity + 1), init=capacity, name=f"{name}_credits")
    after = Signal(range(capacity + 1), name=f"{name}_credits_next")
    ok = Signal(init=1, name=f"{name}_may_take")
    m.d.comb += after.eq(count - spend + refund)
    m.d.sync += [count.eq(after), ok.eq(after != 0)]
    return ok


class PipeStage(wiring.Component):
    """One register between two streams, with an optional function applied on the way.

    ``valid`` is a register (never waits on ``ready``); a beat may enter in the same cycle the
    held one leaves, so a chain of these runs at one beat per clock.
    """

    def __init__(self, in_shape, out_shape, fn=lambda m, payload: payload):
        self._fn = fn
        super().__init__({"i": In(stream.Signature(in_shape)), "o": Out(stream.Signature(out_shape))})

    def elaborate(self, platform):
        m = Module()
        advance = ~self.o.valid | self.o.ready
        m.d.comb += self.i.ready.eq(advance)
        with m.If(advance):
            m.d.sync += [
                self.o.valid.eq(self.i.valid),
                self.o.payload.eq(self._fn(m, self.i.payload)),
            ]
        return m


class SkidBuffer(wiring.Component):
    """A register stage whose ``ready`` is registered too, so that it cuts a ``ready`` chain.

    A :class:`PipeStage` passes ``o.ready`` straight to ``i.ready``; a long chain of stages
    then makes one long path from the last consumer's ``ready`` to the first producer.  Here
    ``i.ready`` is a register: the beat that arrives while the output stalls waits in a second
    (skid) register.  One beat a clock in steady state, order kept.
    """

    def __init__(self, shape):
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape))})

    def elaborate(self, platform):
        m = Module()
        skid = Signal.like(self.i.payload)
        skid_valid = Signal()
        m.d.comb += self.i.ready.eq(~skid_valid)
        with m.If(~self.o.valid | self.o.ready):
            with m.If(skid_valid):
                m.d.sync += [self.o.payload.eq(skid), self.o.valid.eq(1), skid_valid.eq(0)]
            with m.Else():
                m.d.sync += [self.o.payload.eq(self.i.payload), self.o.valid.eq(self.i.valid)]
        with m.Elif(self.i.valid & ~skid_valid):
            m.d.sync += [skid.eq(self.i.payload), skid_valid.eq(1)]
        return m


class Narrow(wiring.Component):
    """Split each beat of ``in_lanes`` elements into ``in_lanes // out_lanes`` beats, lowest lanes first.

    The next wide beat is taken in the cycle the last narrow beat leaves, so a continuous
    input keeps the output busy every clock.
    """

    def __init__(self, shape, in_lanes, out_lanes):
        if in_lanes % out_lanes:
            self._MustUse__silence = True   # never elaborated: no "unused" warning for it
            raise ValueError(f"{in_lanes} input lanes do not split into beats of {out_lanes}")
        self._shape, self._in_lanes, self._out_lanes = shape, in_lanes, out_lanes
        super().__init__({
            "i": In(stream.Signature(data.ArrayLayout(shape, in_lanes))),
            "o": Out(stream.Signature(data.ArrayLayout(shape, out_lanes))),
        })

    def elaborate(self, platform):
        m = Module()
        ratio = self._in_lanes // self._out_lanes
        if ratio == 1:
            wiring.connect(m, wiring.flipped(self.i), wiring.flipped(self.o))
            return m
        held = Signal(data.ArrayLayout(self._shape, self._in_lanes))
        have = Signal()
        beat = Signal(range(ratio))
        last = beat == ratio - 1
        m.d.comb += [
            self.o.valid.eq(have),
            self.i.ready.eq(~have | (self.o.ready & last)),
        ]
        groups = Array(Signal(data.ArrayLayout(self._shape, self._out_lanes), name=f"group{g}")
                       for g in range(ratio))
        for g in range(ratio):
            for lane in range(self._out_lanes):
                m.d.comb += groups[g][lane].eq(held[g * self._out_lanes + lane])
        m.d.comb += self.o.payload.eq(groups[beat])
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [held.eq(self.i.payload), have.eq(1), beat.eq(0)]
        with m.Elif(self.o.valid & self.o.ready):
            m.d.sync += beat.eq(beat + 1)
            with m.If(last):
                m.d.sync += have.eq(0)
        return m


class BytesOut(wiring.Component):
    """A stream of ``width``-byte beats ({data, keep, last}) as one byte per beat ({byte, last}).

    ``keep`` (1..width) counts the real bytes of a beat, lowest first; ``last`` moves to the
    final real byte.  One byte leaves every clock; the next wide beat is taken as the last
    byte of the current one leaves.
    """

    def __init__(self, width):
        self._width = width
        in_layout = data.StructLayout({"data": 8 * width, "keep": width.bit_length(), "last": 1})
        out_layout = data.StructLayout({"byte": 8, "last": 1})
        super().__init__({"i": In(stream.Signature(in_layout)),
                          "o": Out(stream.Signature(out_layout))})

    def elaborate(self, platform):
        m = Module()
        if self._width == 1:
            m.d.comb += [self.o.valid.eq(self.i.valid), self.i.ready.eq(self.o.ready),
                         self.o.payload.byte.eq(self.i.payload.data),
                         self.o.payload.last.eq(self.i.payload.last)]
            return m
        held = Signal.like(self.i.payload)
        have = Signal()
        index = Signal(range(self._width))
        final = index + 1 >= held.keep
        m.d.comb += [
            self.o.valid.eq(have),
            self.o.payload.byte.eq(held.data.word_select(index, 8)),
            self.o.payload.last.eq(held.last & final),
            self.i.ready.eq(~have | (self.o.ready & final)),
        ]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [held.eq(self.i.payload), have.eq(1), index.eq(0)]
        with m.Elif(self.o.valid & self.o.ready):
            m.d.sync += index.eq(index + 1)
            with m.If(final):
                m.d.sync += have.eq(0)
        return m
