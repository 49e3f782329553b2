"""The walker: each tile's element sequence equals the definition (pixels in visiting order,
kernel rows, columns, vectors; zero padding outside the loaded region), one element per clock,
``cols`` clocks between pixel starts when dot products are shorter, under back-pressure and
with tiles back to back."""

import random

import pytest
from amaranth.sim import Simulator

from dlforge.rtl.conv.config import EngineConfig
from dlforge.rtl.conv.descriptor import pixel_order
from dlforge.rtl.conv.walker import START_LATENCY, Walker


def reference(d):
    """The elements of tile ``d``, straight from the definition."""
    vectors, kh, kw = d["vectors"], d["kh"], d["kw"]
    length = kh * kw * vectors
    elements = []
    for pixel, (y, x) in enumerate(pixel_order(d["th"], d["tw"], d["pool"])):
        for ky in range(kh):
            for kx in range(kw):
                for v in range(vectors):
                    k = (ky * kw + kx) * vectors + v
                    iy = y * d["stride"] + ky + d["y_off"]
                    ix = x * d["stride"] + kx + d["x_off"]
                    pad = not (0 <= iy < d["ih"] and 0 <= ix < d["iw"])
                    addr = 0 if pad else (iy * d["iw"] + ix) * vectors + v
                    elements.append({"addr": addr, "pad": int(pad), "k": k, "first": int(k == 0),
                                     "last": int(k == length - 1), "pixel": pixel})
    return elements


def random_tile(rng, cfg, *, max_pixels=12, kernel=None, vectors=None):
    """A tile of a random layer at a random position: its loaded region is the tile's
    receptive field clipped to the image, so padding falls inside the tile where it touches
    the image's border."""
    while True:
        kh = kernel or rng.randint(1, 7)
        kw = kernel or rng.choice([kh, rng.randint(1, 7)])
        stride = rng.choice([1, 2])
        pad_y, pad_x = rng.randint(0, kh - 1), rng.randint(0, kw - 1)
        height, width = rng.randint(1, 14), rng.randint(1, 14)
        out_h = (height + 2 * pad_y - kh) // stride + 1
        out_w = (width + 2 * pad_x - kw) // stride + 1
        pool = rng.random() < 0.3
        if out_h < 1 + pool or out_w < 1 + pool:
            continue
        v = vectors or rng.randint(1, 4)
        th = rng.randint(1, min(out_h, 5))
        tw = rng.randint(1, min(out_w, max(1, max_pixels // th)))
        if pool:
            th, tw = max(2, th & ~1), max(2, tw & ~1)
        ty, tx = rng.randint(0, out_h - th), rng.randint(0, out_w - tw)
        fields = {"kh": kh, "kw": kw, "stride": stride, "vectors": v, "th": th, "tw": tw,
                  "pool": int(pool)}
        for axis, t0, t, kern, pad, size in (("y", ty, th, kh, pad_y, height),
                                             ("x", tx, tw, kw, pad_x, width)):
            first = t0 * stride - pad                   # the window's first row, in the image
            lo, hi = max(0, first), min(size, (t0 + t - 1) * stride - pad + kern)
            fields["ih" if axis == "y" else "iw"] = hi - lo
            fields[f"{axis}_off"] = first - lo
        if v * fields["ih"] * fields["iw"] <= cfg.input_depth:
            return fields


def run_tiles(cfg, tiles, *, ready_prob=1.0, seed=0, start_delay=0):
    """Run ``tiles`` through a walker, each started on the first clock it is idle (plus
    ``start_delay``).  Returns per tile: start clock, [(clock, element)] accepted, the clocks
    with valid high, and the first clock busy was low again."""
    rng = random.Random(seed)
    dut = Walker(cfg)
    runs = []

    async def bench(ctx):
        clock = 0
        for d in tiles:
            ctx.set(dut.desc, {"magic": 0xC5, **d})
            for _ in range(start_delay):
                await ctx.tick()
                clock += 1
            assert not ctx.get(dut.busy)
            ctx.set(dut.start, 1)
            run = {"start": clock, "taken": [], "valid": []}
            runs.append(run)
            limit = clock + 50 + 40 * len(reference(d)) * cfg.cols
            while True:
                ready = rng.random() < ready_prob
                ctx.set(dut.o.ready, ready)
                valid, busy = ctx.get(dut.o.valid), ctx.get(dut.busy)
                if clock > run["start"] and not busy:
                    run["idle"] = clock
                    break
                assert clock == run["start"] or busy
                if valid:
                    run["valid"].append(clock)
                    if ready:
                        element = ctx.get(dut.o.payload)
                        run["taken"].append((clock, {name: int(getattr(element, name))
                                                     for name in reference(d)[0]}))
                await ctx.tick()
                ctx.set(dut.start, 0)
                clock += 1
                assert clock < limit, "the walker hangs"
        # The spacing owed after the last tile's last pixel still holds while idle.
        for _ in range(cfg.cols):
            assert not ctx.get(dut.o.valid)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return runs


def check_runs(cfg, tiles, runs, *, ready_always):
    last_taken = None               # (clock, L) of the latest accepted last element
    for d, run in zip(tiles, runs):
        expected = reference(d)
        assert [e for _, e in run["taken"]] == expected, d
        length = d["kh"] * d["kw"] * d["vectors"]
        taken = dict(run["taken"])
        assert run["idle"] == run["taken"][-1][0] + 1          # busy falls once all are taken
        for t in run["valid"]:
            # Nothing is offered in the cols - L clocks after a pixel's last element was taken.
            if last_taken is not None:
                assert t > last_taken[0] + max(0, cfg.cols - last_taken[1]), (d, t, last_taken)
            if t in taken and taken[t]["last"]:
                last_taken = (t, length)
        if ready_always:
            # Exactly one element per clock, pixels max(L, cols) clocks apart.
            starts = [t for t, e in run["taken"] if e["first"]]
            period = max(length, cfg.cols)
            assert starts[0] >= run["start"] + START_LATENCY
            assert all(b - a == period for a, b in zip(starts, starts[1:])), d
            assert len(run["valid"]) == len(run["taken"]) == len(expected)
            for t, e in run["taken"]:
                assert t - starts[0] == e["pixel"] * period + e["k"]


CFG = EngineConfig(rows=2, cols=4, simd=4, weight_depth=256, input_depth=1024, psum_depth=64,
                   link_bytes=16)


@pytest.mark.parametrize("seed", range(4))
def test_random_tiles_back_to_back(seed):
    rng = random.Random(seed)
    tiles = [random_tile(rng, CFG) for _ in range(8)]
    runs = run_tiles(CFG, tiles, seed=seed)
    check_runs(CFG, tiles, runs, ready_always=True)
    assert all(b["start"] == a["idle"] for a, b in zip(runs, runs[1:]))


@pytest.mark.parametrize("seed", range(3))
def test_random_tiles_under_back_pressure(seed):
    rng = random.Random(100 + seed)
    tiles = [random_tile(rng, CFG) for _ in range(6)]
    check_runs(CFG, tiles, run_tiles(CFG, tiles, ready_prob=0.6, seed=seed),
               ready_always=False)


@pytest.mark.parametrize("vectors", [1, 2, 3])
@pytest.mark.parametrize("ready_prob", [1.0, 0.5])
def test_short_dot_products_keep_pixels_cols_apart(vectors, ready_prob):
    # C = 8 with 1x1 kernels: L = 1..3, 5..7 clocks of bubbles after each pixel.
    cfg = EngineConfig(rows=2, cols=8, simd=4, weight_depth=64, input_depth=512,
                       psum_depth=64, link_bytes=16)
    rng = random.Random(vectors)
    tiles = [random_tile(rng, cfg, kernel=1, vectors=vectors) for _ in range(3)]
    tiles.append(random_tile(rng, cfg, kernel=3, vectors=1))     # L = 9 >= C after L < C
    tiles.append(random_tile(rng, cfg, kernel=1, vectors=vectors))
    runs = run_tiles(cfg, tiles, ready_prob=ready_prob, seed=vectors)
    check_runs(cfg, tiles, runs, ready_always=ready_prob == 1.0)


def test_one_pixel_tiles_extreme_offsets_and_idle_clocks_before_start():
    # Offsets at both ends of their 4-bit fields (the engine refuses positive ones, but the
    # walker's sequence is defined for them too), and a start a few clocks after idle.
    cfg = EngineConfig(rows=2, cols=1, simd=4, weight_depth=64, input_depth=256,
                       psum_depth=16, link_bytes=16)
    tile = {"kh": 3, "kw": 3, "stride": 2, "vectors": 1, "th": 2, "tw": 2, "pool": 1,
            "ih": 4, "iw": 4, "y_off": -1, "x_off": -1}
    tiles = [tile | {"kh": 1, "kw": 1, "th": 1, "tw": 1, "pool": 0, "ih": 1, "iw": 1,
                     "y_off": 0, "x_off": 0},
             tile,
             tile | {"kw": 2, "vectors": 2, "th": 6, "pool": 0, "ih": 5, "iw": 12,
                     "y_off": -8, "x_off": 7},
             tile | {"vectors": 2, "th": 3, "tw": 5, "pool": 0, "ih": 6, "iw": 5,
                     "y_off": 5, "x_off": -8}]
    runs = run_tiles(cfg, tiles, start_delay=3)
    check_runs(cfg, tiles, runs, ready_always=True)
