"""The CRC gateware equals zlib's CRC-32 and the protocol's CRC-16 on random messages."""

import random
import zlib

import pytest
from amaranth.sim import Simulator

from dlforge.rtl.link.crc import CRC16, CRC32, Crc
from dlforge.rtl.link.protocol import crc16


def test_crc16_reference_check_value():
    assert crc16(b"123456789") == 0x29B1              # CRC-16/CCITT-FALSE's check value


@pytest.mark.parametrize("spec, reference", [(CRC32, lambda d: zlib.crc32(d) & 0xFFFFFFFF),
                                             (CRC16, crc16)], ids=["crc32", "crc16"])
def test_gateware_equals_reference(spec, reference):
    dut = Crc(spec)
    rng = random.Random(spec.width)
    messages = [b"", b"123456789"] + [rng.randbytes(rng.randint(1, 40)) for _ in range(30)]

    async def bench(ctx):
        for message in messages:
            ctx.set(dut.clear, 1)
            ctx.set(dut.valid, 0)
            await ctx.tick()
            ctx.set(dut.clear, 0)
            for byte in message:
                while rng.random() < 0.2:            # gaps between bytes
                    ctx.set(dut.valid, 0)
                    await ctx.tick()
                ctx.set(dut.valid, 1)
                ctx.set(dut.data, byte)
                await ctx.tick()
            ctx.set(dut.valid, 0)
            assert ctx.get(dut.value) == reference(message), message
        # clear together with a byte starts a new message with that byte
        ctx.set(dut.clear, 1)
        ctx.set(dut.valid, 1)
        ctx.set(dut.data, 0x31)
        await ctx.tick()
        ctx.set(dut.clear, 0)
        ctx.set(dut.valid, 0)
        assert ctx.get(dut.value) == reference(b"1")

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("nbytes", [4, 8, 16, 32, 64])
def test_wide_crc32_equals_zlib(nbytes):
    """W bytes a clock: zlib.crc32 of every message of whole beats (the link pads payloads to
    whole beats, see protocol.py), for several lengths."""
    dut = Crc(CRC32, nbytes)
    rng = random.Random(nbytes)
    messages = [bytes(nbytes)] + [rng.randbytes(nbytes * rng.randint(1, 6)) for _ in range(8)]

    async def bench(ctx):
        for message in messages:
            ctx.set(dut.clear, 1)
            ctx.set(dut.valid, 0)
            await ctx.tick()
            ctx.set(dut.clear, 0)
            for k in range(0, len(message), nbytes):
                if rng.random() < 0.3:
                    ctx.set(dut.valid, 0)
                    await ctx.tick()
                ctx.set(dut.valid, 1)
                ctx.set(dut.data, int.from_bytes(message[k:k + nbytes], "little"))
                await ctx.tick()
            ctx.set(dut.valid, 0)
            assert ctx.get(dut.value) == zlib.crc32(message), message.hex()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("nbytes", [1, 8])
def test_crc_of_fixed_lanes(nbytes):
    """crc_of: the header's CRC-16 in one XOR tree per bit."""
    from amaranth import Module, Signal
    from dlforge.rtl.link.crc import crc_of
    m = Module()
    data = Signal(8 * nbytes)
    out = Signal(16)
    m.d.comb += out.eq(crc_of(CRC16, data, nbytes))
    rng = random.Random(3)
    values = [rng.randbytes(nbytes) for _ in range(20)]

    async def bench(ctx):
        for value in values:
            ctx.set(data, int.from_bytes(value, "little"))
            assert ctx.get(out) == crc16(value)

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
