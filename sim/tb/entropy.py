"""cocotb regression of the entropy-decoding gateware against the golden model.

Parameters (DLFORGE_TB_PARAMS): ``files`` (JPEG paths), else ``corpus`` ("quick", "full",
"photos", "heavy" or "shipped"; :func:`dlforge.sim.corpus.pick.files_of`), ``limit`` (at most
this many files), ``ready_prob`` (output back-pressure).  Every baseline
file must give the model's coefficient blocks and end on EOI; every malformed file whose
fault lies in the scan must give the model's status.  Metrics: Huffman symbols per clock
(the decoder's own counter over the clocks from scan start to done) and pixels per clock of
this stage.
"""

import json
import os
import random
import statistics
from pathlib import Path

import cocotb
from cocotb.triggers import FallingEdge, ReadOnly
from cocotb.utils import get_sim_time

from dlforge.rtl.jpeg.huffman_decoder import CoefficientLayout, DoneLayout
from dlforge.rtl.jpeg.status import JpegStatus as S
from dlforge.rtl.jpeg.syntax import Marker
from dlforge.sim.corpus import jpeg_corpus
from dlforge.sim.corpus.pick import files_of
from dlforge.sim.tb.streams import send_beats, start
from dlforge.sim.tb.entropy_stimulus import dht_bodies, expected_blocks, scan_beat, scan_bytes
from dlforge.sim.models.jpeg_entropy import decode_scan
from dlforge.sim.models.jpeg_parse import JpegDecodeError, parse_headers

PARAMS = json.loads(os.environ.get("DLFORGE_TB_PARAMS", "{}"))
PERIOD = 10


async def decode_file(dut, data, headers, rng):
    """Run one file through; return (blocks, status, marker, cycles, symbols)."""
    dht = [b | (int(i == len(body) - 1) << 8)
           for body in dht_bodies(data, headers) for i, b in enumerate(body)]
    await send_beats(dut, "dht", dht)
    symbols_before = int(dut.symbols_decoded.value)
    await send_beats(dut, "scan", [scan_beat(headers)])
    began = get_sim_time("ns")
    body = scan_bytes(data, headers)
    state = {"done": None}
    feeder = cocotb.start_soon(send_beats(dut, "i", [b | (int(i == len(body) - 1) << 8)
                                               for i, b in enumerate(body)],
                                    keep_going=lambda: state["done"] is None))
    blocks, current = [], [0] * 64
    dut.done__ready.value = 1
    ready_prob = float(PARAMS.get("ready_prob", 1.0))
    while state["done"] is None:
        await FallingEdge(dut.clk)
        take = ready_prob >= 1 or rng.random() < ready_prob
        dut.coef__ready.value = int(take)
        await ReadOnly()
        if take and dut.coef__valid.value:
            beat = CoefficientLayout.from_bits(int(dut.coef__payload.value))
            if beat.write:
                current[int(beat.zz)] = int(beat.value)
            if beat.end:
                blocks.append((int(beat.component), current))
                current = [0] * 64
        if dut.done__valid.value:
            done = DoneLayout.from_bits(int(dut.done__payload.value))
            state["done"] = (int(done.status), int(done.marker))
        if get_sim_time("ns") - began > PERIOD * (200 + 40 * len(body)):
            raise AssertionError("the decoder did not finish")
    cycles = (get_sim_time("ns") - began) / PERIOD
    await FallingEdge(dut.clk)
    dut.coef__ready.value = 0
    feeder.cancel()
    dut.i__valid.value = 0
    symbols = int(dut.symbols_decoded.value) - symbols_before
    return blocks, state["done"][0], state["done"][1], cycles, symbols


async def reset(dut):
    await start(dut, sources=("i", "dht", "scan"), sinks=("coef", "done"), period_ns=PERIOD)


def corpus_files():
    """The files of ``files``, else of ``corpus``, as the decoder core's testbench picks them
    (so that ``dlforge bench entropy FILE ...`` decodes those files)."""
    return [jpeg_corpus.CorpusFile(name, data) for name, data in files_of(PARAMS)]


@cocotb.test()
async def baseline_files(dut):
    """Coefficients of every file equal the model's; the scan ends on EOI."""
    await reset(dut)
    rng = random.Random(PARAMS.get("seed", 5))
    rates, pixel_rates = [], []
    for f in corpus_files():
        headers = parse_headers(f.data)
        blocks, status, marker, cycles, symbols = await decode_file(dut, f.data, headers, rng)
        assert (S(status), marker) == (S.OK, Marker.EOI), (f.name, S(status), marker)
        assert blocks == expected_blocks(f.data, headers), f.name
        rates.append(symbols / cycles)
        pixel_rates.append(headers.width * headers.height / cycles)
    metrics = {"files": len(rates), "symbols_per_clock_median": statistics.median(rates),
               "symbols_per_clock_min": min(rates),
               "pixels_per_clock_median": statistics.median(pixel_rates)}
    Path("metrics.json").write_text(json.dumps(metrics, indent=1))


@cocotb.test()
async def malformed_scans(dut):
    """Faults inside the scan give the model's status, and the next file still decodes."""
    await reset(dut)
    rng = random.Random(7)
    checked = 0
    good = jpeg_corpus.baseline_corpus("quick")[0]
    for f in jpeg_corpus.malformed_corpus():
        try:
            headers = parse_headers(f.data)
        except JpegDecodeError:
            continue
        try:
            decode_scan(f.data, headers)
            expected = S.OK
        except JpegDecodeError as error:
            expected = error.status
        _, status, _, _, _ = await decode_file(dut, f.data, headers, rng)
        assert S(status) == expected, (f.name, S(status), expected)
        # The next, valid file is not affected by the fault.
        gh = parse_headers(good.data)
        blocks, status, marker, _, _ = await decode_file(dut, good.data, gh, rng)
        assert (S(status), marker) == (S.OK, Marker.EOI) and blocks == expected_blocks(good.data, gh)
        checked += 1
    assert checked >= 5
