"""Byte-at-a-time CRC generators for the link: CRC-32 (IEEE, as zlib) and CRC-16/CCITT-FALSE.

A CRC step is linear over GF(2): the next register is an XOR of bits of the current register
and of the byte.  The XOR sets are worked out here in Python by running the bitwise
definition on basis vectors, so the gateware is one XOR tree per register bit and has no
table.  The Python definitions live in :mod:`.protocol` (``crc16``/``crc32``), and the tests
check the gateware against them and zlib.
"""

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["Crc", "CRC32", "CRC16"]


class _Spec:
    def __init__(self, width, poly, init, reflected, xor_out):
        self.width, self.poly, self.init = width, poly, init
        self.reflected, self.xor_out = reflected, xor_out

    def step(self, reg, byte):
        """One byte through the register (no init, no final XOR)."""
        top = 1 << (self.width - 1)
        mask = (1 << self.width) - 1
        if self.reflected:
            reg ^= byte
            for _ in range(8):
                reg = (reg >> 1) ^ self.poly if reg & 1 else reg >> 1
        else:
            reg ^= byte << (self.width - 8)
            for _ in range(8):
                reg = ((reg << 1) ^ self.poly) & mask if reg & top else (reg << 1) & mask
        return reg

    def taps(self):
        """For each register bit of the next state: (register bits, byte bits) it XORs."""
        out = []
        for bit in range(self.width):
            regs = [i for i in range(self.width) if self.step(1 << i, 0) >> bit & 1]
            data = [i for i in range(8) if self.step(0, 1 << i) >> bit & 1]
            out.append((regs, data))
        return out


CRC32 = _Spec(32, 0xEDB88320, 0xFFFFFFFF, reflected=True, xor_out=0xFFFFFFFF)
CRC16 = _Spec(16, 0x1021, 0xFFFF, reflected=False, xor_out=0)


class Crc(wiring.Component):
    """``value`` is the CRC of the bytes given with ``valid`` since ``clear`` (which starts a
    new message on the same clock's byte when both are set)."""

    def __init__(self, spec=CRC32):
        self.spec = spec
        super().__init__({"clear": In(1), "valid": In(1), "data": In(8),
                          "value": Out(spec.width)})

    def elaborate(self, platform):
        spec = self.spec
        m = Module()
        reg = Signal(spec.width, init=spec.init)
        current = Signal(spec.width)
        m.d.comb += current.eq(reg)
        with m.If(self.clear):
            m.d.comb += current.eq(spec.init)
        nxt = Signal(spec.width)
        for bit, (regs, data) in enumerate(spec.taps()):
            term = 0
            for i in regs:
                term = term ^ current[i]
            for i in data:
                term = term ^ self.data[i]
            m.d.comb += nxt[bit].eq(term)
        with m.If(self.valid):
            m.d.sync += reg.eq(nxt)
        with m.Elif(self.clear):
            m.d.sync += reg.eq(spec.init)
        m.d.comb += self.value.eq(reg ^ spec.xor_out)
        return m
