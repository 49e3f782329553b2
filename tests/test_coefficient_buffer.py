"""The coefficient buffer: sparse zigzag writes in, dense natural-order blocks with their
quantisation values out; and the first hardware chain JPEG bytes -> 8x8 sample blocks."""

import random
import re

import numpy as np
import pytest
from amaranth.back import rtlil
from amaranth.sim import Simulator

from dlforge.rtl.jpeg.coefficient_buffer import CoefficientBuffer
from dlforge.rtl.jpeg.block_decoder import BlockDecoder
from dlforge.rtl.jpeg.idct_constants import ZIGZAG
from dlforge.sim.tb.entropy_stimulus import (dht_bodies, dqt_bodies, expected_samples, scan_bytes,
                                             scan_config)
from dlforge.sim.models.jpeg_parse import parse_headers
from jpeg_files import encode, photo


def dqt_body(tables):
    """A DQT segment body holding ``tables`` {id: (64 natural-order values)}."""
    body = bytearray()
    for tq, natural in tables.items():
        wide = max(natural) > 255
        body.append((int(wide) << 4) | tq)
        for k in range(64):
            v = int(natural[ZIGZAG[k]])
            body += v.to_bytes(2, "big") if wide else bytes([v])
    return bytes(body)


async def send(ctx, port, beats):
    for beat in beats:
        ctx.set(port.valid, 1)
        ctx.set(port.payload, beat)
        await ctx.tick().until(port.ready)
    ctx.set(port.valid, 0)


def sparse_blocks(rng, count):
    """``count`` random sparse blocks: [(component, natural-order coefficients)] and the
    decoder's beats for them."""
    blocks, beats = [], []
    for b in range(count):
        comp = b % 3
        zz = sorted(rng.choice(64, size=rng.integers(1, 12), replace=False).tolist())
        values = {z: int(rng.integers(-2048, 2048)) for z in zz}
        natural = np.zeros(64, dtype=np.int64)
        for z, v in values.items():
            natural[ZIGZAG[z]] = v
        blocks.append((comp, natural))
        for i, z in enumerate(zz):
            beats.append({"value": values[z], "zz": z, "component": comp, "write": 1,
                          "end": i == len(zz) - 1 and z == 63})
        if zz[-1] != 63:
            beats.append({"value": 0, "zz": 0, "component": comp, "write": 0, "end": 1})
    return blocks, beats


@pytest.mark.parametrize("lanes, small_ram, slots", [(1, "block", 2), (2, "lut", 4),
                                                     (4, "block", 8), (8, "block", 8),
                                                     (8, "lut", 2), (8, "block", 16)])
def test_sparse_writes_become_dense_blocks(lanes, small_ram, slots):
    rng = np.random.default_rng(lanes)
    quant = {0: rng.integers(1, 256, 64), 2: rng.integers(256, 65536, 64)}
    blocks, beats = sparse_blocks(rng, 12)
    dut = CoefficientBuffer(lanes, small_ram=small_ram, slots=slots)
    body = dqt_body(quant)
    got = []

    async def feeder(ctx):
        ctx.set(dut.quant_select, [0, 2, 0])
        await send(ctx, dut.dqt, [{"byte": b, "last": i == len(body) - 1} for i, b in enumerate(body)])
        await send(ctx, dut.i, beats)

    async def collector(ctx):
        r = random.Random(lanes)
        while len(got) < 12 * 64:
            ctx.set(dut.o.ready, r.random() < 0.7)
            _, _, valid, ready, payload = await ctx.tick().sample(dut.o.valid, dut.o.ready, dut.o.payload)
            if valid and ready:
                got.extend((int(p.coef), int(p.quant)) for p in payload)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(feeder, background=True)
    sim.add_testbench(collector)
    sim.run()
    got = np.array(got).reshape(12, 64, 2)
    for (comp, natural), out in zip(blocks, got):
        assert (out[:, 0] == natural).all()
        assert (out[:, 1] == quant[[0, 2, 0][comp]]).all()


@pytest.mark.parametrize("body, bad", [(dqt_body({1: list(range(1, 65))}), False),
                                       (b"\x25" + bytes(64), True),        # precision 2
                                       (b"\x00" + bytes(63), True)])       # one entry short
def test_dqt_errors_are_flagged(body, bad):
    dut = CoefficientBuffer(2)
    flags = []

    async def bench(ctx):
        await send(ctx, dut.dqt, [{"byte": b, "last": i == len(body) - 1} for i, b in enumerate(body)])
        await ctx.tick()
        flags.append(ctx.get(dut.table_error))
        ctx.set(dut.o.ready, 1)           # the output side is idle: nothing to drain

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert flags == [int(bad)]


@pytest.mark.parametrize("subsampling, lanes", [(2, 8), (0, 4)])
def test_jpeg_bytes_to_sample_blocks(subsampling, lanes):
    data = encode(photo("chelsea")[40:72, 60:100], quality=85, subsampling=subsampling)
    headers = parse_headers(data)
    want = expected_samples(data, headers)
    dut = ent = buf = idct = BlockDecoder(lanes)
    samples = []

    async def feeder(ctx):
        ctx.set(dut.quant_select, [c.tq for c in headers.components] + [0] * (3 - len(headers.components)))
        for body in dqt_bodies(data, headers):
            await send(ctx, buf.dqt, [{"byte": b, "last": i == len(body) - 1} for i, b in enumerate(body)])
        for body in dht_bodies(data, headers):
            await send(ctx, ent.dht, [{"byte": b, "last": i == len(body) - 1} for i, b in enumerate(body)])
        await send(ctx, ent.scan, [scan_config(headers)])
        body = scan_bytes(data, headers)
        await send(ctx, ent.i, [{"byte": b, "last": i == len(body) - 1} for i, b in enumerate(body)])

    async def collector(ctx):
        ctx.set(idct.o.ready, 1)
        ctx.set(ent.done.ready, 1)
        for _ in range(200_000):
            _, _, valid, payload = await ctx.tick().sample(idct.o.valid, idct.o.payload)
            if valid:
                samples.extend(int(v) for v in payload)
            if len(samples) == len(want):
                return

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(feeder, background=True)
    sim.add_testbench(collector)
    sim.run()
    assert len(samples) == len(want)
    assert (np.array(samples) == want).all()


@pytest.mark.parametrize("slots", [2, 8])
def test_the_ring_holds_its_slots_of_blocks_while_the_output_waits(slots):
    """With the IDCT stalled the decoder still writes ``slots`` whole blocks, and no more;
    they come out in order once it goes on."""
    rng = np.random.default_rng(slots)
    blocks, beats = sparse_blocks(rng, slots + 2)
    ends = [i for i, beat in enumerate(beats) if beat["end"]]
    dut = CoefficientBuffer(8, slots=slots)
    body = dqt_body({0: [1] * 64})
    taken, got = [], []

    async def bench(ctx):
        ctx.set(dut.quant_select, [0, 0, 0])
        await send(ctx, dut.dqt, [{"byte": b, "last": i == len(body) - 1} for i, b in enumerate(body)])
        ctx.set(dut.i.valid, 1)
        for beat in beats:                          # the output stalled: take what it will
            ctx.set(dut.i.payload, beat)
            for _ in range(4):
                _, _, ready = await ctx.tick().sample(dut.i.ready)
                if ready:
                    taken.append(beat)
                    break
            else:
                break
        ctx.set(dut.i.valid, 0)
        ctx.set(dut.o.ready, 1)
        for _ in range(20 * 64):
            _, _, valid, payload = await ctx.tick().sample(dut.o.valid, dut.o.payload)
            if valid:
                got.extend(int(p.coef) for p in payload)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert len(taken) == ends[slots - 1] + 1        # every beat of the first ``slots`` blocks
    assert len(got) == slots * 64
    for (_, natural), out in zip(blocks, np.array(got).reshape(slots, 64)):
        assert (out == natural).all()


@pytest.mark.parametrize("kwargs, words", [({"lanes": 3}, "lanes"), ({"slots": 3}, "slots"),
                                           ({"small_ram": "bram"}, "small_ram")])
def test_bad_parameters_are_refused(kwargs, words):
    with pytest.raises(ValueError, match=words):
        CoefficientBuffer(**kwargs)


@pytest.mark.parametrize("small_ram, style", [("block", "block"), ("lut", "distributed")])
def test_tables_and_slots_are_one_wide_memory_each(small_ram, style):
    """All lanes read one address, so each memory is lanes x 16 bits with a lane's write enable;
    its ram_style is what small_ram says."""
    text = rtlil.convert(CoefficientBuffer(8, small_ram=small_ram))
    found = re.findall(r'attribute \\ram_style "(\w+)"\n  attribute \\no_rw_check 1\n'
                       r'  memory width (\d+) size (\d+) \\(\w+)', text)
    assert sorted(found) == [(style, "128", "32", "quant"), (style, "128", "64", "slots")]
