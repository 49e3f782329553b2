"""The convolution engine's Verilog under cocotb: random layers bit-exact against the golden
model at several array shapes, with back-pressure; impossible descriptors flagged."""

from dataclasses import asdict

import pytest

from dlforge.gen.blocks import get_block
from dlforge.sim.tools.runner import run_cocotb

BLOCK = get_block("conv")


def _run(config, layers, sim=None, testcase=("run_layers", "bad_descriptors"), **params):
    full = BLOCK.full_params(config)
    engine = BLOCK.build(**full)
    result = run_cocotb(engine, name=BLOCK.module_name(full), test_module=BLOCK.testbench,
                        params=params | {"config": asdict(engine.cfg), "layers": layers},
                        sim=sim, testcase=testcase, quiet=True)
    assert result.passed, f"{result.failed} (log: {result.test_dir}/sim.log)"
    assert result.tests == (1 if isinstance(testcase, str) else len(testcase))
    return result.metrics


def _layer(name, c, h, w, oc, k, stride=1, padding=0, groups=1, **post):
    return {"name": name, "in_channels": c, "height": h, "width": w, "out_channels": oc,
            "kernel": k, "stride": stride, "padding": padding, "groups": groups} | post


RANDOM_LAYERS = [
    _layer("3x3", 5, 7, 6, 6, 3, padding=1, relu=True),
    _layer("stride2", 8, 9, 9, 5, 3, stride=2, padding=1),
    _layer("7x7", 3, 12, 11, 4, 7, stride=2, padding=3, relu=True),
    _layer("pointwise", 12, 5, 5, 9, 1),
    _layer("grouped", 8, 6, 6, 8, 3, padding=1, groups=2),
    _layer("depthwise", 4, 6, 6, 4, 3, padding=1, groups=4),
    _layer("pool", 6, 8, 8, 5, 3, padding=1, relu=True, pool=True),
    _layer("residual", 7, 6, 5, 6, 3, padding=1, relu=True, residual=True),
    _layer("fc", 20, 1, 1, 10, 1),
]


@pytest.mark.verilator
@pytest.mark.parametrize("shape", [(2, 2, 1), (4, 4, 4)])
def test_random_layers_bit_exact(shape):
    rows, cols, simd = shape
    m = _run({"rows": rows, "cols": cols, "simd": simd, "weight_depth": 64,
              "input_depth": 256, "psum_depth": 32, "link_bytes": 16},
             RANDOM_LAYERS, ready_prob=0.7, valid_prob=0.8, seed=sum(shape))
    assert len(m["layers"]) == len(RANDOM_LAYERS)
    assert all(row["tiles"] >= 1 for row in m["layers"])


@pytest.mark.verilator
def test_8x8x8_two_channel_blocks_and_slices():
    """The default engine (the ResNet-18 benchmark's build): layers with more output channels
    than PEs, several input-channel slices, the stem's shape in small."""
    layers = [_layer("two-blocks", 24, 6, 6, 70, 3, padding=1, relu=True, residual=True),
              _layer("stem", 3, 20, 20, 64, 7, stride=2, padding=3, relu=True),
              _layer("downsample", 40, 8, 8, 72, 1, stride=2),
              _layer("pool", 16, 6, 6, 8, 3, padding=1, pool=True)]
    m = _run({}, layers, seed=8,
             plans={"two-blocks": {"th": 3, "tw": 6, "tic": 8, "order": "pixel_outer"}})
    assert [row["tiles"] for row in m["layers"]][0] == 2 * 2 * 3     # blocks x pixels x slices
    # At full link rate the cycle model predicts the engine's own count closely.
    for row in m["layers"]:
        assert abs(row["cycles"] / row["predicted_cycles"] - 1) < 0.05, row


@pytest.mark.icarus
def test_icarus_subset():
    m = _run({"rows": 2, "cols": 2, "simd": 1, "weight_depth": 64, "input_depth": 256,
              "psum_depth": 32, "link_bytes": 16}, RANDOM_LAYERS[:1] + RANDOM_LAYERS[6:8],
             sim="icarus", ready_prob=0.8, seed=5)
    assert len(m["layers"]) == 3


@pytest.mark.verilator
def test_16bit_operands():
    m = _run({"rows": 2, "cols": 2, "simd": 2, "operand_bits": 16, "weight_depth": 64,
              "input_depth": 256, "psum_depth": 32, "link_bytes": 16},
             RANDOM_LAYERS[:3] + RANDOM_LAYERS[6:], ready_prob=0.8, seed=16)
    assert len(m["layers"]) == 6
