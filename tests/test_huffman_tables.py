"""The Huffman table builder: DHT bodies in, code limits, symbol offsets, symbols, fast and
lookahead entries out, each as the canonical code of T.81 Annex C gives it; bad tables flag an error."""

import pytest
from amaranth.sim import Simulator

from dlforge.rtl.jpeg.huffman_tables import LOOKAHEAD_BITS, HuffmanTables
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
                    ctx.set(dut.fast_bits, code << (16 - length))
                    await ctx.tick()
                    assert ctx.get(dut.symbol) == sym
                    entry = (dut.fast_ac if cls else dut.fast_dc)[length - 1]
                    size, run = sym & 15, sym >> 4
                    want = ({"total": 0, "run": 0, "eob": 0, "adv": 0} if count > 16 else
                            {"total": length + size, "run": run if cls else 0,
                             "eob": int(cls == 1 and size == 0 and run != 15), "adv": 1})
                    got = ctx.get(entry)
                    assert {f: int(getattr(got, f)) for f in want} == want, (cls, ident, sym)
                first, k = (first + count) << 1, k + count
            await check_lookahead(ctx, dut, cls, ident, counts, symbols)

    load_tables(bodies, check)


def expected_lookahead(cls, counts, symbols, bits=LOOKAHEAD_BITS):
    """Per prefix of ``bits`` bits: the entry of the code of at most ``bits`` bits it begins
    with, or a zero entry (a longer code, or none)."""
    zero = {"total": 0, "run": 0, "eob": 0, "adv": 0}
    table = [zero] * (1 << bits)
    first, k = 0, 0
    for length, count in enumerate(counts, start=1):
        for i in range(count):
            if length <= bits:
                sym = symbols[k + i]
                size, run = sym & 15, sym >> 4
                entry = {"total": length + size, "run": run if cls else 0,
                         "eob": int(cls == 1 and size == 0 and run != 15), "adv": 1}
                base = (first + i) << (bits - length)
                for p in range(base, base + (1 << (bits - length))):
                    table[p] = entry
        first, k = (first + count) << 1, k + count
    return table


async def check_lookahead(ctx, dut, cls, ident, counts, symbols):
    want = expected_lookahead(cls, counts, symbols)
    ctx.set(dut.fast_dc_table if cls == 0 else dut.fast_ac_table, ident)
    for prefix, entry in enumerate(want):
        ctx.set(dut.look_bits, prefix)
        got = ctx.get(dut.look_ac if cls else dut.look_dc)
        assert {f: int(getattr(got, f)) for f in entry} == entry, (cls, ident, prefix)


def test_lookahead_entries_of_a_reloaded_table_are_its_own():
    """A table loaded over another keeps nothing of it: prefixes the first table's short codes
    filled are zero again where the second table's codes are longer."""
    short = ([1, 1] + [0] * 14, [0x01, 0x02])                    # codes 0 and 10
    long_ = ([0] * 6 + [1, 1, 1] + [0] * 7, [0x11, 0x12, 0x13])  # codes of 7, 8 and 9 bits
    bodies = [bytes([0x12] + short[0] + short[1]), bytes([0x12] + long_[0] + long_[1])]

    async def check(ctx, dut):
        assert not ctx.get(dut.error)
        await check_lookahead(ctx, dut, 1, 2, *long_)

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
