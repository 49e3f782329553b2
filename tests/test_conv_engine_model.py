"""The link formats end to end in Python: the host packs planned tiles, the engine's link-level
model computes them, the host scatters the results, and the layer equals the golden model."""

import random

import numpy as np
import pytest

from dlforge.host.conv.link_words import layer_words, scatter_results
from dlforge.host.conv.plan import LayerShape, ORDERS, PlanError, plan_layer, tiles_for
from dlforge.rtl.conv.config import EngineConfig
from dlforge.rtl.conv.descriptor import DescriptorError, pack_descriptor
from dlforge.sim.models.conv_engine_model import EngineError, EngineModel
from dlforge.host.conv.random_layer import expected_output, random_tensors


def run_layer(layer, cfg, tiles, t):
    model = EngineModel(cfg)
    parts = layer_words(layer, cfg, tiles, t)
    oh = layer.out_h // 2 if layer.pool else layer.out_h
    ow = layer.out_w // 2 if layer.pool else layer.out_w
    out = np.zeros((layer.out_channels, oh, ow), np.int8)
    for tile, (words, n) in zip(tiles, parts):
        got = model.run(words)
        assert len(got) == n
        if n:
            scatter_results(layer, cfg, tile, got, out)
    return out


CFGS = [EngineConfig(rows=2, cols=2, simd=1, weight_depth=64, input_depth=256, psum_depth=32,
                     link_bytes=16),
        EngineConfig(rows=4, cols=2, simd=4, weight_depth=64, input_depth=256, psum_depth=32,
                     link_bytes=32),
        EngineConfig(rows=2, cols=2, simd=2, operand_bits=16, weight_depth=64,
                     input_depth=256, psum_depth=32, link_bytes=16)]


@pytest.mark.parametrize("cfg", CFGS, ids=["2x2x1", "4x2x4", "2x2x2-16bit"])
def test_random_layers_and_tilings_equal_the_golden_model(cfg):
    rng = random.Random(cfg.rows * 100 + cfg.simd)
    nrng = np.random.default_rng(cfg.simd)
    done = 0
    while done < 12:
        k = rng.choice([1, 2, 3, 5, 7])
        groups = rng.choice([1, 1, 2])
        layer = LayerShape("l", groups * rng.randint(1, 9), rng.randint(k, 10),
                           rng.randint(k, 10), groups * rng.randint(1, 7), k,
                           rng.choice([1, 2]), rng.randrange(k), groups,
                           relu=rng.random() < 0.5, pool=rng.random() < 0.3,
                           residual=rng.random() < 0.3)
        try:
            plan = plan_layer(layer, cfg)
        except PlanError:
            continue
        # the planner's tiling, and a random other one
        th = rng.randint(1, layer.work_h) // (2 if layer.pool else 1) * (2 if layer.pool else 1)
        tw = rng.randint(1, layer.work_w) // (2 if layer.pool else 1) * (2 if layer.pool else 1)
        tic = rng.choice([t for t in range(cfg.simd, layer.group_in + 1, cfg.simd)]
                         or [layer.group_in])
        tilings = [plan.tiles(cfg)]
        try:
            tilings.append(tiles_for(layer, cfg, max(th, 2 if layer.pool else 1),
                                     max(tw, 2 if layer.pool else 1), tic, rng.choice(ORDERS)))
        except PlanError:
            pass
        t = random_tensors(layer, cfg, nrng)
        want = expected_output(layer, t)
        for tiles in tilings:
            assert np.array_equal(run_layer(layer, cfg, tiles, t), want), (layer, tiles[0])
        done += 1


def test_refused_descriptors():
    cfg = CFGS[0]
    good = dict(kh=3, kw=3, stride=1, vectors=1, ih=4, iw=4, y_off=0, x_off=0, th=2, tw=2,
                oc_count=1)
    for fields, code in [({"kh": 0}, DescriptorError.BAD_KERNEL),
                         ({"stride": 3}, DescriptorError.BAD_STRIDE),
                         ({"oc_count": 5}, DescriptorError.BAD_CHANNELS),
                         ({"th": 8, "tw": 8}, DescriptorError.PIXELS_TOO_BIG),
                         ({"magic": 1}, DescriptorError.BAD_MAGIC)]:
        with pytest.raises(EngineError) as info:
            EngineModel(cfg).run([pack_descriptor(**(good | fields))])
        assert info.value.code == code
