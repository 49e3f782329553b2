"""The Huffman decoder gateware, behind the unstuffer (EntropyDecoder), against the model."""

import random

import pytest
from amaranth.sim import Simulator

from dlforge.rtl.jpeg.entropy_decoder import EntropyDecoder
from dlforge.rtl.jpeg.status import JpegStatus as S
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
