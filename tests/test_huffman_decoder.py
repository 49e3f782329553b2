"""The Huffman decoder gateware, behind the unstuffer (EntropyDecoder), against the model."""

import random

import pytest
from amaranth.sim import Simulator

from dlforge.rtl.jpeg.entropy_decoder import EntropyDecoder
from dlforge.rtl.jpeg.status import JpegStatus as S
from dlforge.rtl.jpeg.syntax import Marker, segment_bytes
from dlforge.sim.corpus import jpeg_corpus
from dlforge.sim.tb.entropy_stimulus import expected_blocks
from dlforge.sim.models.jpeg_entropy import decode_scan
from dlforge.sim.models.jpeg_parse import JpegDecodeError, parse_headers
from entropy_drive import collect_scan, feed_scan
from jpeg_files import WIDE_TABLES, encode, photo


def run_decoder(data, ready_prob=1.0, seed=0, max_cycles=200_000):
    headers = parse_headers(data)
    dec = EntropyDecoder()
    rng = random.Random(seed)
    result = []

    async def feeder(ctx):
        await feed_scan(ctx, dec, data, headers)

    async def collector(ctx):
        result.append(await collect_scan(ctx, dec, rng, ready_prob, max_cycles))

    sim = Simulator(dec)
    sim.add_clock(1e-8)
    sim.add_testbench(feeder, background=True)
    sim.add_testbench(collector)
    sim.run()
    blocks, done = result[0]
    return headers, blocks, done


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
    assert (status, marker) == (S.OK, Marker.EOI)
    assert blocks == expected_blocks(data, headers)


@pytest.mark.parametrize("ready_prob", [0.5, 0.3])
def test_many_long_codes_under_heavy_back_pressure(ready_prob):
    """A q90 4:4:4 photo (many long codes) with the output FIFO stopping the loop often: every
    coefficient still the model's.  (It caught a loop that decoded a symbol twice when a stall
    fell between a code's two clocks, in the lookahead loop of commit a39ff97.)"""
    data = encode(photo("coffee")[:75, :100], quality=90, subsampling=0)
    headers, blocks, (status, marker) = run_decoder(data, ready_prob=ready_prob, seed=3)
    assert (status, marker) == (S.OK, Marker.EOI)
    assert blocks == expected_blocks(data, headers)


@pytest.mark.parametrize("damage", ["cut", "eoi-early", "stray-rst", "bytes"])
def test_damaged_scans_report_the_models_status(damage):
    data = encode(photo("astronaut")[:32, :32], quality=85, subsampling=2)
    scan = parse_headers(data).scan_start
    middle = scan + (len(data) - scan) // 2
    bad = {"cut": data[:middle],
           "eoi-early": data[:middle] + Marker.EOI.bytes,
           "stray-rst": data[:middle] + Marker.RST0.bytes + data[middle:],
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
    for f in jpeg_corpus.baseline_corpus("quick"):
        if len(f.data) > 6000:
            continue                          # big files are for the Verilator regression
        headers, blocks, (status, marker) = run_decoder(f.data, ready_prob=0.8)
        assert (status, marker) == (S.OK, Marker.EOI), f.name
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
    out = bytearray(Marker.SOI.bytes)
    out += segment_bytes(Marker.DQT, bytes([0]) + bytes([1] * 64))
    sof = bytes([8]) + height.to_bytes(2, "big") + width.to_bytes(2, "big") + bytes([components])
    for c in range(components):
        sof += bytes([c + 1, 0x11, 0])
    out += segment_bytes(Marker.SOF0, sof)
    for (cls, ident), (counts, symbols) in tables.items():
        out += segment_bytes(Marker.DHT, bytes([(cls << 4) | ident] + counts + symbols))
    if restart_interval:
        out += segment_bytes(Marker.DRI, restart_interval.to_bytes(2, "big"))
    sos = bytes([components])
    for c in range(components):
        sos += bytes([c + 1, 0x00 if c == 0 else 0x11])
    out += segment_bytes(Marker.SOS, sos + bytes([0, 63, 0]))
    codes = {key: _huffman_codes(*t) for key, t in tables.items()}
    bits = _BitWriter()
    preds = [0] * components
    for mcu, mcu_blocks in enumerate(blocks):
        if restart_interval and mcu and mcu % restart_interval == 0:
            bits.flush()
            bits.out += Marker(Marker.RST0 + (mcu // restart_interval - 1) % 8).bytes
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
    return bytes(out + bits.out + Marker.EOI.bytes)


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
    assert (status, marker) == (S.OK, Marker.EOI)
    expected = expected_blocks(data, headers)
    assert [coefs for _, coefs in expected] == [b for mcu in blocks for b in mcu]  # the writer
    assert got == expected
