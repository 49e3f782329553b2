"""CRC generators for the link, ``data_bytes`` bytes a clock: CRC-32 (IEEE, as zlib) and
CRC-16/CCITT-FALSE.

A CRC step is linear over GF(2): the next register is an XOR of bits of the current register
and of the bytes, whatever their number.  The XOR sets are worked out here in Python by running the bitwise
definition on basis vectors, so the gateware is one XOR tree per register bit and has no
table.  The Python definitions live in :mod:`.protocol` (``crc16``/``crc32``), and the tests
check the gateware against them and zlib.
"""

from amaranth import Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["Crc", "CRC32", "CRC16", "crc_of", "xor_tree"]


_TAPS = {}


def xor_tree(terms):
    """The XOR of ``terms`` as a balanced tree (a chain of hundreds nests too deep)."""
    terms = list(terms)
    if not terms:
        return Const(0, 1)
    while len(terms) > 1:
        terms = [terms[k] ^ terms[k + 1] if k + 1 < len(terms) else terms[k]
                 for k in range(0, len(terms), 2)]
    return terms[0]


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

    def steps(self, reg, data, nbytes):
        """``nbytes`` bytes (``data``, first byte lowest) through the register."""
        for k in range(nbytes):
            reg = self.step(reg, data >> 8 * k & 0xFF)
        return reg

    def taps(self, nbytes=1):
        """For each register bit of the next state after ``nbytes`` bytes: (register bits,
        data bits) it XORs."""
        key = (self.width, self.poly, self.reflected, nbytes)
        if key not in _TAPS:
            reg_images = [self.steps(1 << i, 0, nbytes) for i in range(self.width)]
            data_images = [self.steps(0, 1 << i, nbytes) for i in range(8 * nbytes)]
            _TAPS[key] = [([i for i, v in enumerate(reg_images) if v >> bit & 1],
                           [i for i, v in enumerate(data_images) if v >> bit & 1])
                          for bit in range(self.width)]
        return _TAPS[key]

    def of(self, data):
        """The finished CRC of ``data`` (bytes), from the definition."""
        return self.steps(self.init, int.from_bytes(data, "little"), len(data)) ^ self.xor_out


CRC32 = _Spec(32, 0xEDB88320, 0xFFFFFFFF, reflected=True, xor_out=0xFFFFFFFF)
CRC16 = _Spec(16, 0x1021, 0xFFFF, reflected=False, xor_out=0)


class Crc(wiring.Component):
    """``value`` is the CRC of the beats given with ``valid`` since ``clear`` (which starts a
    new message on the same clock's beat when both are set); a beat is ``data_bytes`` bytes,
    the first lowest."""

    def __init__(self, spec=CRC32, data_bytes=1):
        self.spec, self.data_bytes = spec, data_bytes
        super().__init__({"clear": In(1), "valid": In(1), "data": In(8 * data_bytes),
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
        for bit, (regs, data) in enumerate(spec.taps(self.data_bytes)):
            m.d.comb += nxt[bit].eq(xor_tree([current[i] for i in regs]
                                             + [self.data[i] for i in data]))
        with m.If(self.valid):
            m.d.sync += reg.eq(nxt)
        with m.Elif(self.clear):
            m.d.sync += reg.eq(spec.init)
        m.d.comb += self.value.eq(reg ^ spec.xor_out)
        return m


def crc_of(spec, data, nbytes):
    """The finished CRC of ``nbytes`` bytes of the value ``data`` (first byte lowest), as one
    XOR tree per bit from the initial register: for fields at fixed lanes (a header)."""
    bits = []
    for bit, (regs, taps) in enumerate(spec.taps(nbytes)):
        constant = (spec.xor_out >> bit & 1) ^ sum(spec.init >> i & 1 for i in regs) % 2
        bits.append(xor_tree([Const(constant, 1)] + [data[i] for i in taps]))
    return Cat(*bits)
