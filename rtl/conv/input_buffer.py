"""The input buffer: two halves of ``input_depth`` operand vectors, so that the loader fills
one half while the array reads the other.

The loader writes a whole link word per clock, ``V = link_bytes // vector_bytes`` vectors;
the walker reads one vector per clock at any address.  The buffer is therefore ``V`` banks
(vector ``a`` in bank ``a % V`` at row ``a // V``): a word's vectors land in ``V`` different
banks at one row, and each bank is an ordinary one-write, one-read memory.  ``V`` is a power
of two (``link_bytes`` is one and a multiple of ``vector_bytes``), so bank and row are bit
fields of the address.  A read returns its vector one clock after the address, all zeros when
``r_pad`` was set with it; reads and writes of the same location in the same clock return the
old vector (the halves keep reads and writes apart).
"""

from amaranth import Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .config import EngineConfig

__all__ = ["InputBuffer", "vector_layout"]


def vector_layout(cfg):
    return data.ArrayLayout(signed(cfg.operand_bits), cfg.simd)


class InputBuffer(wiring.Component):
    """The engine's store of input operands: double-buffered so that the loader writes the next
    tile's inputs while the array reads this one's, and banked so that a whole link word goes in
    each clock while the walker reads any one vector."""

    def __init__(self, cfg=EngineConfig()):
        self.cfg = cfg
        self.vectors_per_word = cfg.link_bytes // cfg.vector_bytes
        assert self.vectors_per_word & (self.vectors_per_word - 1) == 0
        self.bank_depth = -(-cfg.input_depth // self.vectors_per_word)   # rows per half
        super().__init__({
            "w_en": In(1),
            "w_half": In(1),
            "w_addr": In(range(self.bank_depth)),     # link word in the half: vectors w_addr * V..
            "w_data": In(8 * cfg.link_bytes),
            "r_en": In(1, init=1),                    # low: r_data holds
            "r_half": In(1),
            "r_addr": In(range(cfg.input_depth)),     # vector in the half
            "r_pad": In(1),
            "r_data": Out(vector_layout(cfg)),        # one clock after r_addr
        })

    def _row(self, half, row):
        """A half's row in a bank: a bit field when the bank depth is a power of two."""
        depth = self.bank_depth
        if depth & (depth - 1) == 0:
            return row | (half << (depth.bit_length() - 1))
        return row + Mux(half, depth, 0)

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        banks = self.vectors_per_word
        bank_bits = banks.bit_length() - 1
        vector_bits = 8 * cfg.vector_bytes

        r_bank = self.r_addr[:bank_bits]
        r_row = self.r_addr[bank_bits:]
        bank_read = Signal(range(banks))               # the bank read last, and its pad
        pad_read = Signal()
        with m.If(self.r_en):
            m.d.sync += [bank_read.eq(r_bank), pad_read.eq(self.r_pad)]

        outputs = []
        for b in range(banks):
            memory = Memory(shape=vector_bits, depth=2 * self.bank_depth, init=[])
            m.submodules[f"bank{b}"] = memory
            wp = memory.write_port()
            rp = memory.read_port()
            m.d.comb += [
                wp.en.eq(self.w_en),
                wp.addr.eq(self._row(self.w_half, self.w_addr)),
                wp.data.eq(self.w_data[b * vector_bits:(b + 1) * vector_bits]),
                rp.en.eq(self.r_en),
                rp.addr.eq(self._row(self.r_half, r_row)),
            ]
            outputs.append(rp.data)

        # The bank's vector, or zeros: one AND-OR mux.
        selected = 0
        for b, vector in enumerate(outputs):
            take = ~pad_read & (bank_read == b)
            selected = selected | (take.replicate(vector_bits) & vector)
        m.d.comb += self.r_data.eq(selected)
        return m
