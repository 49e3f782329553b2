"""The accelerator top at its byte link (Verilator): JPEG files as frames in, images as frames
out, bit-exact to the golden model; registers and pings answered; corrupted frames refused
and resent; two cores."""

import pytest

from dlforge.rtl.top import AcceleratorTop
from dlforge.sim.runner import run_cocotb


def _run(cores=1, max_width=64, max_height=64, max_payload=256, **params):
    top = AcceleratorTop(cores, max_width, max_height, max_payload)
    result = run_cocotb(top, name=f"accel_c{cores}_w{max_width}_p{max_payload}",
                        test_module="dlforge.sim.tb_accel_top",
                        params=params | {"cores": cores, "max_width": max_width,
                                         "max_height": max_height, "max_payload": max_payload},
                        quiet=True)
    assert result.passed, f"{result.failed} (log: {result.test_dir}/sim.log)"
    return result.metrics


def test_files_through_the_link_with_back_pressure_and_corruption():
    m = _run(limit=12, ready_prob=0.8, corrupt=0.1, seed=4)
    assert m["files"] == 12 and m["ok"] >= 6 and m["resends"] >= 1


def test_bad_files_between_good_ones_on_two_cores():
    m = _run(cores=2, corpus="mixed", limit=12, seed=5)
    assert m["files"] == 12 and 0 < m["ok"] < 12


def test_invalid_parameters():
    with pytest.raises(ValueError, match="cores must be 0 to 16"):
        AcceleratorTop(cores=17)
    with pytest.raises(ValueError):
        AcceleratorTop(cores=-1)


def test_convolution_layers_over_the_link():
    conv = {"rows": 2, "cols": 2, "simd": 1, "weight_depth": 64, "input_depth": 256,
            "psum_depth": 32, "link_bytes": 16}
    from dlforge.rtl.conv.config import EngineConfig
    top = AcceleratorTop(1, 64, 64, 256, conv=EngineConfig(**conv))
    layers = [{"name": "a", "in_channels": 5, "height": 7, "width": 6, "out_channels": 6,
               "kernel": 3, "padding": 1, "relu": True},
              {"name": "b", "in_channels": 6, "height": 8, "width": 8, "out_channels": 5,
               "kernel": 3, "padding": 1, "pool": True, "residual": True}]
    result = run_cocotb(top, name="accel_c1_w64_p256_conv", test_module="dlforge.sim.tb_accel_top",
                        params={"conv": conv, "layers": layers, "max_payload": 256,
                                "max_width": 64, "max_height": 64, "ready_prob": 0.8,
                                "corrupt": 0.05, "seed": 6}, quiet=True)
    assert result.passed, f"{result.failed} (log: {result.test_dir}/sim.log)"
    assert result.metrics["layers"] == 2 and result.metrics["tiles"] > 2
