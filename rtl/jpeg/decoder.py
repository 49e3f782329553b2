"""``cores`` decoder cores behind one input and one output: files dealt round-robin.

File n goes to core n mod cores; the output is collected in the same order, a whole packet
from each core in turn, so results leave in submission order (and carry their tags).  While
one core decodes, the next files are already on their way to the others, so a batch of
similar files runs ``cores`` times as fast as one core.  A single file larger than the rest
holds back only the output order, not the other cores' decoding (they finish and wait).
"""

from amaranth import Module, Signal
from amaranth.lib import wiring, stream
from amaranth.lib.wiring import In, Out

from .core import JpegCore
from .packets import input_layout, output_layout

__all__ = ["JpegDecoder"]


class JpegDecoder(wiring.Component):
    def __init__(self, cores=1, max_width=4096, max_height=65535, input_bytes=1, tag_bits=8):
        if cores < 1:
            self._MustUse__silence = True
            raise ValueError(f"cores must be at least 1, not {cores}")
        self.cores = [JpegCore(max_width, max_height, input_bytes, tag_bits)
                      for _ in range(cores)]
        self.max_width, self.max_height = max_width, max_height
        self.input_bytes, self.tag_bits = input_bytes, tag_bits
        super().__init__({
            "i": In(stream.Signature(input_layout(input_bytes, tag_bits))),
            "o": Out(stream.Signature(output_layout(tag_bits))),
            "busy": Out(len(self.cores)),
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

        send = Signal(range(n))             # the core the current input file goes to
        take = Signal(range(n))             # the core whose output packet is next
        for k, core in enumerate(self.cores):
            m.d.comb += [core.i.payload.eq(self.i.payload),
                         core.i.valid.eq(self.i.valid & (send == k)),
                         self.busy[k].eq(core.busy)]
            with m.If(send == k):
                m.d.comb += self.i.ready.eq(core.i.ready)
            with m.If(take == k):
                m.d.comb += [self.o.payload.eq(core.o.payload), self.o.valid.eq(core.o.valid),
                             core.o.ready.eq(self.o.ready)]
        with m.If(self.i.valid & self.i.ready & self.i.payload.last):
            with m.If(send == n - 1):
                m.d.sync += send.eq(0)
            with m.Else():
                m.d.sync += send.eq(send + 1)
        with m.If(self.o.valid & self.o.ready & self.o.payload.last):
            with m.If(take == n - 1):
                m.d.sync += take.eq(0)
            with m.Else():
                m.d.sync += take.eq(take + 1)
        m.d.comb += [self.images.eq(sum(c.images for c in self.cores)),
                     self.errors.eq(sum(c.errors for c in self.cores))]
        return m
