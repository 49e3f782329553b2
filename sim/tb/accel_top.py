"""cocotb testbench of the accelerator top at its link (``link_bytes`` W bytes a clock):
host-encoded frames in, response frames out, decoded with the host's frame codec and checked
against the golden models.  Files go to the cores in turn (file n to core n % cores), and the
frames of different cores' files interleave on the link.

Parameters (``DLFORGE_TB_PARAMS``): corpus (quick | mixed), limit, cores, max_width,
max_height, max_payload, link_bytes, ready_prob (link output), corrupt (probability that a
request frame's payload byte is flipped in transit: the device answers BAD_CRC and the
testbench resends);
conv: the engine's EngineConfig fields (then the convolution test runs instead, or as well
with ``decode``), layers.
With ``cores`` 0 and no ``conv`` (a board's bring-up build: the link alone) the link test runs.
Metrics: files, ok, clocks, resends (and per conv layer: cycles, tiles).
"""

import json
import os
import random
import struct
from pathlib import Path

import cocotb
from cocotb.triggers import FallingEdge, ReadOnly

from dlforge.rtl.jpeg.status import JpegStatus as S
from dlforge.rtl.jpeg.syntax import Marker
from dlforge.rtl.link.jpeg_reply import parse_end
from dlforge.rtl.link.protocol import (MAX_LENGTH, Opcode, Register, Status, VERSION, array_word,
                                       check_header, encode_frame, file_requests, header_beats,
                                       payload_beats)
from dlforge.host.link.frame_parser import FrameDecoder
from dlforge.sim.corpus import jpeg_corpus
from dlforge.sim.tb.streams import start
from dlforge.sim.models.jpeg_model import JpegDecodeError, decode
from dlforge.sim.models.jpeg_parse import parse_headers

PARAMS = json.loads(os.environ.get("DLFORGE_TB_PARAMS", "{}"))
W = int(PARAMS.get("link_bytes", 1))


def frame(*args, **kwargs):
    return encode_frame(*args, link_bytes=W, **kwargs)


def _metrics(**figures):
    """Add to this run's metrics.json (both tests may run in one simulation)."""
    path = Path("metrics.json")
    old = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps(old | figures))


def interleaved(per_core):
    """Frame lists of the cores merged a frame at a time (each core's own order kept)."""
    out, lists = [], [list(f) for f in per_core]
    while any(lists):
        for frames in lists:
            if frames:
                out.append(frames.pop(0))
    return out


def _files():
    corpus = (jpeg_corpus.mixed_corpus() if PARAMS.get("corpus", "quick") == "mixed"
              else jpeg_corpus.baseline_corpus("quick"))
    return [f.data for f in corpus[:int(PARAMS.get("limit", 10))]]


LINK_ONLY = int(PARAMS.get("cores", 1)) == 0 and "conv" not in PARAMS


@cocotb.test(skip=("conv" in PARAMS and not PARAMS.get("decode")) or LINK_ONLY)
async def decode_over_the_link(dut):
    """Every file through the link, images equal the model's; registers and pings answer."""
    await start(dut, sources=("i",), sinks=("o",))
    rng = random.Random(PARAMS.get("seed", 3))
    max_payload = int(PARAMS.get("max_payload", 4096))
    ready_prob = float(PARAMS.get("ready_prob", 1.0))
    corrupt = float(PARAMS.get("corrupt", 0.0))
    files = _files()
    cores = max(int(PARAMS.get("cores", 1)), 1)
    requests = [frame(Opcode.READ_REGS, 1, struct.pack("<HH", Register.VERSION, 4)),
                frame(Opcode.PING, 2, b"hello")]
    per_core = [[] for _ in range(cores)]
    for n, data in enumerate(files):
        per_core[n % cores] += file_requests(100 + n, data, max_payload, fast=n % 2 == 1,
                                             link_bytes=W, core=n % cores)
    requests += interleaved(per_core)

    def finished(responses):
        ends = sum(1 for r in responses if r.opcode == Opcode.JPEG_END)
        return ends == len(files) and len([r for r in responses if r.tag in (1, 2)]) == 2

    responses, clocks, resends = await exchange(dut, requests, finished, rng, ready_prob,
                                                corrupt)
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
        status, width, height, cycles, _ = parse_end(mine[-1].payload)
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
    _metrics(files=len(files), ok=ok, clocks=clocks, resends=resends)


@cocotb.test(skip=not PARAMS.get("gap"))
async def a_lost_frame_is_refused(dut):
    """A file's middle frame vanishes (its header destroyed on the way): the core's next
    frame is refused with Status.GAP naming its tag, and the file sent again decodes
    bit-exact."""
    await start(dut, sources=("i",), sinks=("o",))
    rng = random.Random(PARAMS.get("seed", 3))
    max_payload = int(PARAMS.get("max_payload", 4096))
    limit = int(PARAMS["max_width"]), int(PARAMS["max_height"])
    data = next(f.data for f in jpeg_corpus.baseline_corpus("quick")
                if len(f.data) > 3 * max_payload
                and parse_headers(f.data).width <= limit[0]
                and parse_headers(f.data).height <= limit[1])
    core = int(PARAMS.get("cores", 1)) - 1
    frames = file_requests(700, data, max_payload, link_bytes=W, core=core)
    holey = frames[:1] + frames[2:]
    again = file_requests(701, data, max_payload, link_bytes=W, core=core)
    queue = list(holey)

    def finished(responses):
        return any(r.tag == 701 and r.opcode == Opcode.JPEG_END for r in responses)

    responses, _, _ = await exchange(dut, queue + again, finished, rng, refusals=True)
    gaps = [r for r in responses if r.opcode == Opcode.ERROR]
    assert [(r.status, r.tag, r.payload) for r in gaps] == [
        (Status.GAP, 700, bytes([Opcode.JPEG_DATA if len(frames) > 3 else Opcode.JPEG_END]))]
    mine = [r for r in responses if r.tag == 701]
    want = decode(data, "fancy", max_width=int(PARAMS["max_width"]),
                  max_height=int(PARAMS["max_height"])).pixels
    assert b"".join(r.payload for r in mine[:-1]) == want.tobytes()
    assert [r.seq for r in mine] == list(range(len(mine)))       # the replies numbered
    _metrics(gap_refused=len(gaps))


async def exchange(dut, requests, finished, rng, ready_prob=1.0, corrupt=0.0, refusals=False):
    """Send request frames over the link and collect the response frames until
    ``finished(responses)``.  Request frames go out one by one; when ``corrupt`` flips a
    payload byte on the way, the device must answer BAD_CRC, and the frame is sent again
    (the device did nothing with it), before anything else: a file's frames stay in order."""
    queue = list(requests)
    sending = b""
    decoder = FrameDecoder(max_length=1 << 20, link_bytes=W)
    responses = []
    resends = 0
    clocks = 0
    budget = 400_000 + 60 * sum(len(r) for r in requests)
    awaiting_verdict = None
    while not finished(responses):
        assert clocks < budget, f"{len(responses)} responses after {clocks} clocks"
        await FallingEdge(dut.clk)
        if not sending and queue and awaiting_verdict is None:
            frame = queue.pop(0)
            wire = bytearray(frame)
            start = header_beats(W) * W
            length = check_header(frame, 0, MAX_LENGTH)[3]
            covered = payload_beats(length, W) * W
            if corrupt and length and rng.random() < corrupt:
                wire[rng.randrange(start, start + covered)] ^= 0x01
                awaiting_verdict = frame
            sending = bytes(wire)
        dut.i__valid.value = int(bool(sending))
        if sending:
            dut.i__payload.value = int.from_bytes(sending[:W], "little")
        take = rng.random() < ready_prob
        dut.o__ready.value = int(take)
        await ReadOnly()
        if sending and dut.i__ready.value:
            sending = sending[W:]
        if take and dut.o__valid.value:
            for got in decoder.feed(int(dut.o__payload.value).to_bytes(W, "little")):
                if got.opcode == Opcode.ERROR and got.status == Status.BAD_CRC \
                        and awaiting_verdict is not None:
                    queue.insert(0, awaiting_verdict)
                    awaiting_verdict = None
                    resends += 1
                else:
                    # (other refusals only where the caller looks at them)
                    assert got.opcode != Opcode.ERROR or refusals, got
                    responses.append(got)
        clocks += 1
    await FallingEdge(dut.clk)
    dut.i__valid.value = 0
    assert decoder.bad_headers == decoder.bad_payloads == decoder.dropped_bytes == 0
    return responses, clocks, resends


@cocotb.test(skip="conv" not in PARAMS)
async def conv_over_the_link(dut):
    """Layers as CONV_WORDS frames; results bit-exact; the engine's counters read back."""
    from dlforge.host.conv.link_words import layer_words, scatter_results
    from dlforge.host.conv.plan import LayerShape, plan_layer
    from dlforge.rtl.conv.config import EngineConfig
    from dlforge.host.conv.random_layer import expected_output, random_tensors
    import numpy as np

    await start(dut, sources=("i",), sinks=("o",))
    cfg = EngineConfig(**PARAMS["conv"])
    rng = random.Random(PARAMS.get("seed", 3))
    nrng = np.random.default_rng(PARAMS.get("seed", 3))
    max_payload = int(PARAMS.get("max_payload", 4096))
    lb = cfg.link_bytes
    total_tiles = 0
    for n, spec in enumerate(PARAMS["layers"]):
        if isinstance(spec.get("kernel"), list):
            spec = spec | {"kernel": tuple(spec["kernel"])}     # (a pair through JSON)
        layer = LayerShape(**spec)
        tiles = plan_layer(layer, cfg).tiles(cfg)
        t = random_tensors(layer, cfg, nrng)
        parts = layer_words(layer, cfg, tiles, t)
        raw = b"".join(w.to_bytes(lb, "little") for words, _ in parts for w in words)
        tag = 500 + n
        requests = [frame(Opcode.CONV_WORDS, tag, raw[i:i + max_payload], max_payload=max_payload)
                    for i in range(0, len(raw), max_payload)]
        n_words = sum(count for _, count in parts)

        def finished(responses):
            return sum(len(r.payload) for r in responses) == n_words * lb

        responses, _, _ = await exchange(dut, requests, finished, rng,
                                         float(PARAMS.get("ready_prob", 1.0)),
                                         float(PARAMS.get("corrupt", 0.0)))
        assert all(r.opcode == Opcode.CONV_WORDS and r.tag == tag for r in responses)
        got = b"".join(r.payload for r in responses)
        words = [int.from_bytes(got[i:i + lb], "little") for i in range(0, len(got), lb)]
        oh = layer.out_h // 2 if layer.pool else layer.out_h
        ow = layer.out_w // 2 if layer.pool else layer.out_w
        out = np.zeros((layer.out_channels, oh, ow), np.int8)
        position = 0
        for tile, (_, count) in zip(tiles, parts):
            if count:
                scatter_results(layer, cfg, tile, words[position:position + count], out)
                position += count
        assert np.array_equal(out, expected_output(layer, t)), f"layer {n} differs"
        total_tiles += len(tiles)

    def regs_back(responses):
        return any(r.tag == 9 for r in responses)

    responses, _, _ = await exchange(dut, [frame(
        Opcode.READ_REGS, 9, struct.pack("<HH", Register.ARRAY, 2))], regs_back, rng)
    array, link = struct.unpack("<2I", responses[-1].payload)
    assert array == array_word(cfg)
    assert link == lb
    responses, _, _ = await exchange(dut, [frame(
        Opcode.READ_REGS, 9, struct.pack("<HH", Register.CONV_WEIGHT_DEPTH, 4))], regs_back, rng)
    assert struct.unpack("<4I", responses[-1].payload) == (
        cfg.weight_depth, cfg.input_depth, cfg.psum_depth, cfg.max_reduction)
    responses, _, _ = await exchange(dut, [frame(
        Opcode.READ_REGS, 9, struct.pack("<HH", Register.CORES, 1))], regs_back, rng)
    assert struct.unpack("<I", responses[-1].payload) == (int(PARAMS.get("cores", 1)),)
    responses, _, _ = await exchange(dut, [frame(
        Opcode.READ_REGS, 9, struct.pack("<HH", Register.CONV_CYCLES, 4))], regs_back, rng)
    cycles, array_cycles, tiles, error = struct.unpack("<4I", responses[-1].payload)
    assert tiles == total_tiles and error == 0 and cycles > array_cycles > 0
    _metrics(layers=len(PARAMS["layers"]), tiles=tiles, cycles=cycles)


@cocotb.test(skip=not LINK_ONLY)
async def link_alone(dut):
    """The top with no decoder and no engine: pings echo at W, registers read back the
    configuration, damaged frames are refused and sent again, data opcodes are unknown, and
    the span registers stay where a span opens when no data comes."""
    await start(dut, sources=("i",), sinks=("o",))
    rng = random.Random(PARAMS.get("seed", 3))
    requests = [frame(Opcode.PING, 1, bytes(range(37))),
                frame(Opcode.WRITE_REG, 2, struct.pack("<HI", Register.SPAN_START, 1)),
                frame(Opcode.READ_REGS, 3, struct.pack("<HH", Register.VERSION, 8)),
                frame(Opcode.JPEG_END, 4, Marker.SOI.bytes + Marker.EOI.bytes),
                frame(Opcode.CONV_WORDS, 5, bytes(W)),
                frame(Opcode.PING, 6, bytes(range(200, 256)) * 3),
                frame(Opcode.READ_REGS, 7, struct.pack("<HH", Register.LINK_WIDTH, 2)),
                frame(Opcode.READ_REGS, 8, struct.pack("<HH", Register.SPAN_START, 2))]
    responses, clocks, resends = await exchange(
        dut, requests, lambda r: len(r) == len(requests), rng,
        float(PARAMS.get("ready_prob", 0.7)), float(PARAMS.get("corrupt", 0.3)), refusals=True)
    responses = [r for r in responses if r.status != Status.BAD_CRC]
    got = {r.tag: r for r in responses}
    assert got[1].payload == bytes(range(37)) and got[6].payload == bytes(range(200, 256)) * 3
    assert got[2].opcode == Opcode.WRITE_REG and got[2].status == Status.OK
    version, cores, _, _, array = struct.unpack("<8I", got[3].payload)[:5]
    assert (version, cores, array) == (VERSION, 0, 0)
    for tag, opcode in ((4, Opcode.JPEG_END), (5, Opcode.CONV_WORDS)):
        assert (got[tag].opcode, got[tag].status, got[tag].payload) == (
            Opcode.ERROR, Status.BAD_OPCODE, bytes([opcode]))
    assert struct.unpack("<2I", got[7].payload) == (W, 0)
    start_, end = struct.unpack("<2I", got[8].payload)
    assert start_ == 0 and end > 0          # opened, and no data request or reply since
    _metrics(clocks=clocks, resends=resends)
