"""Two scans at once in the C-slowed entropy decoder, each against the golden model: files
with different tables, sizes and layouts, a damaged scan beside a good one, back-pressure on
one job only, and a job that ends while the other is mid-scan and then starts again."""

import random

import pytest
from amaranth.sim import Simulator

from dlforge.rtl.jpeg.entropy_pair import EntropyDecoderPair
from dlforge.rtl.jpeg.status import JpegStatus as S
from dlforge.rtl.jpeg.syntax import Marker
from dlforge.sim.models.jpeg_entropy import decode_scan
from dlforge.sim.models.jpeg_parse import JpegDecodeError, parse_headers
from dlforge.sim.tb.entropy_stimulus import expected_blocks
from entropy_drive import collect_scan, feed_scan
from jpeg_files import WIDE_TABLES, encode, photo
from test_huffman_decoder import random_blocks, synthetic_jpeg


def run_pair(jobs, max_cycles=300_000):
    """``jobs``: per job, a list of (file, coef ready probability) decoded one after the
    other.  Returns per job the list of (blocks, (status, marker))."""
    dut = EntropyDecoderPair()
    results = [[] for _ in jobs]

    def feeder(j):
        async def run(ctx):
            for data, _ in jobs[j]:
                await feed_scan(ctx, dut.job(j), data, parse_headers(data))
                while len(results[j]) < jobs[j].index((data, _)) + 1:
                    await ctx.tick()
        return run

    def collector(j):
        async def run(ctx):
            rng = random.Random(j)
            for _, ready_prob in jobs[j]:
                results[j].append(await collect_scan(ctx, dut.job(j), rng, ready_prob,
                                                     max_cycles))
        return run

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for j in range(len(jobs)):
        sim.add_testbench(feeder(j), background=True)
        sim.add_testbench(collector(j))
    sim.run()
    return results


def expected(data):
    headers = parse_headers(data)
    try:
        decode_scan(data, headers)
    except JpegDecodeError as error:
        return None, error.status
    return expected_blocks(data, headers), S.OK


def check(data, result):
    blocks, status = expected(data)
    got_blocks, (got_status, marker) = result
    assert S(got_status) == status
    if status == S.OK:
        assert marker == Marker.EOI
        assert got_blocks == blocks


A = encode(photo("astronaut")[:48, :40], quality=85, subsampling=2)
B = encode(photo("coffee")[:24, :32], quality=95, subsampling=0, optimize=True)
C = encode(photo("camera")[:21, :37], quality=75, restart_marker_rows=1)
D = encode(photo("chelsea")[:16, :24], quality=90, subsampling=1, restart_marker_blocks=2)


def test_two_files_with_different_tables_sizes_and_layouts():
    """4:2:0 with standard tables beside optimised 4:4:4; grey with restarts beside 4:2:2
    with restarts; each job's second file starts while the other is mid-scan."""
    r = run_pair([[(A, 1.0), (C, 1.0)], [(B, 1.0), (D, 1.0)]])
    for data, got in zip((A, C, B, D), (*r[0], *r[1])):
        check(data, got)


def test_back_pressure_on_one_job_only():
    r = run_pair([[(B, 0.25)], [(A, 1.0)]])
    check(B, r[0][0])
    check(A, r[1][0])


def test_a_damaged_scan_beside_a_good_one():
    scan = parse_headers(A).scan_start
    middle = scan + (len(A) - scan) // 2
    bad = A[:middle] + Marker.RST0.bytes + A[middle:]          # a stray restart marker
    assert expected(bad)[1] != S.OK
    r = run_pair([[(bad, 1.0), (C, 1.0)], [(B, 0.7)]])
    check(bad, r[0][0])
    check(C, r[0][1])       # the job's next file is unaffected
    check(B, r[1][0])


def test_slow_codes_and_restarts_beside_a_photo():
    """Codes the fast tables cannot hold (each patched into a table for one use) and restart
    intervals in one job, a photo under back-pressure in the other."""
    rng = random.Random(9)
    blocks = random_blocks(rng, 12)
    wide = synthetic_jpeg(blocks, WIDE_TABLES, 32, 24, restart_interval=3)
    r = run_pair([[(wide, 0.8)], [(A, 0.6)]])
    check(wide, r[0][0])
    check(A, r[1][0])
