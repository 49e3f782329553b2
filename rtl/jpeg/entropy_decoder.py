"""The entropy-decoding stage of the JPEG pipeline: the unstuffer feeding the Huffman decoder.

Ports: ``i`` (the scan's bytes as they follow the SOS header, ``last`` on the packet's final
byte), ``dht`` (DHT segment bodies), ``scan`` (one configuration beat per scan), ``coef``
(coefficient beats) and ``done`` (status and the marker that ended the scan).
"""

from amaranth import Module, ResetInserter
from amaranth.lib import wiring, stream
from amaranth.lib.wiring import In, Out

from .huffman_decoder import CoefficientLayout, DhtLayout, DoneLayout, HuffmanDecoder, ScanLayout
from ..stream_pipe import SkidBuffer
from .unstuff import ByteLayout, TokenLayout, Unstuffer

__all__ = ["EntropyDecoder"]


class EntropyDecoder(wiring.Component):
    """The scan's bytes as they come (stuffing and restart markers included) in, coefficients
    out: the unstuffer and the Huffman decoder as one block, for the block decoder and for
    generating and testing them together (``dlforge gen entropy``)."""

    i: In(stream.Signature(ByteLayout))
    dht: In(stream.Signature(DhtLayout))
    scan: In(stream.Signature(ScanLayout))
    coef: Out(stream.Signature(CoefficientLayout))
    done: Out(stream.Signature(DoneLayout))
    symbols_decoded: Out(32)
    busy: Out(1)                  # a scan is being decoded

    def __init__(self, small_ram="block", contexts=1):
        self.small_ram = small_ram                  # the Huffman decoder's (see HuffmanDecoder)
        self.huffman = HuffmanDecoder(small_ram, contexts)
        super().__init__()

    def c_slowing(self):
        """What C-slowing needs to know (see HuffmanDecoder.c_slowing)."""
        return self.huffman.c_slowing()

    def elaborate(self, platform):
        m = Module()
        m.submodules.unstuff = unstuff = Unstuffer()
        m.submodules.huffman = huffman = self.huffman
        # Tokens through a skid buffer: the decoder's ``ready`` (its refill, late in its
        # clock) would otherwise run on through the unstuffer into the marker parser's state
        # (19 LUT levels: the C-slowed core's critical path).  The unstuffer stops by itself
        # at the scan's END or EOF token, so reading ahead takes no byte the parser needs.
        skid = SkidBuffer(TokenLayout)
        m.submodules.tokens = ResetInserter(unstuff.restart)(skid)
        wiring.connect(m, wiring.flipped(self.i), unstuff.i)
        wiring.connect(m, unstuff.o, skid.i)
        wiring.connect(m, skid.o, huffman.tokens)
        wiring.connect(m, wiring.flipped(self.dht), huffman.dht)
        wiring.connect(m, wiring.flipped(self.scan), huffman.scan)
        wiring.connect(m, huffman.coef, wiring.flipped(self.coef))
        wiring.connect(m, huffman.done, wiring.flipped(self.done))
        # A new scan starts the unstuffer afresh.
        m.d.comb += [unstuff.restart.eq(self.scan.valid & self.scan.ready),
                     self.symbols_decoded.eq(huffman.symbols_decoded),
                     self.busy.eq(huffman.busy)]
        return m
