"""Two scans at once in one entropy decoder: the unstuffer and the Huffman decoder C-slowed by
two (:mod:`dlforge.rtl.cslow`), each scan served on alternate clocks.

Why: the Huffman decoder's symbol loop sets the core's clock on an ECP5 and cannot be
pipelined within one scan (each symbol's start is the last one's end).  Two independent
scans make every register a pair, so the loop's path can be cut in two
(``HuffmanDecoder(contexts=2)`` moves one register of the bit window's pair into the middle
of the loop): together they still resolve one symbol per clock, each at half that.

Ports: one set per scan *job* (``i0``/``i1``, ``dht0``/``dht1``, ``scan0``/``scan1``,
``coef0``/``coef1``, ``done0``/``done1``, ``busy``, ``symbols_decoded``), each with the
meaning it has on :class:`~.entropy_decoder.EntropyDecoder`.  A job's inputs are taken on its
own clocks only; its outputs leave through a register of their own, so each output stream
keeps ``valid`` until it is taken.  Each job has its own tables: the two scans may come from
different files with different tables, sizes and layouts, and neither waits for the other.
"""

from types import SimpleNamespace

from amaranth import Module, Signal
from amaranth.lib import wiring, stream
from amaranth.lib.wiring import In, Out

from ..cslow import JOBS, c_slow, job_inputs, job_outputs, toggle
from .entropy_decoder import EntropyDecoder
from .huffman_decoder import CoefficientLayout, DhtLayout, DoneLayout, ScanLayout
from .unstuff import ByteLayout

__all__ = ["EntropyDecoderPair", "JOBS"]


class EntropyDecoderPair(wiring.Component):
    """Two :class:`~.entropy_decoder.EntropyDecoder` jobs in one C-slowed circuit."""

    def __init__(self, small_ram="block"):
        self.small_ram = small_ram
        members = {}
        for j in range(JOBS):
            members.update({
                f"i{j}": In(stream.Signature(ByteLayout)),
                f"dht{j}": In(stream.Signature(DhtLayout)),
                f"scan{j}": In(stream.Signature(ScanLayout)),
                f"coef{j}": Out(stream.Signature(CoefficientLayout)),
                f"done{j}": Out(stream.Signature(DoneLayout)),
            })
        members["busy"] = Out(JOBS)
        members["symbols_decoded"] = Out(32).array(JOBS)
        super().__init__(members)

    def job(self, j):
        """Job ``j``'s ports, named as on an EntropyDecoder (for testbenches)."""
        return SimpleNamespace(i=getattr(self, f"i{j}"), dht=getattr(self, f"dht{j}"),
                               scan=getattr(self, f"scan{j}"), coef=getattr(self, f"coef{j}"),
                               done=getattr(self, f"done{j}"), busy=self.busy[j],
                               symbols_decoded=self.symbols_decoded[j])

    def elaborate(self, platform):
        m = Module()
        inner = EntropyDecoder(self.small_ram, contexts=JOBS)
        ctx = Signal()
        m.submodules.jobs = c_slow(inner, ctx, **inner.c_slowing())
        toggle(m, ctx)
        jobs = [self.job(j) for j in range(JOBS)]
        for name in ("i", "dht", "scan"):
            job_inputs(m, ctx, getattr(inner, name), [getattr(job, name) for job in jobs])
        coefs = [job.coef for job in jobs]
        job_outputs(m, ctx, inner.coef, coefs)
        # (the decoder sends its verdict once its coefficients are taken: so here too)
        job_outputs(m, ctx, inner.done, [job.done for job in jobs], afters=coefs)
        for j in range(JOBS):
            with m.If(ctx == j):
                m.d.sync += [self.busy[j].eq(inner.busy),
                             self.symbols_decoded[j].eq(inner.symbols_decoded)]
        return m
