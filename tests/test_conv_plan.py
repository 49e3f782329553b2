"""The tiling planner: as good as brute force on small layers, tiles that cover every output
once and fit the buffers, clear errors for what the engine cannot run."""

import itertools
import random

import pytest

from dlforge.host.conv.plan import (LayerShape, PlanError, brute_force_plan, plan_layer,
                                    predict_cycles, tiles_for, utilization)
from dlforge.rtl.conv.config import EngineConfig

SMALL = EngineConfig(rows=2, cols=2, simd=4, weight_depth=40, input_depth=200, psum_depth=24,
                     link_bytes=16, max_reduction=4096)


def _random_layers(count, seed):
    rng = random.Random(seed)
    for n in range(count):
        k = rng.choice([1, 2, 3, 5])
        stride = rng.choice([1, 2])
        padding = rng.randrange(k)
        groups = rng.choice([1, 1, 2])
        yield LayerShape(f"l{n}", in_channels=groups * rng.randint(1, 10),
                         height=rng.randint(k, 9), width=rng.randint(k, 9),
                         out_channels=groups * rng.randint(1, 9), kernel=k, stride=stride,
                         padding=padding, groups=groups, relu=rng.random() < 0.5,
                         residual=rng.random() < 0.3, pool=rng.random() < 0.3)


@pytest.mark.parametrize("seed", range(8))
def test_planner_matches_brute_force(seed):
    checked = 0
    for layer in _random_layers(6, seed):
        try:
            brute = brute_force_plan(layer, SMALL)
        except PlanError:
            with pytest.raises(PlanError):
                plan_layer(layer, SMALL)
            continue
        plan = plan_layer(layer, SMALL)
        assert plan.cycles == brute.cycles, (layer, plan, brute)
        checked += 1
    assert checked >= 3


def test_tiles_cover_every_output_and_reduction_once():
    layer = LayerShape("l", in_channels=20, height=9, width=7, out_channels=11, kernel=3,
                       padding=1, groups=1)
    cfg = EngineConfig(rows=2, cols=2, simd=4, weight_depth=100, input_depth=1000,
                       psum_depth=100, link_bytes=16)
    for th, tw, tic, order in itertools.product([1, 2, 4], [3, 7], [4, 8, 20],
                                                ["oc_outer", "pixel_outer"]):
        seen = {}
        for t in tiles_for(layer, cfg, th, tw, tic, order):
            for oc, y, x, ic in itertools.product(range(t.oc0, t.oc0 + t.oc_count),
                                                  range(t.oy0, t.oy0 + t.th),
                                                  range(t.ox0, t.ox0 + t.tw),
                                                  range(t.ic0, t.ic0 + t.tic)):
                assert (oc, y, x, ic) not in seen
                seen[oc, y, x, ic] = t
            assert t.oc_count <= cfg.channels
        assert len(seen) == layer.out_channels * layer.out_h * layer.out_w * layer.in_channels
        # Slices of one output block run in order, first to last, without another tile between.
        by_block = {}
        for n, t in enumerate(tiles_for(layer, cfg, th, tw, tic, order)):
            by_block.setdefault((t.group, t.oc0, t.oy0, t.ox0), []).append((n, t))
        for runs in by_block.values():
            assert [n for n, _ in runs] == list(range(runs[0][0], runs[0][0] + len(runs)))
            assert runs[0][1].first and runs[-1][1].last


def test_reused_data_is_not_loaded_again():
    layer = LayerShape("l", in_channels=8, height=8, width=8, out_channels=12, kernel=3, padding=1)
    cfg = EngineConfig(rows=2, cols=2, simd=4, weight_depth=100, input_depth=1000,
                       psum_depth=100, link_bytes=16)
    tiles = tiles_for(layer, cfg, 4, 8, 8, "oc_outer")
    # oc outer with one slice: each block's weights load once, inputs for every tile
    assert sum(t.load_weights for t in tiles) == 3
    assert all(t.load_inputs for t in tiles)
    tiles = tiles_for(layer, cfg, 8, 8, 8, "pixel_outer")
    assert sum(t.load_inputs for t in tiles) == 1 and sum(t.load_weights for t in tiles) == 3
    assert predict_cycles(layer, cfg, tiles) > 0


@pytest.mark.parametrize("layer, message", [
    (LayerShape("big-kernel", 8, 9, 9, 8, kernel=9), "kernel"),
    (LayerShape("stride3", 8, 9, 9, 8, kernel=3, stride=3), "stride"),
    (LayerShape("groups", 6, 9, 9, 8, kernel=3, groups=4), "groups"),
    (LayerShape("zero", 0, 9, 9, 8, kernel=3), "at least 1"),
    (LayerShape("too-small", 8, 2, 2, 8, kernel=3), "does not fit"),
    (LayerShape("padding", 8, 9, 9, 8, kernel=3, padding=3), "padding"),
    (LayerShape("reduction", 1024, 9, 9, 8, kernel=3), "max_reduction"),
    (LayerShape("pool", 8, 3, 3, 8, kernel=3, pool=True), "pool"),
])
def test_layers_the_engine_cannot_run_are_refused(layer, message):
    with pytest.raises(PlanError, match=message):
        plan_layer(layer, SMALL)


def test_tiles_that_do_not_fit_are_refused():
    layer = LayerShape("l", in_channels=64, height=20, width=20, out_channels=8, kernel=3)
    with pytest.raises(PlanError, match="weight buffer"):
        tiles_for(layer, SMALL, 2, 2, 64, "oc_outer")       # 9 * 16 words > 40
    with pytest.raises(PlanError, match="input buffer"):
        tiles_for(layer, SMALL, 18, 18, 4, "oc_outer")
    with pytest.raises(PlanError, match="partial-sum"):
        tiles_for(layer, SMALL, 5, 5, 4, "oc_outer")
    with pytest.raises(PlanError, match="multiples of simd"):
        tiles_for(layer, SMALL, 2, 2, 6, "oc_outer")
    with pytest.raises(PlanError, match="larger than the layer"):
        tiles_for(layer, SMALL, 30, 2, 4, "oc_outer")
    with pytest.raises(PlanError, match="no tiling fits"):
        plan_layer(layer, EngineConfig(rows=2, cols=2, simd=4, weight_depth=4, link_bytes=16))


def test_resnet18_predicted_utilisation_on_8x8x8():
    from dlforge.host.conv.networks import resnet18_layers

    cfg = EngineConfig()
    layers = resnet18_layers()
    u = [utilization(layer, cfg, plan_layer(layer, cfg).cycles) for layer in layers[1:]]
    assert len(u) == 19
    assert sum(u) / len(u) >= 0.95 and min(u) >= 0.85
