"""``cores`` decoder cores behind one input and one output: the standalone decoder of
``dlforge gen jpeg`` and of the core tests, built of the accelerator top's own lanes
(:class:`~dlforge.rtl.jpeg.lane.DecoderLane`: a core's input FIFO, then the core), so that
the tests exercise what the board carries.  Only the output differs: the top frames each
core's results itself (a replier per lane), here one stream merges them.

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

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring, stream
from amaranth.lib.wiring import In, Out

from .lane import DecoderLane, DecoderLanePair
from .limits import DEFAULT_MAX_HEIGHT, DEFAULT_MAX_WIDTH
from .packets import input_layout, output_layout

__all__ = ["JpegDecoder"]


class JpegDecoder(wiring.Component):
    """The decoder as a block of its own (no link): for a design that feeds the cores from
    its own stream, and the unit the core tests and `dlforge bench jpeg` drive directly."""

    def __init__(self, cores=1, max_width=DEFAULT_MAX_WIDTH, max_height=DEFAULT_MAX_HEIGHT,
                 input_bytes=1, tag_bits=8, input_fifo_depth=64, small_ram="block",
                 contexts=1):
        # contexts: files per core; 2 makes each core a C-slowed pair (JpegCorePair) that
        # the decoder sees as two lanes, so ``dest`` names one of cores * contexts lanes
        problem = (f"cores must be at least 1, not {cores}" if cores < 1 else
                   None if contexts in (1, 2) else f"contexts must be 1 or 2, not {contexts!r}")
        if problem:
            self._MustUse__silence = True
            raise ValueError(problem)
        # the board's lanes (input FIFO, then the core), as the accelerator top has them
        unit = DecoderLane if contexts == 1 else DecoderLanePair
        self.units = [unit(input_bytes, input_fifo_depth, max_width, max_height, tag_bits,
                           small_ram=small_ram)
                      for _ in range(cores)]
        self.lanes = (list(self.units) if contexts == 1
                      else [lane for u in self.units for lane in u.lanes])
        self.cores = [lane.core for lane in self.lanes]
        self.contexts = contexts
        cores = len(self.lanes)
        self.max_width, self.max_height = max_width, max_height
        self.input_bytes, self.tag_bits = input_bytes, tag_bits
        self.input_fifo_depth = input_fifo_depth
        self.small_ram = small_ram
        super().__init__({
            "i": In(stream.Signature(input_layout(input_bytes, tag_bits, cores))),
            "o": Out(stream.Signature(output_layout(tag_bits))),
            "busy": Out(cores),
            "images": Out(32),
            "errors": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        n = len(self.lanes)
        for k, unit in enumerate(self.units):
            m.submodules[f"core{k}"] = unit
        for k, lane in enumerate(self.lanes):
            beat = lane.i.payload
            m.d.comb += [beat.data.eq(self.i.payload.data), beat.bytes.eq(self.i.payload.keep),
                         beat.last.eq(self.i.payload.last), beat.fast.eq(self.i.payload.fast),
                         beat.tag.eq(self.i.payload.tag), self.busy[k].eq(lane.core.busy)]
            # A dest beyond the last core goes to the last core rather than nowhere.
            if n == 1:
                routed_here = Const(1)
            else:
                routed_here = ((self.i.payload.dest == k) if k < n - 1
                               else (self.i.payload.dest >= k))
            m.d.comb += lane.i.valid.eq(self.i.valid & routed_here)
            with m.If(routed_here):
                m.d.comb += self.i.ready.eq(lane.i.ready)
        if n == 1:
            wiring.connect(m, self.lanes[0].o, wiring.flipped(self.o))
        else:
            self._merge_outputs(m, self.lanes)
        m.d.comb += [self.images.eq(sum(lane.core.images for lane in self.lanes)),
                     self.errors.eq(sum(lane.core.errors for lane in self.lanes))]
        return m

    def _merge_outputs(self, m, cores):
        """Round robin among the lanes with a beat to give; a beat offered stays offered."""
        n = len(cores)
        after = Signal(range(n))            # round-robin: the core after the last one served
        pending = Signal(n)
        chosen = Signal(range(n))
        m.d.comb += pending.eq(Cat(core.o.valid for core in cores))
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
        for k, core in enumerate(cores):
            with m.If(serving == k):
                m.d.comb += [self.o.payload.eq(core.o.payload), core.o.ready.eq(self.o.ready)]
        m.d.comb += self.o.valid.eq(pending.any())
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += after.eq(Mux(serving == n - 1, 0, serving + 1))
