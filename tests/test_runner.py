"""The simulation runner: content-hashed shared builds, parameters, failures reported, waves."""


import subprocess

import pytest
from amaranth import Module, Signal, unsigned
from amaranth.back import verilog
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from dlforge.rtl.stream_pipe import Narrow
from dlforge.sim.tools import runner
from dlforge.sim.tools.runner import run_cocotb


def narrow(out_lanes=2):
    return Narrow(unsigned(8), 8, out_lanes)


@pytest.mark.verilator
def test_params_reach_testbench_and_build_is_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("DLFORGE_BUILD_DIR", str(tmp_path))
    first = run_cocotb(narrow(), name="narrow_8to2", test_module="dlforge.sim.tb.narrow",
                       params={"out_lanes": 2, "beats": 50}, quiet=True)
    assert first.passed and first.metrics["elements"] == 400
    builds = list((tmp_path / "sim").glob("narrow_8to2-*/.built"))
    assert len(builds) == 1
    stamp_time = builds[0].stat().st_mtime_ns
    second = run_cocotb(narrow(), name="narrow_8to2", test_module="dlforge.sim.tb.narrow",
                        params={"out_lanes": 2, "beats": 80}, quiet=True)
    assert second.passed and second.metrics["elements"] == 640
    assert builds[0].stat().st_mtime_ns == stamp_time          # not rebuilt
    assert second.test_dir != first.test_dir                   # separate run folders
    # A different design gets a different folder.
    run_cocotb(narrow(4), name="narrow_8to2", test_module="dlforge.sim.tb.narrow",
               params={"out_lanes": 4, "beats": 10}, quiet=True)
    assert len(list((tmp_path / "sim").glob("narrow_8to2-*/.built"))) == 2


@pytest.mark.verilator
def test_failing_testbench_is_reported(tmp_path, monkeypatch):
    monkeypatch.setenv("DLFORGE_BUILD_DIR", str(tmp_path))
    result = run_cocotb(narrow(), name="narrow_bad", test_module="dlforge.sim.tb.narrow",
                        params={"out_lanes": 2, "claim_out_lanes": 4, "beats": 20}, quiet=True)
    assert not result.passed
    assert result.failures == 1 and result.failed[0][0] == "order_and_backpressure"


@pytest.mark.verilator
def test_waves_are_written(tmp_path, monkeypatch):
    monkeypatch.setenv("DLFORGE_BUILD_DIR", str(tmp_path))
    result = run_cocotb(narrow(), name="narrow_waves", test_module="dlforge.sim.tb.narrow",
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
    result = run_cocotb(narrow(), name="narrow_ivl", test_module="dlforge.sim.tb.narrow",
                        params={"out_lanes": 2, "beats": 30}, sim="icarus", waves=True, quiet=True)
    assert result.passed
    assert result.waves is not None and result.waves.suffix == ".fst"


class _HeldState(wiring.Component):
    """A combinational output of a register that keeps its initial value."""
    en: In(1)
    o: Out(8)

    def elaborate(self, platform):
        m = Module()
        state = Signal(2, init=2)
        with m.If(self.en):
            m.d.sync += state.eq(state + 1)
        with m.Switch(state):
            with m.Case(2):
                m.d.comb += self.o.eq(0x5A)
            with m.Default():
                m.d.comb += self.o.eq(0x11)
        return m


@pytest.mark.icarus
def test_icarus_evaluates_combinational_blocks_at_time_zero(tmp_path):
    # Without the rewrite Icarus 11 shows "xx": the always @* block never runs.
    (tmp_path / "held.v").write_text(runner._icarus_time_zero(
        verilog.convert(_HeldState(), name="held", emit_src=False)))
    (tmp_path / "tb.v").write_text(
        "module tb; reg clk = 0, rst = 0, en = 0; wire [7:0] o;\n"
        "held dut(.clk(clk), .rst(rst), .en(en), .o(o));\n"
        "initial begin #1 $display(\"o=%h\", o); $finish; end\nendmodule\n")
    subprocess.run(["iverilog", "-g2012", "-o", "tb.vvp", "tb.v", "held.v"], cwd=tmp_path, check=True)
    shown = subprocess.run(["vvp", "-n", "tb.vvp"], cwd=tmp_path, check=True, capture_output=True,
                           text=True, timeout=60).stdout
    assert "o=5a" in shown


@pytest.mark.verilator
def test_big_designs_compile_their_cpp_at_o0_and_the_choice_is_in_the_hash(tmp_path,
                                                                           monkeypatch):
    monkeypatch.delenv(runner.CXX_OPT_ENV, raising=False)
    assert runner.choose_cxx_opt(runner.BIG_VERILOG + 1) == "-O0"
    assert runner.choose_cxx_opt(1000) == "-Os"
    monkeypatch.setenv(runner.CXX_OPT_ENV, "-O2")
    assert runner.choose_cxx_opt(runner.BIG_VERILOG + 1) == runner.choose_cxx_opt(10) == "-O2"
    monkeypatch.setenv(runner.CXX_OPT_ENV, "-O9; rm -rf /")
    with pytest.raises(ValueError, match="gcc optimisation flag"):
        runner.choose_cxx_opt()
    # two levels, two builds (the flag is part of the build folder's hash)
    monkeypatch.setenv("DLFORGE_BUILD_DIR", str(tmp_path))
    for level in ("-O0", "-O1"):
        monkeypatch.setenv(runner.CXX_OPT_ENV, level)
        assert run_cocotb(narrow(), name="narrow_opt", test_module="dlforge.sim.tb.narrow",
                          params={"out_lanes": 2, "beats": 20}, quiet=True).passed
    builds = sorted((tmp_path / "sim").glob("narrow_opt-*/build.log"))
    assert len(builds) == 2
    assert {("-O0" in b.read_text(), "-O1" in b.read_text()) for b in builds} == {
        (True, False), (False, True)}
