"""Two files at once in one JPEG decoder core: the whole core C-slowed by two
(:mod:`dlforge.rtl.cslow`), each file (*job*) served on alternate clocks.

Why: the core's clock on an ECP5 is set by the Huffman decoder's symbol loop, which cannot
be pipelined within one file.  With two files in one core every register is a pair, and the
loop's pairs are placed by the decoder itself (``HuffmanDecoder(contexts=2)``): the lookup
in one clock, the shift and the scan position in the next.  Each job then runs at half the
core's rate per clock, both together at the rate one file had, at a higher clock.

Every stage's state exists twice (its registers, and its memories with the job as their
lowest address bit: the raster's line memories take twice the block RAM); its logic (the
comparators, the IDCT's multipliers, the colour conversion) exists once.  To the outside a
pair is two cores: :meth:`JpegCorePair.job` gives each job's ports under a core's names
(``i``, ``o``, ``busy``, ``images``, ``errors``).  A job's input is taken on its own clocks
only; its output leaves through a register of its own, so a stalled job does not stop the
other.  The jobs share nothing a file could leave behind: each file is decoded, checked and
flushed as in a core of its own.
"""

from types import SimpleNamespace

from amaranth import Module, Signal
from amaranth.lib import wiring, stream
from amaranth.lib.wiring import In, Out

from ..cslow import JOBS, c_slow, job_inputs, job_outputs, toggle
from ..stream_pipe import SkidBuffer
from .core import JpegCore

__all__ = ["JpegCorePair", "JOBS"]


class JpegCorePair(wiring.Component):
    """Two :class:`~.core.JpegCore` jobs in one C-slowed circuit; takes JpegCore's
    parameters."""

    def __init__(self, *args, **kwargs):
        self.inner = JpegCore(*args, contexts=JOBS, **kwargs)
        for name in ("max_width", "max_height", "input_bytes", "tag_bits", "resample_taps",
                     "resample_max", "resample_lanes", "scaling", "small_ram"):
            setattr(self, name, getattr(self.inner, name))
        members = {}
        for j in range(JOBS):
            members.update({f"i{j}": In(self.inner.i.signature.flip()),
                            f"o{j}": Out(self.inner.o.signature),
                            f"busy{j}": Out(1), f"images{j}": Out(32), f"errors{j}": Out(32)})
        super().__init__(members)

    def job(self, j):
        """Job ``j``'s ports, named as a JpegCore's."""
        return SimpleNamespace(**{name: getattr(self, f"{name}{j}")
                                  for name in ("i", "o", "busy", "images", "errors")})

    def elaborate(self, platform):
        m = Module()
        inner = self.inner
        ctx = Signal()
        m.submodules.jobs = c_slow(inner, ctx, **inner.c_slowing())
        toggle(m, ctx)
        ports = [self.job(j) for j in range(JOBS)]
        # Each job's input through a skid buffer: its ``ready`` is a register, so the core's
        # input ``ready`` (the marker parser's, which in a scan is the entropy decoder's)
        # stops there instead of running on to the read enable of the feed's block RAM
        # (the end of the two-file core's critical path in one of three placements).
        skids = []
        for j, port in enumerate(ports):
            skid = m.submodules[f"input_skid{j}"] = SkidBuffer(port.i.payload.shape())
            wiring.connect(m, wiring.flipped(port.i), skid.i)
            skids.append(skid.o)
        job_inputs(m, ctx, inner.i, skids)
        job_outputs(m, ctx, inner.o, [port.o for port in ports])
        for j, port in enumerate(ports):
            with m.If(ctx == j):
                m.d.sync += [port.busy.eq(inner.busy), port.images.eq(inner.images),
                             port.errors.eq(inner.errors)]
        return m

