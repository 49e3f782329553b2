"""PipeStage, SkidBuffer and Narrow: the stream plumbing keeps order, loses nothing, runs at
full rate."""

import pytest
from amaranth import unsigned

from dlforge.rtl.stream_pipe import Narrow, PipeStage, SkidBuffer
from amaranth_streams import run_stream


def test_pipe_stage_applies_function_under_backpressure():
    dut = PipeStage(unsigned(8), unsigned(9), fn=lambda m, p: p + 1)
    beats = list(range(200))
    got, _ = run_stream(dut, beats, len(beats), valid_prob=0.7, ready_prob=0.5)
    assert [int(g) for g in got] == [b + 1 for b in beats]


def test_pipe_stage_full_rate():
    dut = PipeStage(unsigned(8), unsigned(8))
    got, when = run_stream(dut, list(range(50)), 50)
    assert [int(g) for g in got] == list(range(50))
    assert when == list(range(when[0], when[0] + 50))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_skid_buffer_keeps_order_under_backpressure(seed):
    dut = SkidBuffer(unsigned(8))
    beats = [(7 * b) % 256 for b in range(300)]
    got, _ = run_stream(dut, beats, len(beats), valid_prob=0.7, ready_prob=0.5, seed=seed)
    assert [int(g) for g in got] == beats


def test_skid_buffer_full_rate():
    dut = SkidBuffer(unsigned(8))
    got, when = run_stream(dut, list(range(50)), 50)
    assert [int(g) for g in got] == list(range(50))
    assert when == list(range(when[0], when[0] + 50))


def test_skid_buffer_ready_is_registered():
    """``i.ready`` does not follow ``o.ready`` in the same clock: the chain is cut."""
    from amaranth.sim import Simulator
    dut = SkidBuffer(unsigned(8))
    seen = []

    async def bench(ctx):
        ctx.set(dut.i.valid, 1)
        for cycle in range(40):
            ctx.set(dut.i.payload, cycle)
            before = ctx.get(dut.i.ready)
            ctx.set(dut.o.ready, cycle % 3 == 0)
            seen.append(ctx.get(dut.i.ready) == before)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert all(seen)


@pytest.mark.parametrize("out_lanes", [1, 2, 4])
def test_narrow_order_and_rate(out_lanes):
    dut = Narrow(unsigned(8), 8, out_lanes)
    rows = [[(r * 8 + k) % 256 for k in range(8)] for r in range(30)]
    got, when = run_stream(dut, rows, 30 * 8 // out_lanes)
    assert [v for g in got for v in g] == [v for r in rows for v in r]
    assert when == list(range(when[0], when[0] + len(when)))          # no bubbles


def test_narrow_backpressure():
    dut = Narrow(unsigned(8), 8, 2)
    rows = [[(r * 8 + k) % 256 for k in range(8)] for r in range(40)]
    got, _ = run_stream(dut, rows, 160, valid_prob=0.6, ready_prob=0.6, seed=5)
    assert [v for g in got for v in g] == [v for r in rows for v in r]


def test_narrow_rejects_uneven_split():
    with pytest.raises(ValueError):
        Narrow(unsigned(8), 8, 3)


def test_narrow_equal_widths_is_a_wire():
    from amaranth.hdl import Fragment
    fragment = Fragment.get(Narrow(unsigned(8), 8, 8), None)
    assert "sync" not in fragment.domains and not fragment.subfragments


def test_bytes_out_of_one_byte_is_a_wire():
    from amaranth.sim import Simulator
    from dlforge.rtl.stream_pipe import BytesOut
    dut = BytesOut(1)

    async def bench(ctx):
        ctx.set(dut.i.payload, {"data": 0xA5, "keep": 1, "last": 1})
        ctx.set(dut.i.valid, 1)
        ctx.set(dut.o.ready, 1)
        assert (ctx.get(dut.o.valid), ctx.get(dut.i.ready)) == (1, 1)
        assert (ctx.get(dut.o.payload.byte), ctx.get(dut.o.payload.last)) == (0xA5, 1)

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("width", [2, 4])
def test_bytes_out_keeps_every_real_byte(width):
    import random
    from dlforge.rtl.stream_pipe import BytesOut
    rng = random.Random(width)
    dut = BytesOut(width)
    packets = [bytes(rng.randrange(256) for _ in range(n)) for n in (1, 2, 3, 4, 5, 9, 17)]
    beats, want = [], []
    for p in packets:
        chunks = [p[k:k + width] for k in range(0, len(p), width)]
        for n, c in enumerate(chunks):
            beats.append({"data": int.from_bytes(c, "little"), "keep": len(c),
                          "last": n == len(chunks) - 1})
        want += [(b, k == len(p) - 1) for k, b in enumerate(p)]
    got, when = run_stream(dut, beats, len(want), valid_prob=0.8, ready_prob=0.7, seed=width)
    assert [(int(g.byte), bool(g.last)) for g in got] == want
    full, when = run_stream(dut, beats, len(want))
    assert when[-1] - when[0] == len(want) - 1        # one byte every clock
