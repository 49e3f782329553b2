"""The accelerator top at its byte link (Verilator): JPEG files as frames in, images as frames
out, bit-exact to the golden model; registers and pings answered; corrupted frames refused
and resent; two cores."""

import pytest

from dlforge.rtl.top import AcceleratorTop
from dlforge.sim.tools.runner import run_cocotb


def _run(cores=1, max_width=64, max_height=64, max_payload=256, link_bytes=1, engine=None,
         contexts=1, **params):
    top = AcceleratorTop(cores, max_width, max_height, max_payload, link_bytes=link_bytes,
                         input_fifo_bytes=max(64, 4 * link_bytes), conv=engine,
                         contexts=contexts)
    suffix = ("_conv" if engine else "") + (f"_x{contexts}" if contexts > 1 else "")
    result = run_cocotb(top, name=f"accel_c{cores}_w{max_width}_p{max_payload}_l{link_bytes}"
                                  f"{suffix}",
                        test_module="dlforge.sim.tb.accel_top",
                        params=params | {"cores": top.n_cores, "max_width": max_width,
                                         "max_height": max_height, "max_payload": max_payload,
                                         "link_bytes": link_bytes},
                        quiet=True)
    assert result.passed, f"{result.failed} (log: {result.test_dir}/sim.log)"
    return result.metrics


@pytest.mark.verilator
def test_files_through_the_link_with_back_pressure_and_corruption():
    m = _run(limit=12, ready_prob=0.8, corrupt=0.1, seed=4)
    assert m["files"] == 12 and m["ok"] >= 6 and m["resends"] >= 1


@pytest.mark.verilator
def test_bad_files_between_good_ones_on_two_cores():
    m = _run(cores=2, corpus="mixed", limit=12, seed=5)
    assert m["files"] == 12 and 0 < m["ok"] < 12


@pytest.mark.verilator
def test_a_core_with_two_files_at_once_behind_the_link():
    """One C-slowed core, two lanes: files dealt to both, malformed ones among them, frames
    corrupted on the way and resent, back-pressure on the output; every status right and
    every good image bit-exact."""
    m = _run(cores=1, contexts=2, corpus="mixed", limit=12, seed=6, link_bytes=4,
             ready_prob=0.7, corrupt=0.1)
    assert m["files"] == 12 and 0 < m["ok"] < 12 and m["resends"] >= 1


LAYERS = [{"name": "a", "in_channels": 5, "height": 7, "width": 6, "out_channels": 6,
           "kernel": 3, "padding": 1, "relu": True},
          {"name": "b", "in_channels": 6, "height": 8, "width": 8, "out_channels": 5,
           "kernel": 3, "padding": 1, "pool": True, "residual": True}]
SMALL_ENGINE = {"rows": 2, "cols": 2, "simd": 1, "weight_depth": 64, "input_depth": 256,
                "psum_depth": 32, "link_bytes": 16}


# Three cores at the default board's width; two at the narrowest and widest (each build of
# a multi-core top costs minutes of Verilator and gcc, and the third core adds no new path).
@pytest.mark.verilator
@pytest.mark.parametrize("link_bytes, cores", [(4, 2), (32, 3), (64, 2)])
def test_wide_link_several_cores_and_the_engine_with_corruption(link_bytes, cores):
    """W bytes a clock: files of several cores interleaved frame by frame, then layers on the
    engine (its 16-byte words packed from 4-byte beats, taken from 32-byte beats as they are,
    split from 64-byte beats); payload bytes flipped on the way (refused and resent),
    back-pressure on the output; a frame lost in the middle of a file (refused as a GAP)."""
    from dlforge.rtl.conv.config import EngineConfig
    m = _run(cores=cores, corpus="mixed", limit=12, seed=7, link_bytes=link_bytes,
             ready_prob=0.7, corrupt=0.1, conv=SMALL_ENGINE, layers=LAYERS, decode=True,
             gap=True, engine=EngineConfig(**SMALL_ENGINE))
    assert m["files"] == 12 and 0 < m["ok"] < 12 and m["resends"] >= 1
    assert m["layers"] == 2 and m["tiles"] > 2
    assert m["gap_refused"] == 1


@pytest.mark.verilator
@pytest.mark.parametrize("link_bytes", [1, 32])
def test_the_link_alone(link_bytes):
    """No core and no engine (a board's bring-up build, `dlforge synth link`): pings and
    registers at W, damaged frames refused and resent, data opcodes refused, the span
    registers opened with no data after them."""
    m = _run(cores=0, link_bytes=link_bytes, seed=8)
    assert m["resends"] >= 1 and m["clocks"] > 0


def test_invalid_parameters():
    with pytest.raises(ValueError, match="cores must be 0 to 16"):
        AcceleratorTop(cores=17)
    with pytest.raises(ValueError):
        AcceleratorTop(cores=-1)
    with pytest.raises(ValueError, match="contexts"):
        AcceleratorTop(cores=9, contexts=2)         # 18 files at once: more than 16 lanes
    with pytest.raises(ValueError, match="contexts"):
        AcceleratorTop(cores=1, contexts=3)


@pytest.mark.verilator
def test_convolution_layers_over_the_link():
    conv = {"rows": 2, "cols": 2, "simd": 1, "weight_depth": 64, "input_depth": 256,
            "psum_depth": 32, "link_bytes": 16}
    from dlforge.rtl.conv.config import EngineConfig
    top = AcceleratorTop(1, 64, 64, 256, conv=EngineConfig(**conv))
    _conv(top, conv, "accel_c1_w64_p256_conv", {})


def _conv(top, conv, name, extra):
    result = run_cocotb(top, name=name, test_module="dlforge.sim.tb.accel_top",
                        params={"conv": conv, "layers": LAYERS, "max_payload": 256,
                                "max_width": 64, "max_height": 64, "ready_prob": 0.8,
                                "corrupt": 0.05, "seed": 6} | extra, quiet=True)
    assert result.passed, f"{result.failed} (log: {result.test_dir}/sim.log)"
    assert result.metrics["layers"] == 2 and result.metrics["tiles"] > 2


@pytest.mark.verilator
def test_a_gated_engine_clock_only_where_there_is_an_engine():
    """The simulator's gated engine clock adds its two ports only to a top with an engine."""
    from dlforge.rtl.conv.config import EngineConfig
    plain = AcceleratorTop(cores=1, max_width=64, max_height=64, engine_clock=True)
    gated = AcceleratorTop(cores=0, conv=EngineConfig(rows=2, cols=2, simd=1),
                           engine_clock=True)
    ungated = AcceleratorTop(cores=0, conv=EngineConfig(rows=2, cols=2, simd=1))
    for top in (plain, gated, ungated):
        top._MustUse__silence = True        # built only to see their ports
    assert "engine_clk" not in plain.signature.members
    assert {"engine_clk", "engine_wants_clock"} <= set(gated.signature.members)
    assert "engine_clk" not in ungated.signature.members
