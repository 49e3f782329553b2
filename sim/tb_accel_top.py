"""cocotb testbench of the accelerator top at its byte link: host-encoded frames in, response
frames out, decoded with the host's frame codec and checked against the golden models.

Parameters (``DLFORGE_TB_PARAMS``): corpus (quick | mixed), limit, cores, max_width,
max_height, max_payload, ready_prob (link output), corrupt (probability that a request frame's
payload byte is flipped in transit: the device answers BAD_CRC and the testbench resends).
Metrics: files, ok, clocks, resends.
"""

import json
import os
import random
import struct
from pathlib import Path

import cocotb
from cocotb.triggers import FallingEdge, ReadOnly

from dlforge.rtl.jpeg.status import JpegStatus as S
from dlforge.rtl.link.protocol import (HEADER_BYTES, FrameDecoder, Opcode, Register, Status,
                                       VERSION, encode_frame)
from dlforge.sim import jpeg_corpus
from dlforge.sim.cocotb_stream import start
from dlforge.sim.jpeg_model import JpegDecodeError, decode

PARAMS = json.loads(os.environ.get("DLFORGE_TB_PARAMS", "{}"))


def _files():
    kind = PARAMS.get("corpus", "quick")
    good = jpeg_corpus.baseline_corpus("quick")
    if kind == "mixed":
        bad = jpeg_corpus.malformed_corpus() + jpeg_corpus.unsupported_corpus()
        corpus = [f for pair in zip(good, bad) for f in pair]
    else:
        corpus = good
    return [f.data for f in corpus[:int(PARAMS.get("limit", 10))]]


def file_requests(tag, data, max_payload, fast=False):
    """A file as JPEG_DATA chunks and a final JPEG_END chunk (never empty)."""
    chunks = [data[i:i + max_payload] for i in range(0, len(data), max_payload)] or [b""]
    return [encode_frame(Opcode.JPEG_END if n == len(chunks) - 1 else Opcode.JPEG_DATA, tag,
                         chunk, status=int(fast))
            for n, chunk in enumerate(chunks)]


@cocotb.test()
async def decode_over_the_link(dut):
    """Every file through the link, images equal the model's; registers and pings answer."""
    await start(dut, sources=("i",), sinks=("o",))
    rng = random.Random(PARAMS.get("seed", 3))
    max_payload = int(PARAMS.get("max_payload", 4096))
    ready_prob = float(PARAMS.get("ready_prob", 1.0))
    corrupt = float(PARAMS.get("corrupt", 0.0))
    files = _files()
    requests = [encode_frame(Opcode.READ_REGS, 1, struct.pack("<HH", Register.VERSION, 4)),
                encode_frame(Opcode.PING, 2, b"hello")]
    for n, data in enumerate(files):
        requests += file_requests(100 + n, data, max_payload, fast=n % 2 == 1)
    # Request frames go out one by one; a frame answered BAD_CRC goes again (the device did
    # nothing with it).  A file's frames are consecutive, so a resent frame is resent at once.
    queue = list(requests)
    sending = b""
    decoder = FrameDecoder()
    responses = []
    resends = 0
    clocks = 0
    budget = 400_000 + 60 * sum(len(r) for r in requests)
    awaiting_verdict = None
    while True:
        ends = sum(1 for r in responses if r.opcode == Opcode.JPEG_END)
        if ends == len(files) and len([r for r in responses if r.tag in (1, 2)]) == 2:
            break
        assert clocks < budget, f"{ends} of {len(files)} files answered after {clocks} clocks"
        await FallingEdge(dut.clk)
        if not sending and queue and awaiting_verdict is None:
            frame = queue.pop(0)
            wire = bytearray(frame)
            if corrupt and len(frame) > HEADER_BYTES + 4 and rng.random() < corrupt:
                wire[rng.randrange(HEADER_BYTES, len(frame) - 4)] ^= 0x01
                awaiting_verdict = frame          # expect BAD_CRC, then resend this frame
            sending = bytes(wire)
        dut.i__valid.value = int(bool(sending))
        if sending:
            dut.i__payload.value = sending[0]
        take = rng.random() < ready_prob
        dut.o__ready.value = int(take)
        await ReadOnly()
        if sending and dut.i__ready.value:
            sending = sending[1:]
        if take and dut.o__valid.value:
            for frame in decoder.feed(bytes([int(dut.o__payload.value)])):
                if frame.opcode == Opcode.ERROR:
                    assert frame.status == Status.BAD_CRC and awaiting_verdict is not None, frame
                    queue.insert(0, awaiting_verdict)
                    awaiting_verdict = None
                    resends += 1
                else:
                    responses.append(frame)
        clocks += 1
    await FallingEdge(dut.clk)
    dut.i__valid.value = 0
    assert decoder.bad_headers == decoder.bad_payloads == decoder.dropped_bytes == 0

    regs = next(r for r in responses if r.tag == 1)
    assert struct.unpack("<4I", regs.payload) == (VERSION, int(PARAMS.get("cores", 1)),
                                                  int(PARAMS["max_width"]),
                                                  int(PARAMS["max_height"]))
    assert next(r for r in responses if r.tag == 2).payload == b"hello"
    ok = 0
    for n, data in enumerate(files):
        mine = [r for r in responses if r.tag == 100 + n]
        assert mine and mine[-1].opcode == Opcode.JPEG_END
        assert all(r.opcode == Opcode.JPEG_DATA for r in mine[:-1])
        status, _, width, height, cycles, _ = struct.unpack("<BBHHII", mine[-1].payload)
        pixels = b"".join(r.payload for r in mine[:-1])
        try:
            want = decode(data, "fast" if n % 2 else "fancy", max_width=int(PARAMS["max_width"]),
                          max_height=int(PARAMS["max_height"]))
        except JpegDecodeError as exc:
            assert S(status) == exc.status, (n, S(status), exc.status)
            continue
        assert S(status) == S.OK, (n, S(status))
        assert (width, height) == (want.pixels.shape[1], want.pixels.shape[0])
        assert pixels == want.pixels.tobytes(), f"file {n}: pixels differ"
        assert cycles > 0
        ok += 1
    Path("metrics.json").write_text(json.dumps({"files": len(files), "ok": ok,
                                                "clocks": clocks, "resends": resends}))
