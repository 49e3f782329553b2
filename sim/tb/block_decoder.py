"""cocotb regression of the block decoder (entropy decoder -> coefficient buffer -> IDCT).

Every file's decoded 8x8 blocks, in scan order, must equal the golden model's (islow IDCT of
the model's coefficients with the file's quantisation tables).  Parameters: ``files``, else
``corpus`` (:func:`dlforge.sim.corpus.pick.files_of`), ``limit``, ``ready_prob``.  Metrics: pixels per clock from the first scan byte to the last
sample out.
"""

import json
import os
import random
import statistics
from pathlib import Path

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, ReadOnly
from cocotb.utils import get_sim_time

from dlforge.rtl.jpeg.huffman_decoder import DoneLayout
from dlforge.rtl.jpeg.status import JpegStatus as S
from dlforge.rtl.jpeg.syntax import Marker
from dlforge.sim.corpus import jpeg_corpus
from dlforge.sim.corpus.pick import files_of
from dlforge.sim.tb.streams import send_beats, start
from dlforge.sim.tb.entropy_stimulus import (dht_bodies, dqt_bodies, expected_samples, scan_beat,
                                             scan_bytes)
from dlforge.sim.models.jpeg_parse import parse_headers

PARAMS = json.loads(os.environ.get("DLFORGE_TB_PARAMS", "{}"))
PERIOD = 10


def with_last(body):
    return [b | (int(i == len(body) - 1) << 8) for i, b in enumerate(body)]


@cocotb.test()
async def corpus_files(dut):
    await start(dut, sources=("i", "dht", "dqt", "scan"), sinks=("o",), period_ns=PERIOD)
    dut.done__ready.value = 1
    rng = random.Random(PARAMS.get("seed", 3))
    ready_prob = float(PARAMS.get("ready_prob", 1.0))
    lanes = int(PARAMS.get("samples_per_clock", 8))
    # ``files``, else ``corpus``, as the decoder core's testbench picks them.
    files = [jpeg_corpus.CorpusFile(name, data) for name, data in files_of(PARAMS)]
    rates = []
    for f in files:
        headers = parse_headers(f.data)
        want = expected_samples(f.data, headers)
        dut.quant_select.value = sum(c.tq << (2 * i) for i, c in enumerate(headers.components))
        await send_beats(dut, "dqt", [b for body in dqt_bodies(f.data, headers)
                                      for b in with_last(body)])
        await send_beats(dut, "dht", [b for body in dht_bodies(f.data, headers)
                                      for b in with_last(body)])
        await send_beats(dut, "scan", [scan_beat(headers)])
        began = get_sim_time("ns")
        feeder = cocotb.start_soon(send_beats(dut, "i", with_last(scan_bytes(f.data, headers))))
        got, status = [], None
        while len(got) < len(want) or status is None:
            await FallingEdge(dut.clk)
            take = ready_prob >= 1 or rng.random() < ready_prob
            dut.o__ready.value = int(take)
            await ReadOnly()
            if take and dut.o__valid.value:
                word = int(dut.o__payload.value)
                got.extend((word >> (8 * k)) & 0xFF for k in range(lanes))
            if dut.done__valid.value and status is None:
                done = DoneLayout.from_bits(int(dut.done__payload.value))
                status = (S(int(done.status)), int(done.marker))
            assert get_sim_time("ns") - began < PERIOD * (1000 + 200 * len(want)), f.name
        cycles = (get_sim_time("ns") - began) / PERIOD
        await FallingEdge(dut.clk)
        dut.o__ready.value = 0
        feeder.cancel()
        assert status == (S.OK, Marker.EOI), (f.name, status)
        assert not dut.table_error.value, f.name
        assert (np.array(got) == want).all(), f.name
        rates.append(headers.width * headers.height / cycles)
    Path("metrics.json").write_text(json.dumps({
        "files": len(rates), "pixels_per_clock_median": statistics.median(rates),
        "pixels_per_clock_min": min(rates)}, indent=1))
