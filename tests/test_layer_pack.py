"""The prepared layer stream: byte for byte the words of link_words.tile_words, and results
gathered back as scatter_results puts them, over tilings that exercise every part (several
output-channel blocks, input-channel slices, pools, residuals, groups, strides, 16 bits)."""

import numpy as np
import pytest

from dlforge.host.conv.layer_pack import LayerPack
from dlforge.host.conv.link_words import layer_words, scatter_results
from dlforge.host.conv.plan import LayerShape, plan_layer, tiles_for
from dlforge.host.conv.random_layer import random_tensors
from dlforge.rtl.conv.config import EngineConfig

SMALL = EngineConfig(rows=2, cols=2, simd=4, weight_depth=64, input_depth=256, psum_depth=32,
                     link_bytes=16)

LAYERS = [
    (LayerShape("pool_res", 6, 10, 9, 10, 3, 1, 1, relu=True, pool=True, residual=True), SMALL),
    (LayerShape("stride_groups", 8, 11, 7, 8, 3, 2, 1, groups=2), SMALL),
    (LayerShape("slices", 20, 5, 6, 5, 3, 1, 0, residual=True), SMALL),
    (LayerShape("whole_map_fc", 7, 4, 4, 9, 4, 1, 0), SMALL),
    (LayerShape("wide16", 5, 6, 6, 4, 1, 1, 0, residual=True),
     EngineConfig(rows=2, cols=2, simd=2, operand_bits=16, link_bytes=16)),
    (LayerShape("default", 64, 14, 14, 64, 3, 1, 1, relu=True, residual=True),
     EngineConfig()),
]


@pytest.mark.parametrize("layer,cfg", LAYERS, ids=[layer.name for layer, _ in LAYERS])
def test_the_same_bytes_and_results_as_tile_words(layer, cfg):
    rng = np.random.default_rng(len(layer.name))
    plan = plan_layer(layer, cfg)
    for th, tw, tic, order in {(plan.th, plan.tw, plan.tic, plan.order),
                               (min(2, layer.work_h), min(2, layer.work_w),
                                min(cfg.simd, layer.group_in), "pixel_outer")}:
        tiles = tiles_for(layer, cfg, th, tw, tic, order)
        t = random_tensors(layer, cfg, rng)
        pack = LayerPack(layer, cfg, tiles, t.w, t.bias, t.multiplier, t.shift)
        expected = b"".join(word.to_bytes(cfg.link_bytes, "little")
                            for words, _ in layer_words(layer, cfg, tiles, t) for word in words)
        assert pack.image_bytes(t.x, t.residual) == expected
        # results: random bytes, put in place by scatter_results and gathered by the pack
        got = rng.integers(-128, 128, pack.image_result_bytes * 2).astype(np.int8).tobytes()
        ys = pack.results(got, 2)
        for image in range(2):
            ref = np.zeros(ys.shape[1:], np.int8)
            start = image * pack.image_result_bytes
            for tile, count in zip(tiles, pack.result_words):
                if count:
                    words = [int.from_bytes(got[start + i:start + i + cfg.link_bytes],
                                            "little", signed=False)
                             for i in range(0, count * cfg.link_bytes, cfg.link_bytes)]
                    scatter_results(layer, cfg, tile, words, ref)
                    start += count * cfg.link_bytes
            assert np.array_equal(ys[image], ref)


def test_a_wrong_input_shape_is_refused():
    layer, cfg = LAYERS[0]
    t = random_tensors(layer, cfg, np.random.default_rng(0))
    pack = LayerPack(layer, cfg, plan_layer(layer, cfg).tiles(cfg), t.w, t.bias,
                     t.multiplier, t.shift)
    with pytest.raises(ValueError, match="input shape"):
        pack.image_bytes(t.x[:, :5], t.residual)
