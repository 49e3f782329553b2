"""The Huffman decoder gateware, behind the unstuffer (EntropyDecoder), against the model."""

import random

import pytest
from amaranth.sim import Simulator

from dlforge.rtl.jpeg.entropy_decoder import EntropyDecoder
from dlforge.rtl.jpeg.huffman_tables import HuffmanTables
from dlforge.rtl.jpeg.status import JpegStatus as S
from dlforge.sim import jpeg_corpus
from dlforge.sim.entropy_stimulus import dht_bodies, expected_blocks, scan_bytes, scan_config
from dlforge.sim.jpeg_entropy import decode_scan
from dlforge.sim.jpeg_parse import JpegDecodeError, parse_headers
from jpeg_files import encode, photo


def run_decoder(data, ready_prob=1.0, seed=0, max_cycles=200_000):
    headers = parse_headers(data)
    dut = dec = uns = EntropyDecoder()
    rng = random.Random(seed)
    blocks, done = [], []

    async def feeder(ctx):
        for body in dht_bodies(data, headers):
            for i, b in enumerate(body):
                ctx.set(dec.dht.valid, 1)
                ctx.set(dec.dht.payload, {"byte": b, "last": i == len(body) - 1})
                await ctx.tick().until(dec.dht.ready)
        ctx.set(dec.dht.valid, 0)
        ctx.set(dec.scan.valid, 1)
        ctx.set(dec.scan.payload, scan_config(headers))
        await ctx.tick().until(dec.scan.ready)
        ctx.set(dec.scan.valid, 0)
        body = scan_bytes(data, headers)
        for i, b in enumerate(body):
            ctx.set(uns.i.valid, 1)
            ctx.set(uns.i.payload, {"byte": b, "last": i == len(body) - 1})
            await ctx.tick().until(uns.i.ready | ~dec.busy)
            if not ctx.get(dec.busy) and not ctx.get(uns.i.ready):
                break
        ctx.set(uns.i.valid, 0)

    async def collector(ctx):
        current = [0] * 64
        ctx.set(dec.done.ready, 1)
        for _ in range(max_cycles):
            ctx.set(dec.coef.ready, rng.random() < ready_prob)
            _, _, c_valid, c_ready, beat, d_valid, d_beat = await ctx.tick().sample(
                dec.coef.valid, dec.coef.ready, dec.coef.payload, dec.done.valid, dec.done.payload)
            if c_valid and c_ready:
                if beat.write:
                    current[beat.zz] = beat.value
                if beat.end:
                    blocks.append((int(beat.component), current))
                    current = [0] * 64
            if d_valid:
                done.append((int(d_beat.status), int(d_beat.marker)))
                return
        raise AssertionError("the decoder did not finish")

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(feeder, background=True)
    sim.add_testbench(collector)
    sim.run()
    return headers, blocks, done[0]


FILES = [
    ("astronaut", (48, 32), {"quality": 85, "subsampling": 2}),
    ("astronaut", (40, 24), {"quality": 90, "subsampling": 1, "restart_marker_blocks": 2}),
    ("coffee", (24, 16), {"quality": 95, "subsampling": 0, "optimize": True}),
    ("camera", (37, 21), {"quality": 75, "restart_marker_rows": 1}),
    ("chelsea", (17, 9), {"quality": 100, "subsampling": 2}),
]


@pytest.mark.parametrize("name, size, options", FILES, ids=[f"{f[0]}-{f[1][0]}x{f[1][1]}" for f in FILES])
def test_coefficients_match_the_model(name, size, options):
    w, h = size
    data = encode(photo(name)[:h, :w], **options)
    headers, blocks, (status, marker) = run_decoder(data, ready_prob=0.7, seed=w)
    assert (status, marker) == (S.OK, 0xD9)
    assert blocks == expected_blocks(data, headers)


@pytest.mark.parametrize("damage", ["cut", "eoi-early", "stray-rst", "bytes"])
def test_damaged_scans_report_the_models_status(damage):
    data = encode(photo("astronaut")[:32, :32], quality=85, subsampling=2)
    scan = parse_headers(data).scan_start
    middle = scan + (len(data) - scan) // 2
    bad = {"cut": data[:middle],
           "eoi-early": data[:middle] + b"\xff\xd9",
           "stray-rst": data[:middle] + b"\xff\xd0" + data[middle:],
           "bytes": data[:middle] + bytes([0x00, 0x13, 0x77]) * 3 + data[middle:]}[damage]
    headers = parse_headers(bad)
    with pytest.raises(JpegDecodeError) as info:
        decode_scan(bad, headers)
    _, _, (status, _) = run_decoder(bad)
    assert S(status) == info.value.status


@pytest.mark.slow
def test_quick_corpus_and_entropy_faults():
    """Every quick-corpus file gives the model's blocks; every malformed file whose fault
    lies in the scan gives the model's status."""
    from dlforge.sim import jpeg_corpus

    for f in jpeg_corpus.baseline_corpus("quick"):
        if len(f.data) > 6000:
            continue                          # big files are for the Verilator regression
        headers, blocks, (status, marker) = run_decoder(f.data, ready_prob=0.8)
        assert (status, marker) == (S.OK, 0xD9), f.name
        assert blocks == expected_blocks(f.data, headers), f.name
    checked = 0
    for f in jpeg_corpus.malformed_corpus():
        try:
            headers = parse_headers(f.data)
        except JpegDecodeError:
            continue                          # a header fault: the marker parser's business
        try:
            decode_scan(f.data, headers)
            expected = S.OK
        except JpegDecodeError as error:
            expected = error.status
        _, _, (status, _) = run_decoder(f.data)
        assert S(status) == expected, (f.name, S(status), expected)
        checked += 1
    assert checked >= 5


# ---- Synthetic scans: Huffman tables with more than 16 codes of one length ---------------------
# The fast tables hold at most 16 codes per length; longer lengths go through the slow path
# (a symbol look-up and a fast-table patch).  Real encoders put those only at 16 bits, so these
# files make them common: every DC symbol of component 0 and most AC symbols are slow.

def _huffman_codes(counts, symbols):
    """symbol -> (code, length) of a canonical table (the first code of a repeated symbol)."""
    codes, code, k = {}, 0, 0
    for length, count in enumerate(counts, start=1):
        for _ in range(count):
            codes.setdefault(symbols[k], (code, length))
            code, k = code + 1, k + 1
        code <<= 1
    return codes


def _table(counts, symbols):
    counts = [counts.get(length, 0) for length in range(1, 17)]
    assert sum(counts) == len(symbols)
    return counts, list(symbols)


_AC_SYMBOLS = [0x00, 0x01, 0x02, 0x11, 0xF0] + [(r << 4) | s for r in range(16) for s in range(1, 11)
                                                  if (r << 4) | s not in (0x01, 0x02, 0x11)]
WIDE_TABLES = {   # (class, id): (counts, symbols)
    (0, 0): _table({6: 24}, list(range(12)) * 2),               # 24 codes of 6 bits
    (1, 0): _table({3: 4, 8: 40, 10: 60, 12: 58}, _AC_SYMBOLS),  # 40, 60, 58 codes: slow
    (0, 1): _table({3: 4, 4: 6, 5: 2}, list(range(12))),
    (1, 1): _table({3: 2, 5: 8, 7: 20, 9: 60, 11: 72}, _AC_SYMBOLS),
}


def _category(value):
    return abs(value).bit_length()


class _BitWriter:
    def __init__(self):
        self.out, self.acc, self.n = bytearray(), 0, 0

    def put(self, value, length):
        for i in reversed(range(length)):
            self.acc, self.n = (self.acc << 1) | ((value >> i) & 1), self.n + 1
            if self.n == 8:
                self.out.append(self.acc)
                if self.acc == 0xFF:
                    self.out.append(0x00)                       # byte stuffing
                self.acc, self.n = 0, 0

    def flush(self):
        if self.n:
            self.put((1 << (8 - self.n)) - 1, 8 - self.n)       # pad with 1-bits


def synthetic_jpeg(blocks, tables, width, height, restart_interval=0, components=3):
    """A baseline 4:4:4 (or grey) JPEG file whose scan carries ``blocks`` (per MCU, one list of
    64 zigzag-ordered coefficients per component), coded with ``tables``; component 0 uses
    tables 0, the others tables 1."""
    def segment(marker, body):
        return bytes([0xFF, marker]) + (len(body) + 2).to_bytes(2, "big") + bytes(body)

    out = bytearray(b"\xff\xd8")
    out += segment(0xDB, bytes([0]) + bytes([1] * 64))
    sof = bytes([8]) + height.to_bytes(2, "big") + width.to_bytes(2, "big") + bytes([components])
    for c in range(components):
        sof += bytes([c + 1, 0x11, 0])
    out += segment(0xC0, sof)
    for (cls, ident), (counts, symbols) in tables.items():
        out += segment(0xC4, bytes([(cls << 4) | ident] + counts + symbols))
    if restart_interval:
        out += segment(0xDD, restart_interval.to_bytes(2, "big"))
    sos = bytes([components])
    for c in range(components):
        sos += bytes([c + 1, 0x00 if c == 0 else 0x11])
    out += segment(0xDA, sos + bytes([0, 63, 0]))
    codes = {key: _huffman_codes(*t) for key, t in tables.items()}
    bits = _BitWriter()
    preds = [0] * components
    for mcu, mcu_blocks in enumerate(blocks):
        if restart_interval and mcu and mcu % restart_interval == 0:
            bits.flush()
            bits.out += bytes([0xFF, 0xD0 + (mcu // restart_interval - 1) % 8])
            preds = [0] * components
        for c, coefs in enumerate(mcu_blocks):
            dc, ac = codes[0, min(c, 1)], codes[1, min(c, 1)]
            diff = coefs[0] - preds[c]
            preds[c] = coefs[0]
            size = _category(diff)
            bits.put(*dc[size])
            bits.put(diff if diff >= 0 else diff + (1 << size) - 1, size)
            run = 0
            for k in range(1, 64):
                if coefs[k] == 0:
                    run += 1
                    continue
                while run >= 16:
                    bits.put(*ac[0xF0])
                    run -= 16
                size = _category(coefs[k])
                bits.put(*ac[(run << 4) | size])
                bits.put(coefs[k] if coefs[k] >= 0 else coefs[k] + (1 << size) - 1, size)
                run = 0
            if run:
                bits.put(*ac[0x00])
    bits.flush()
    return bytes(out + bits.out + b"\xff\xd9")


def random_blocks(rng, mcus, components=3):
    blocks = []
    for _ in range(mcus):
        mcu = []
        for _ in range(components):
            coefs = [rng.randint(-900, 900)] + [0] * 63
            for k in rng.sample(range(1, 64), rng.choice([0, 1, 3, 8, 20])):
                coefs[k] = rng.choice([-1, 1, 2, -3, 7, -40, 300, -1000])
            if rng.random() < 0.2:
                coefs[63] = rng.choice([1, -2])               # a block without EOB
            mcu.append(coefs)
        blocks.append(mcu)
    return blocks


@pytest.mark.parametrize("restart_interval", [0, 3])
def test_lengths_with_more_than_16_codes(restart_interval):
    rng = random.Random(restart_interval)
    width, height = 32, 24
    blocks = random_blocks(rng, (width // 8) * (height // 8))
    data = synthetic_jpeg(blocks, WIDE_TABLES, width, height, restart_interval)
    headers, got, (status, marker) = run_decoder(data, ready_prob=0.8, seed=restart_interval)
    assert (status, marker) == (S.OK, 0xD9)
    expected = expected_blocks(data, headers)
    assert [coefs for _, coefs in expected] == [b for mcu in blocks for b in mcu]  # the writer
    assert got == expected


# ---- The table builder on its own ----------------------------------------------------------

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
    tables[1, 3] = jpeg_corpus.STD_HUFFMAN_TABLES[1, 0]
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


def test_lutmap_helpers():
    from amaranth import Module, Signal
    from dlforge.rtl.jpeg.lutmap import any_of, select, shift_left

    m = Module()
    sel, dat, val, amt = Signal(9), Signal(45), Signal(12), Signal(3)
    picked = select(m, [(sel[i], dat[5 * i:5 * i + 5]) for i in range(9)], "picked")
    anyone = any_of(m, list(sel), "any")
    shifted = shift_left(m, val, amt, "shifted")
    rng = random.Random(1)

    async def bench(ctx):
        for _ in range(200):
            s, d = rng.getrandbits(9), rng.getrandbits(45)
            v, a = rng.getrandbits(12), rng.getrandbits(3)
            ctx.set(sel, s), ctx.set(dat, d), ctx.set(val, v), ctx.set(amt, a)
            want = 0
            for i in range(9):
                if s >> i & 1:
                    want |= d >> (5 * i) & 31
            assert ctx.get(picked) == want
            assert ctx.get(anyone) == int(s != 0)
            assert ctx.get(shifted) == (v << a) & 0xFFF

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
