"""``cores`` decoder cores behind one input and one output.

Input beats name their core (``dest``); each core has a small input FIFO, so the sender can
interleave chunks of several files (one per core) and keep every core busy while the link
carries more bytes per clock than one core consumes.  A core decodes a file at its own pace
(about a third of a byte per clock inside a scan), so without interleaving the link would wait
for each file in turn and nothing would run in parallel.

Output beats of different cores interleave (round-robin among the cores that have one), each
beat carrying its file's tag (AXI-Stream's TID): the host sorts beats into images by tag and
puts images back in submission order by tag.  Holding whole packets back instead (submission
order, or one packet at a time) could deadlock an interleaved input: a core whose output
waits stops reading its input, its FIFO fills, and the beats another core still needs are
stuck behind it on the link.
"""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import wiring, stream
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from .core import JpegCore
from .limits import DEFAULT_MAX_HEIGHT, DEFAULT_MAX_WIDTH
from .packets import input_layout, output_layout

__all__ = ["JpegDecoder"]


class JpegDecoder(wiring.Component):
    def __init__(self, cores=1, max_width=DEFAULT_MAX_WIDTH, max_height=DEFAULT_MAX_HEIGHT,
                 input_bytes=1, tag_bits=8, input_fifo_depth=64):
        if cores < 1:
            self._MustUse__silence = True
            raise ValueError(f"cores must be at least 1, not {cores}")
        self.cores = [JpegCore(max_width, max_height, input_bytes, tag_bits)
                      for _ in range(cores)]
        self.max_width, self.max_height = max_width, max_height
        self.input_bytes, self.tag_bits = input_bytes, tag_bits
        self.input_fifo_depth = input_fifo_depth
        super().__init__({
            "i": In(stream.Signature(input_layout(input_bytes, tag_bits, cores))),
            "o": Out(stream.Signature(output_layout(tag_bits))),
            "busy": Out(cores),
            "images": Out(32),
            "errors": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        n = len(self.cores)
        for k, core in enumerate(self.cores):
            m.submodules[f"core{k}"] = core
        if n == 1:
            core, = self.cores
            wiring.connect(m, wiring.flipped(self.i), core.i)
            wiring.connect(m, core.o, wiring.flipped(self.o))
            m.d.comb += [self.busy.eq(core.busy), self.images.eq(core.images),
                         self.errors.eq(core.errors)]
            return m

        core_layout = input_layout(self.input_bytes, self.tag_bits)
        after = Signal(range(n))            # round-robin: the core after the last one served
        for k, core in enumerate(self.cores):
            fifo = SyncFIFOBuffered(width=core_layout.size, depth=self.input_fifo_depth)
            m.submodules[f"fifo{k}"] = fifo
            beat = core_layout(fifo.w_data)
            for name, _ in core_layout:
                m.d.comb += beat[name].eq(self.i.payload[name])
            # A dest beyond the last core goes to the last core rather than nowhere.
            routed_here = (self.i.payload.dest == k) if k < n - 1 else (self.i.payload.dest >= k)
            m.d.comb += [fifo.w_en.eq(self.i.valid & routed_here),
                         core.i.payload.eq(fifo.r_data), core.i.valid.eq(fifo.r_rdy),
                         fifo.r_en.eq(core.i.ready),
                         self.busy[k].eq(core.busy)]
            with m.If(routed_here):
                m.d.comb += self.i.ready.eq(fifo.w_rdy)
        pending = Signal(n)
        chosen = Signal(range(n))
        m.d.comb += pending.eq(Cat(core.o.valid for core in self.cores))
        for offset in reversed(range(n)):       # the first pending core from `after` wins
            candidate = Signal(range(n), name=f"candidate{offset}")
            m.d.comb += candidate.eq(Mux(after + offset >= n, after + offset - n, after + offset))
            with m.If(pending.bit_select(candidate, 1)):
                m.d.comb += chosen.eq(candidate)
        # A beat offered and not yet taken stays offered: the choice holds until it is taken.
        held = Signal()
        held_core = Signal(range(n))
        serving = Signal(range(n))
        m.d.comb += serving.eq(Mux(held, held_core, chosen))
        m.d.sync += [held.eq(self.o.valid & ~self.o.ready), held_core.eq(serving)]
        for k, core in enumerate(self.cores):
            with m.If(serving == k):
                m.d.comb += [self.o.payload.eq(core.o.payload), core.o.ready.eq(self.o.ready)]
        m.d.comb += self.o.valid.eq(pending.any())
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += after.eq(Mux(serving == n - 1, 0, serving + 1))
        m.d.comb += [self.images.eq(sum(c.images for c in self.cores)),
                     self.errors.eq(sum(c.errors for c in self.cores))]
        return m
