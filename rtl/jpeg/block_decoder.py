"""A JPEG scan to 8x8 sample blocks: entropy decoder -> coefficient buffer -> IDCT.

The part of the decoder core that turns the bytes after SOS into decoded blocks of every
component, in scan order; upsampling, colour conversion and raster output come after it,
the marker parser before it.  With ``reduced`` the IDCT also has libjpeg-turbo's reduced
sizes (a scaled decode): ``sizes`` says which blocks of an MCU get which size, and a block of
size s comes out as s rows.
"""

from amaranth import Module, unsigned
from amaranth.lib import wiring, stream, data
from amaranth.lib.wiring import In, Out

from ..small_ram import check_small_ram

from .coefficient_buffer import CoefficientBuffer, DqtLayout
from .entropy_decoder import EntropyDecoder
from .huffman_decoder import DhtLayout, DoneLayout, MAX_COMPONENTS, ScanLayout
from .idct import Idct
from .scaling import McuSizesLayout
from .unstuff import ByteLayout

__all__ = ["BlockDecoder"]


class BlockDecoder(wiring.Component):
    """The scan-decoding half of a JPEG core as one component, so that the core can reset it
    between files and it can be generated and tested on its own (``dlforge gen blocks``).
    ``small_ram``: its FIFOs, small tables and the IDCT's corner turns in "block" RAM (the
    default) or "lut" RAM (:mod:`dlforge.rtl.small_ram`)."""

    def __init__(self, samples_per_clock=8, reduced=False, small_ram="block", contexts=1):
        if check_small_ram(small_ram):
            self._MustUse__silence = True
            raise ValueError(check_small_ram(small_ram))
        self.samples_per_clock = samples_per_clock
        self.reduced = reduced
        self.small_ram = small_ram
        # contexts: 2 in a C-slowed core pair (rtl/jpeg/core_pair.py), see EntropyDecoder
        self.entropy = EntropyDecoder(small_ram, contexts)
        ports = {
            "i": In(stream.Signature(ByteLayout)),
            "dht": In(stream.Signature(DhtLayout)),
            "dqt": In(stream.Signature(DqtLayout)),
            "quant_select": In(data.ArrayLayout(2, MAX_COMPONENTS)),
            "scan": In(stream.Signature(ScanLayout)),
            "o": Out(stream.Signature(data.ArrayLayout(unsigned(8), samples_per_clock))),
            "done": Out(stream.Signature(DoneLayout)),
            "table_error": Out(1),
            "symbols_decoded": Out(32),
        }
        if reduced:
            ports["sizes"] = In(McuSizesLayout)
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        m.submodules.entropy = entropy = self.entropy
        m.submodules.buffer = buffer = CoefficientBuffer(self.samples_per_clock,
                                                        small_ram=self.small_ram)
        m.submodules.idct = idct = Idct(self.samples_per_clock, reduced=self.reduced,
                                        small_ram=self.small_ram)
        if self.reduced:
            m.d.comb += idct.sizes.eq(self.sizes)
        for name in ("i", "dht", "scan"):
            wiring.connect(m, wiring.flipped(getattr(self, name)), getattr(entropy, name))
        wiring.connect(m, wiring.flipped(self.dqt), buffer.dqt)
        wiring.connect(m, entropy.coef, buffer.i)
        wiring.connect(m, buffer.o, idct.i)
        wiring.connect(m, idct.o, wiring.flipped(self.o))
        wiring.connect(m, entropy.done, wiring.flipped(self.done))
        m.d.comb += [buffer.quant_select.eq(self.quant_select),
                     self.table_error.eq(buffer.table_error),
                     self.symbols_decoded.eq(entropy.symbols_decoded)]
        return m
