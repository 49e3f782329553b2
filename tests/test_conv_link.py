"""The engine's side of the link: link beats regrouped into engine words, and result words
sent back as reply frames that never span two tiles, with the engine never held up while the
link takes what the replier offers."""

import random

import pytest
from amaranth.sim import Simulator

from dlforge.rtl.link.conv_link import ConvReplier, WordRegroup
from dlforge.rtl.link.protocol import Opcode

# (engine word bytes, link bytes): equal, a beat of several words, a word of several beats
SHAPES = [(32, 32), (8, 32), (32, 4), (8, 1)]


def _replier_run(word_bytes, link_bytes, tiles, max_payload, ready_prob, seed):
    """Feed ``tiles`` (lists of word values) as fast as the replier takes them; return the
    reply frames (tag, seq, payload bytes) and the clocks a word waited while offered."""
    rng = random.Random(seed)
    dut = ConvReplier(word_bytes, max_payload, link_bytes)
    frames, current = [], {}
    stalls = []
    words = [(value, n == len(tile) - 1) for tile in tiles for n, value in enumerate(tile)]
    total = sum(len(t) for t in tiles) * word_bytes

    async def engine(ctx):
        ctx.set(dut.tag, 0x1234)
        waited = 0
        for value, last in words:
            ctx.set(dut.i.valid, 1)
            ctx.set(dut.i.payload, {"data": value, "last": last})
            while True:
                _, _, ready = await ctx.tick().sample(dut.i.ready)
                if ready:
                    break
                waited += 1
        ctx.set(dut.i.valid, 0)
        stalls.append(waited)

    async def link(ctx):
        while True:
            ctx.set(dut.header.ready, rng.random() < ready_prob)
            ctx.set(dut.payload.ready, rng.random() < ready_prob)
            _, _, hv, hr, header, pv, pr, beat = await ctx.tick().sample(
                dut.header.valid, dut.header.ready, dut.header.payload,
                dut.payload.valid, dut.payload.ready, dut.payload.payload)
            if hv and hr:
                assert not current, "a header before the last frame's beats"
                current.update(tag=int(header.tag), seq=int(header.seq),
                               length=int(header.length), data=bytearray())
                assert header.opcode == Opcode.CONV_WORDS
            if pv and pr:
                assert current, "a payload beat without a header"
                current["data"] += int(beat).to_bytes(link_bytes, "little")
            if current and len(current["data"]) >= current["length"]:
                frames.append((current["tag"], current["seq"],
                               bytes(current["data"][:current["length"]])))
                current.clear()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(engine)
    sim.add_testbench(link, background=True)
    sim.run_until(1e-8 * (40 * total // min(word_bytes, link_bytes) + 2000))
    assert stalls, "the engine's words were not all taken"
    return frames, stalls[0]


@pytest.mark.parametrize("word_bytes,link_bytes", SHAPES)
def test_frames_follow_tiles_and_carry_every_word(word_bytes, link_bytes):
    rng = random.Random(word_bytes * 100 + link_bytes)
    max_payload = 4 * max(word_bytes, link_bytes)
    per_frame = max_payload // word_bytes
    tiles = [[rng.getrandbits(8 * word_bytes) for _ in range(n)]
             for n in (1, per_frame, per_frame + 1, 3 * per_frame - 1, 2)]
    frames, _ = _replier_run(word_bytes, link_bytes, tiles, max_payload, 0.6, seed=3)
    # frames split each tile at max_payload bytes and end at its last word
    expected = []
    for tile in tiles:
        raw = b"".join(v.to_bytes(word_bytes, "little") for v in tile)
        expected += [raw[k:k + max_payload] for k in range(0, len(raw), max_payload)]
    assert [payload for _, _, payload in frames] == expected
    assert [seq for _, seq, _ in frames] == list(range(len(expected)))
    assert {tag for tag, _, _ in frames} == {0x1234}


@pytest.mark.parametrize("word_bytes,link_bytes", [(32, 32), (8, 32)])
def test_the_engine_never_waits_for_a_frame_being_sent(word_bytes, link_bytes):
    """With the link taking every beat, results stream through: one frame is sent while the
    next fills (a single frame buffer held the engine for every frame it sent)."""
    rng = random.Random(9)
    max_payload = 16 * max(word_bytes, link_bytes)
    tiles = [[rng.getrandbits(8 * word_bytes) for _ in range(n)] for n in (40, 100, 7, 64)]
    frames, waited = _replier_run(word_bytes, link_bytes, tiles, max_payload, 1.0, seed=4)
    assert b"".join(p for _, _, p in frames) == b"".join(
        v.to_bytes(word_bytes, "little") for tile in tiles for v in tile)
    assert waited == 0


@pytest.mark.parametrize("link_bytes,word_bytes", [(32, 8), (4, 32), (1, 8)])
def test_regroup_turns_beats_into_words(link_bytes, word_bytes):
    rng = random.Random(link_bytes + word_bytes)
    raw = rng.randbytes(word_bytes * 24)
    beats = [int.from_bytes(raw[k:k + link_bytes], "little")
             for k in range(0, len(raw), link_bytes)]
    dut = WordRegroup(link_bytes, word_bytes)
    got = []

    async def feed(ctx):
        if link_bytes > word_bytes:
            ctx.set(dut.words, link_bytes // word_bytes)
        for beat in beats:
            ctx.set(dut.i.valid, 1)
            ctx.set(dut.i.payload, beat)
            await ctx.tick().until(dut.i.ready)
        ctx.set(dut.i.valid, 0)

    async def take(ctx):
        while True:
            ctx.set(dut.o.ready, rng.random() < 0.7)
            _, _, valid, ready, word = await ctx.tick().sample(dut.o.valid, dut.o.ready,
                                                              dut.o.payload)
            if valid and ready:
                got.append(int(word))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(feed)
    sim.add_testbench(take, background=True)
    sim.run_until(1e-8 * (10 * len(raw) + 200))
    assert b"".join(v.to_bytes(word_bytes, "little") for v in got) == raw
