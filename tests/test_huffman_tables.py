"""The Huffman table builder: DHT bodies in, code limits, symbol offsets, symbols and fast
entries out, each as the canonical code of T.81 Annex C gives it; bad tables flag an error."""

import pytest
from amaranth.sim import Simulator

from dlforge.rtl.jpeg.huffman_tables import HuffmanTables
from dlforge.sim.corpus import jpeg_markers
from jpeg_files import WIDE_TABLES


def load_tables(bodies, check):
    """Stream DHT bodies into a HuffmanTables, then run ``check(ctx, dut)``."""
    dut = HuffmanTables()

    async def bench(ctx):
        for body in bodies:
            for i, b in enumerate(body):
                ctx.set(dut.dht.valid, 1)
                ctx.set(dut.dht.payload, {"byte": b, "last": i == len(body) - 1})
                await ctx.tick().until(dut.dht.ready)
        ctx.set(dut.dht.valid, 0)
        await ctx.tick()
        await check(ctx, dut)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def test_tables_match_the_canonical_codes():
    tables = dict(WIDE_TABLES)
    tables[1, 3] = jpeg_markers.STD_HUFFMAN_TABLES[1, 0]
    bodies = [bytes([(cls << 4) | ident] + list(counts) + list(symbols))
              for (cls, ident), (counts, symbols) in tables.items()]

    async def check(ctx, dut):
        assert not ctx.get(dut.error)
        for (cls, ident), (counts, symbols) in tables.items():
            t = (cls << 2) | ident
            first, k = 0, 0
            for length, count in enumerate(counts, start=1):
                assert ctx.get(dut.floor[t][length - 1]) == (1 << length) - (first + count)
                ctx.set(dut.valoff_addr, (t << 4) | (length - 1))
                await ctx.tick()
                assert ctx.get(dut.valoff) == (k - first) % 256
                for i in range(count):
                    sym, code = symbols[k + i], first + i
                    ctx.set(dut.symbol_addr, (t << 8) | (k + i))
                    ctx.set(dut.fast_dc_table if cls == 0 else dut.fast_ac_table, ident)
                    for bits in dut.fast_bits:
                        ctx.set(bits, code << (16 - length))
                    await ctx.tick()
                    assert ctx.get(dut.symbol) == sym
                    entry = (dut.fast_ac if cls else dut.fast_dc)[length - 1]
                    size, run = sym & 15, sym >> 4
                    want = ({"total": 0, "run": 0, "eob": 0, "adv": 0} if count > 16 else
                            {"total": length + size, "run": run if cls else 0,
                             "eob": int(cls == 1 and size == 0 and run != 15), "adv": 1})
                    if not cls:                 # a DC entry has no run and no end of block
                        del want["run"], want["eob"]
                    got = ctx.get(entry)
                    assert {f: int(getattr(got, f)) for f in want} == want, (cls, ident, sym)
                first, k = (first + count) << 1, k + count

    load_tables(bodies, check)


@pytest.mark.parametrize("body", [
    bytes([0x24] + [0] * 16),                       # class 2
    bytes([0x04] + [0] * 16),                       # id 4
    bytes([0x00, 3] + [0] * 15 + [0, 1, 2]),        # three 1-bit codes
    bytes([0x10] + [0] * 7 + [255, 2] + [0] * 7 + list(range(256)) + [0]),   # 257 symbols
    bytes([0x00, 0, 1] + [0] * 14),                 # the symbol is missing
])
def test_bad_tables_raise_error(body):
    async def check(ctx, dut):
        assert ctx.get(dut.error)
        assert ctx.get(dut.idle)

    load_tables([body], check)
