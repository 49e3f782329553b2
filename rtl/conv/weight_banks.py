"""The weight memory: one bank per PE, two halves each, read with the array's column skew.

Channel ``ch`` belongs to PE ``(ch % rows, ch // rows)`` (see pe_array).  The loader writes
one link word per clock: ``V = link_bytes // vector_bytes`` vectors for channels ``ch0`` to
``ch0 + V - 1`` of weight word ``k`` (``ch0`` a multiple of ``V``), so bank ``ch`` always
takes vector ``ch % V`` of the word and only the enable is decoded.  Reads take one address
per clock for column 0; column ``c`` reads it ``c`` clocks later (one address register per
column instead of ``rows * simd`` operand registers), and data come one clock after the
address, in step with the input vector as it crosses the array.
"""

from amaranth import Module, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .config import EngineConfig

__all__ = ["WeightBanks"]


class WeightBanks(wiring.Component):
    """The engine's weight store: a bank per PE so that every PE gets its own weight vector each
    clock, in two halves so that the next tile's weights load while this one computes."""

    def __init__(self, cfg=EngineConfig()):
        self.cfg = cfg
        vector = data.ArrayLayout(signed(cfg.operand_bits), cfg.simd)
        self.per_word = cfg.link_bytes // cfg.vector_bytes
        super().__init__({
            "w_en": In(1),
            "w_half": In(1),
            "w_k": In(range(cfg.weight_depth)),
            "w_channel": In(range(cfg.channels + self.per_word)),   # first channel of the word
            "w_data": In(8 * cfg.link_bytes),
            "r_half": In(1),
            "r_k": In(range(cfg.weight_depth)),
            # w[c][r]: PE (r, c)'s vector for the element now entering column c
            "w": Out(data.ArrayLayout(data.ArrayLayout(vector, cfg.rows), cfg.cols)),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        vbits = 8 * cfg.vector_bytes
        addr_bits = (cfg.weight_depth - 1).bit_length() or 1
        # The read address of each column: column c's is column 0's, c clocks later.
        addrs = [Signal(addr_bits + 1, name=f"raddr_c{c}") for c in range(cfg.cols)]
        m.d.comb += addrs[0].eq(self.r_k | (self.r_half << addr_bits))
        for c in range(1, cfg.cols):
            m.d.sync += addrs[c].eq(addrs[c - 1])
        word_index = self.w_channel >> (self.per_word.bit_length() - 1)   # per_word: a power of 2
        for ch in range(cfg.channels):
            r, c = ch % cfg.rows, ch // cfg.rows
            bank = Memory(shape=vbits, depth=2 << addr_bits, init=[])
            m.submodules[f"bank{ch}"] = bank
            wp = bank.write_port()
            rp = bank.read_port()
            lane = ch % self.per_word
            m.d.comb += [
                wp.addr.eq(self.w_k | (self.w_half << addr_bits)),
                wp.data.eq(self.w_data[lane * vbits:(lane + 1) * vbits]),
                wp.en.eq(self.w_en & (word_index == ch // self.per_word)),
                rp.addr.eq(addrs[c]),
                self.w[c][r].as_value().eq(rp.data),
            ]
        return m
