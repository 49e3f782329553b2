"""The simulation runner: content-hashed shared builds, parameters, failures reported, waves."""


import pytest

from dlforge.rtl.stream_pipe import Narrow
from amaranth import unsigned
from dlforge.sim import runner
from dlforge.sim.runner import run_cocotb


def narrow(out_lanes=2):
    return Narrow(unsigned(8), 8, out_lanes)


def test_params_reach_testbench_and_build_is_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("DLFORGE_BUILD_DIR", str(tmp_path))
    first = run_cocotb(narrow(), name="narrow_8to2", test_module="dlforge.sim.tb_narrow",
                       params={"out_lanes": 2, "beats": 50}, quiet=True)
    assert first.passed and first.metrics["elements"] == 400
    builds = list((tmp_path / "sim").glob("narrow_8to2-*/.built"))
    assert len(builds) == 1
    stamp_time = builds[0].stat().st_mtime_ns
    second = run_cocotb(narrow(), name="narrow_8to2", test_module="dlforge.sim.tb_narrow",
                        params={"out_lanes": 2, "beats": 80}, quiet=True)
    assert second.passed and second.metrics["elements"] == 640
    assert builds[0].stat().st_mtime_ns == stamp_time          # not rebuilt
    assert second.test_dir != first.test_dir                   # separate run folders
    # A different design gets a different folder.
    run_cocotb(narrow(4), name="narrow_8to2", test_module="dlforge.sim.tb_narrow",
               params={"out_lanes": 4, "beats": 10}, quiet=True)
    assert len(list((tmp_path / "sim").glob("narrow_8to2-*/.built"))) == 2


def test_failing_testbench_is_reported(tmp_path, monkeypatch):
    monkeypatch.setenv("DLFORGE_BUILD_DIR", str(tmp_path))
    result = run_cocotb(narrow(), name="narrow_bad", test_module="dlforge.sim.tb_narrow",
                        params={"out_lanes": 2, "claim_out_lanes": 4, "beats": 20}, quiet=True)
    assert not result.passed
    assert result.failures == 1 and result.failed[0][0] == "order_and_backpressure"


def test_waves_are_written(tmp_path, monkeypatch):
    monkeypatch.setenv("DLFORGE_BUILD_DIR", str(tmp_path))
    result = run_cocotb(narrow(), name="narrow_waves", test_module="dlforge.sim.tb_narrow",
                        params={"out_lanes": 2, "beats": 5}, waves=True, quiet=True)
    assert result.passed
    assert result.waves is not None and result.waves.suffix == ".fst"
    assert result.waves.stat().st_size > 0


def test_sim_environment_variable_picks_the_default(monkeypatch):
    monkeypatch.setenv("SIM", "icarus")
    assert runner.default_simulator() == "icarus"
    monkeypatch.delenv("SIM")
    assert runner.default_simulator() == "verilator"


def test_waiver_list_is_explicit():
    assert all(flag.startswith("-Wno-") for flag in runner.VERILATOR_WAIVERS)
    assert "-Wno-fatal" not in runner.VERILATOR_WAIVERS and "-Wno-lint" not in runner.VERILATOR_WAIVERS


@pytest.mark.icarus
def test_icarus_runs_the_same_testbench(tmp_path, monkeypatch):
    monkeypatch.setenv("DLFORGE_BUILD_DIR", str(tmp_path))
    result = run_cocotb(narrow(), name="narrow_ivl", test_module="dlforge.sim.tb_narrow",
                        params={"out_lanes": 2, "beats": 30}, sim="icarus", waves=True, quiet=True)
    assert result.passed
    assert result.waves is not None and result.waves.suffix == ".fst"
