"""cocotb testbench of the AXI export (``dlforge export-axi``) with cocotbext-axi's models, as
an XDMA shell would drive it: request frames from an AxiStreamSource on ``s_axis``, replies
into an AxiStreamSink on ``m_axis`` (every TLAST-delimited packet must be exactly one frame),
both with random pauses, and the registers through an AxiLiteMaster on ``s_axil``.  Decoder
cores and the engine are both inside: JPEG files for every core interleaved frame by frame,
images bit-exact to the golden model, and a convolution layer bit-exact to its golden model.

Parameters (``DLFORGE_TB_PARAMS``): link_bytes, cores, max_width, max_height, max_payload,
conv (EngineConfig fields), limit, seed.  Metrics: files, ok, frames, tiles.
"""

import json
import os
import random
import warnings
from pathlib import Path

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge, Timer
from cocotbext.axi import (AxiLiteBus, AxiLiteMaster, AxiStreamBus, AxiStreamFrame,
                           AxiStreamSink, AxiStreamSource)

from dlforge.rtl.jpeg.status import JpegStatus as S
from dlforge.rtl.link.protocol import (Opcode, Register, VERSION, array_word, encode_frame,
                                       file_requests)
from dlforge.host.link.frame_parser import FrameDecoder
from dlforge.sim.corpus import jpeg_corpus
from dlforge.sim.models.jpeg_model import JpegDecodeError, decode

# cocotbext-axi 0.1 still calls cocotb's setimmediatevalue, deprecated in cocotb 2: waived
# for that package alone (warnings are errors in the testbenches).
warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"cocotbext\.")

PARAMS = json.loads(os.environ.get("DLFORGE_TB_PARAMS", "{}"))
W = int(PARAMS.get("link_bytes", 32))


def _pauses(rng, p):
    while True:
        yield rng.random() < p


async def _setup(dut, rng):
    cocotb.start_soon(Clock(dut.aclk, 10, unit="ns").start())
    # (Amaranth flattens an interface's members with "__": s_axis__tdata)
    def bus(kind, name):
        return kind.from_prefix(dut, name, bus_separator="__")
    source = AxiStreamSource(bus(AxiStreamBus, "s_axis"), dut.aclk, dut.aresetn,
                             reset_active_level=False)
    sink = AxiStreamSink(bus(AxiStreamBus, "m_axis"), dut.aclk, dut.aresetn,
                         reset_active_level=False)
    lite = AxiLiteMaster(bus(AxiLiteBus, "s_axil"), dut.aclk, dut.aresetn,
                         reset_active_level=False)
    source.set_pause_generator(_pauses(rng, 0.3))
    sink.set_pause_generator(_pauses(rng, 0.3))
    dut.aresetn.value = 0
    for _ in range(4):
        await RisingEdge(dut.aclk)
    dut.aresetn.value = 1
    for _ in range(2):
        await RisingEdge(dut.aclk)
    return source, sink, lite


async def _replies(sink, until, budget_ns):
    """Reply frames until ``until(frames)``; each AXI packet must hold exactly one frame."""
    decoder = FrameDecoder(max_length=1 << 20, link_bytes=W)
    frames = []
    waited = 0
    while not until(frames):
        if sink.empty():
            await Timer(1000, unit="ns")
            waited += 1000
            assert waited < budget_ns, f"{len(frames)} frames, then nothing"
            continue
        packet = sink.recv_nowait()
        data = bytes(packet.tdata)
        assert len(data) % W == 0, "a packet that is not whole beats"
        got = decoder.feed(data)
        assert len(got) == 1 and not decoder.buffer, "TLAST is not at a frame's end"
        frames += got
    assert decoder.bad_headers == decoder.bad_payloads == 0
    return frames


@cocotb.test()
async def files_layers_and_registers(dut):
    rng = random.Random(PARAMS.get("seed", 5))
    source, sink, lite = await _setup(dut, rng)
    cores = int(PARAMS["cores"])
    max_payload = int(PARAMS.get("max_payload", 256))

    # Registers over AXI4-Lite
    async def reg(n):
        return int.from_bytes((await lite.read(4 * n, 4)).data, "little")
    assert await reg(Register.VERSION) == VERSION
    assert await reg(Register.CORES) == cores
    assert await reg(Register.LINK_WIDTH) == W

    # JPEG files: file n on core n % cores, the cores' frames interleaved
    files = [f.data for f in jpeg_corpus.baseline_corpus("quick")[:int(PARAMS.get("limit", 6))]]
    per_core = [[] for _ in range(cores)]
    for n, data in enumerate(files):
        per_core[n % cores] += file_requests(100 + n, data, max_payload, link_bytes=W,
                                             core=n % cores)
    requests = [encode_frame(Opcode.PING, 1, b"axi", link_bytes=W)]
    while any(per_core):
        for frames in per_core:
            if frames:
                requests.append(frames.pop(0))
    for frame in requests:                  # each frame one AXI packet, as a DMA write
        await source.send(AxiStreamFrame(frame))
    replies = await _replies(sink, lambda fr: sum(f.opcode == Opcode.JPEG_END for f in fr)
                             == len(files), 200_000_000)
    assert next(f for f in replies if f.tag == 1).payload == b"axi"
    ok = 0
    limits = {"max_width": int(PARAMS["max_width"]), "max_height": int(PARAMS["max_height"])}
    for n, data in enumerate(files):
        mine = [f for f in replies if f.tag == 100 + n]
        status = S(mine[-1].payload[0])
        pixels = b"".join(f.payload for f in mine[:-1])
        try:
            want = decode(data, "fancy", **limits).pixels
        except JpegDecodeError as exc:
            assert status == exc.status, (n, status, exc.status)
            continue
        assert status == S.OK and pixels == want.tobytes(), f"file {n} differs"
        ok += 1

    # A convolution layer on the engine
    from dlforge.host.conv.link_words import layer_words, scatter_results
    from dlforge.host.conv.plan import LayerShape, plan_layer
    from dlforge.rtl.conv.config import EngineConfig
    from dlforge.host.conv.random_layer import expected_output, random_tensors
    cfg = EngineConfig(**PARAMS["conv"])
    assert await reg(Register.ARRAY) == array_word(cfg)
    layer = LayerShape(name="l", in_channels=5, height=6, width=7, out_channels=6, kernel=3,
                       padding=1, relu=True)
    tiles = plan_layer(layer, cfg).tiles(cfg)
    t = random_tensors(layer, cfg, np.random.default_rng(3))
    parts = layer_words(layer, cfg, tiles, t)
    lb = cfg.link_bytes
    raw = b"".join(w.to_bytes(lb, "little") for words, _ in parts for w in words)
    step = max_payload // lb * lb
    for k in range(0, len(raw), step):
        await source.send(AxiStreamFrame(encode_frame(Opcode.CONV_WORDS, 7, raw[k:k + step],
                                                      link_bytes=W)))
    n_words = sum(count for _, count in parts)
    results = await _replies(sink, lambda fr: sum(len(f.payload) for f in fr) >= n_words * lb,
                             200_000_000)
    got = b"".join(f.payload for f in results)
    words = [int.from_bytes(got[i:i + lb], "little") for i in range(0, len(got), lb)]
    out = np.zeros((layer.out_channels, layer.out_h, layer.out_w), np.int8)
    position = 0
    for tile, (_, count) in zip(tiles, parts):
        if count:
            scatter_results(layer, cfg, tile, words[position:position + count], out)
            position += count
    assert np.array_equal(out, expected_output(layer, t)), "the layer differs"
    assert await reg(Register.CONV_TILES) == len(tiles)
    Path("metrics.json").write_text(json.dumps({"files": len(files), "ok": ok,
                                                "frames": len(replies) + len(results),
                                                "tiles": len(tiles)}))
