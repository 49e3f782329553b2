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
