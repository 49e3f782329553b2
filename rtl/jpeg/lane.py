"""One decoder lane: a core's input FIFO, filled a link beat (W bytes) a clock and emptied
into the core's own beats, then the core.  The accelerator top carries one lane per core
behind its link, and :class:`~dlforge.rtl.jpeg.decoder.JpegDecoder` (``dlforge gen jpeg``,
the core tests) is the same lanes behind a plain stream: so what the tests exercise is what
the board ships.
"""

from types import SimpleNamespace

from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..small_ram import SmallRamFifo
from ..stream_pipe import PipeStage
from ..link.protocol import TAG_BITS
from .core import JpegCore
from .core_pair import JOBS, JpegCorePair
from .limits import DEFAULT_MAX_HEIGHT, DEFAULT_MAX_WIDTH
from .packets import input_layout, output_layout

__all__ = ["DecoderLane", "DecoderLanePair", "CoreFeed", "lane_entry"]


def lane_entry(w, tag_bits=TAG_BITS):
    """A lane's input beat: up to ``w`` bytes of one file (``bytes`` of them valid), its
    flags from the request's status byte, and its tag."""
    return data.StructLayout({"data": 8 * w, "bytes": range(w + 1), "last": 1, "fast": 1,
                              "resize": 1, "scale": 1, "tag": tag_bits})


class CoreFeed(wiring.Component):
    """One core's input: W-byte link beats queued (a W-wide FIFO, filled at link speed),
    then taken apart into the core's 4-byte beats (W = 1: the core's byte beats).

    The beats leave through a register: with the FIFO in block RAM, its read (5.6 ns
    clock-to-out on the ECP5) straight into the marker parser was the core's critical path
    (issue 20, both seeds).  One clock more per file, the same rate.
    """

    def __init__(self, link_bytes, depth, resize=False, scaling=False, tag_bits=TAG_BITS,
                 small_ram="block"):
        self.link_bytes, self.depth, self.resize = link_bytes, depth, resize
        self.small_ram = small_ram          # where the FIFO goes (dlforge.rtl.small_ram)
        self.scaling, self.tag_bits = scaling, tag_bits
        self.core_bytes = 1 if link_bytes == 1 else 4
        super().__init__({"i": In(stream.Signature(lane_entry(link_bytes, tag_bits))),
                          "o": Out(stream.Signature(input_layout(self.core_bytes, tag_bits,
                                                                 resize=resize,
                                                                 scaling=scaling)))})

    def elaborate(self, platform):
        m = Module()
        w, cb = self.link_bytes, self.core_bytes
        entry = lane_entry(w, self.tag_bits)
        m.submodules.fifo = fifo = SmallRamFifo(width=entry.size, depth=self.depth,
                                                small_ram=self.small_ram)
        m.d.comb += [fifo.w_data.eq(self.i.payload), fifo.w_en.eq(self.i.valid),
                     self.i.ready.eq(fifo.w_rdy)]
        head = entry(fifo.r_data)
        pieces = w // cb
        k = Signal(range(max(pieces, 2)))
        taken = Signal(range(w + 1))           # bytes of the head before piece k
        m.d.comb += taken.eq(k * cb)
        remaining = head.bytes - taken
        final = remaining <= cb
        layout = self.o.payload.shape()
        m.submodules.out = stage = PipeStage(layout, layout)
        wiring.connect(m, stage.o, wiring.flipped(self.o))
        out = stage.i.payload
        m.d.comb += [stage.i.valid.eq(fifo.r_rdy),
                     out.data.eq(head.data.word_select(k, 8 * cb) if pieces > 1 else head.data),
                     out.keep.eq(Mux(final, remaining, cb)),
                     out.last.eq(head.last & final), out.fast.eq(head.fast),
                     out.tag.eq(head.tag)]
        if self.resize:
            m.d.comb += out.resize.eq(head.resize)
        if self.scaling:
            m.d.comb += out.scale.eq(head.scale)
        with m.If(stage.i.valid & stage.i.ready):
            m.d.sync += k.eq(k + 1)
            with m.If(final):
                m.d.comb += fifo.r_en.eq(1)
                m.d.sync += k.eq(0)
        return m


class DecoderLane(wiring.Component):
    """A core and its feed (:class:`CoreFeed`): the unit the top and the standalone decoder
    both repeat per core.  ``feed`` and ``core`` stay reachable for their counters; the
    caller resets the lane as a whole."""

    def __init__(self, link_bytes=1, fifo_depth=64, max_width=DEFAULT_MAX_WIDTH,
                 max_height=DEFAULT_MAX_HEIGHT, tag_bits=TAG_BITS, resample_taps=0,
                 resample_max=None, resample_lanes=None, scaling=False, small_ram="block"):
        self.feed = CoreFeed(link_bytes, fifo_depth, resize=bool(resample_taps),
                             scaling=scaling, tag_bits=tag_bits, small_ram=small_ram)
        options = {"resample_taps": resample_taps, "scaling": scaling, "small_ram": small_ram}
        if resample_max is not None:
            options["resample_max"] = resample_max
        if resample_lanes is not None:
            options["resample_lanes"] = resample_lanes
        self.core = JpegCore(max_width, max_height, self.feed.core_bytes, tag_bits, **options)
        super().__init__({"i": In(stream.Signature(lane_entry(link_bytes, tag_bits))),
                          "o": Out(stream.Signature(output_layout(tag_bits)))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.feed = self.feed
        m.submodules.core = self.core
        wiring.connect(m, wiring.flipped(self.i), self.feed.i)
        wiring.connect(m, self.feed.o, self.core.i)
        wiring.connect(m, self.core.o, wiring.flipped(self.o))
        return m


class DecoderLanePair(wiring.Component):
    """Two lanes (a feed each) in front of one core pair
    (:class:`~.core_pair.JpegCorePair`): to its owner, two lanes (``lanes``, each with
    ``i``, ``o``, ``feed`` and ``core`` as a DecoderLane has them) at half a core's rate each.
    Takes DecoderLane's parameters; the owner resets the pair as a whole."""

    def __init__(self, link_bytes=1, fifo_depth=64, max_width=DEFAULT_MAX_WIDTH,
                 max_height=DEFAULT_MAX_HEIGHT, tag_bits=TAG_BITS, resample_taps=0,
                 resample_max=None, resample_lanes=None, scaling=False, small_ram="block"):
        self.feeds = [CoreFeed(link_bytes, fifo_depth, resize=bool(resample_taps),
                               scaling=scaling, tag_bits=tag_bits, small_ram=small_ram)
                      for _ in range(JOBS)]
        options = {"resample_taps": resample_taps, "scaling": scaling, "small_ram": small_ram}
        if resample_max is not None:
            options["resample_max"] = resample_max
        if resample_lanes is not None:
            options["resample_lanes"] = resample_lanes
        self.pair = JpegCorePair(max_width, max_height, self.feeds[0].core_bytes, tag_bits,
                                 **options)
        members = {}
        for j in range(JOBS):
            members.update({f"i{j}": In(stream.Signature(lane_entry(link_bytes, tag_bits))),
                            f"o{j}": Out(stream.Signature(output_layout(tag_bits)))})
        super().__init__(members)
        self.lanes = [SimpleNamespace(i=getattr(self, f"i{j}"), o=getattr(self, f"o{j}"),
                                      feed=self.feeds[j], core=self.pair.job(j))
                      for j in range(JOBS)]

    def elaborate(self, platform):
        m = Module()
        m.submodules.pair = self.pair
        for j, lane in enumerate(self.lanes):
            m.submodules[f"feed{j}"] = lane.feed
            wiring.connect(m, wiring.flipped(lane.i), lane.feed.i)
            wiring.connect(m, lane.feed.o, lane.core.i)
            wiring.connect(m, lane.core.o, wiring.flipped(lane.o))
        return m
