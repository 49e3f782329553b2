"""Progress on stderr (``dlforge.sim.tools.progress``): what is ours (the tools' logs read
into a phase and a count, silent under pytest unless asked) and that tqdm's line is drawn and
closed as the module says: a line per phase at once, counts no more often than the interval,
a line of its own each in a log, one rewritten line on a terminal."""

import io
import json

import pytest

from dlforge.sim.tools.progress import (ENV, LogTail, Progress, Step, count_in_log,
                                        nextpnr_step, progress_enabled, verilator_build_step,
                                        yosys_step)


class Tty(io.StringIO):
    def isatty(self):
        return True


def _progress(stream=None, interval=0.0):
    return Progress("dlforge test", stream=stream if stream is not None else io.StringIO(),
                    enabled=True, interval=interval, heartbeat=False)


def _lines(p):
    return p.stream.getvalue().splitlines()


def test_a_phase_is_drawn_at_once_and_counts_no_more_often_than_the_interval():
    p = _progress(interval=3600.0)
    p.phase("building")
    for k in range(1, 101):
        p.update("files", k, 100)
    p.phase("checking")
    p.close()
    assert _lines(p) == ["[dlforge test 00:00] building", "[dlforge test 00:00] checking",
                         "[dlforge test 00:00] done"]


def test_a_count_gets_a_bar_and_each_line_is_a_line_in_a_log():
    p = _progress()
    p.phase("decoding")
    p.update("files decoded", 3, 10)
    p.update("files decoded", 10, 10)
    p.update("now conv1")
    p.close("built")
    lines = _lines(p)
    assert lines[0] == "[dlforge test 00:00] decoding"
    assert lines[1].startswith("[dlforge test 00:00] decoding: 3/10 files decoded |")
    assert lines[1].endswith("|  30%") and lines[2].endswith("| 100%")
    assert lines[3:] == ["[dlforge test 00:00] decoding: now conv1",
                         "[dlforge test 00:00] built"]
    assert "\r" not in p.stream.getvalue()


def test_a_terminal_gets_one_rewritten_line():
    p = _progress(stream=Tty())
    p.phase("place and route")
    p.update("routing")
    p.close()
    text = p.stream.getvalue()
    assert text.count("\n") == 1 and text.endswith("\n") and text.count("\r") >= 3
    assert "[dlforge test 00:00] place and route: routing" in text
    assert text.split("\r")[-1].rstrip() == "[dlforge test 00:00] done"


def test_disabled_writes_nothing():
    stream = io.StringIO()
    p = Progress("x", stream=stream, enabled=False, heartbeat=False)
    p.phase("a")
    p.update("b", 1, 2)
    p.poll()
    p.close()
    assert stream.getvalue() == ""


def test_silent_under_pytest_unless_asked(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert not progress_enabled()                 # PYTEST_CURRENT_TEST is set here
    monkeypatch.setenv(ENV, "1")
    assert progress_enabled()
    monkeypatch.setenv(ENV, "0")
    assert not progress_enabled()
    assert progress_enabled(True) and not progress_enabled(False)
    monkeypatch.delenv("PYTEST_CURRENT_TEST")
    monkeypatch.delenv(ENV)
    assert progress_enabled()                     # a user's command: on


def test_log_tail_gives_new_whole_lines_only(tmp_path):
    log = tmp_path / "tool.log"
    log.write_text("a line of the last run\n")
    tail = LogTail(log)
    assert tail.new_lines() == []                 # the last run's log is skipped
    with open(log, "a") as f:
        f.write("one\ntw")
    assert tail.new_lines() == ["one"]
    with open(log, "a") as f:
        f.write("o\nthree\n")
    assert tail.new_lines() == ["two", "three"]
    log.write_text("rewritten\n")                 # the tool starts the log again
    assert tail.new_lines() == ["rewritten"]
    assert LogTail(tmp_path / "none.log").new_lines() == []


def test_yosys_and_nextpnr_steps_from_their_logs():
    yosys = ["2.40. Executing OPT pass (performing simple optimizations).",
             "some detail", "2.41. Executing ABC9 pass.", "   more detail"]
    assert yosys_step(yosys) == "pass 2.41: ABC9"
    assert yosys_step(["nothing here"]) is None
    assert nextpnr_step(["Info: Packing IOs..", "Info: Running simulated annealing placer"]) \
        == "placing"
    # (lines as nextpnr-ecp5 0.8 writes them)
    assert nextpnr_step(["Info: Running main analytical placer, max placement attempts per "
                         "cell = 11115612.",
                         "Info:     at iteration #6, type ALL: wirelen solved = 17639, "
                         "spread = 137005, legal = 171604; time = 0.44s"]) \
        == "placing (iteration 6)"
    assert nextpnr_step(["Info:     at initial placer iter 3, wirelen = 1810"]) \
        == "placing (initial iteration 3)"
    assert nextpnr_step(["Info: Routing 27640 arcs.",
                         "Info:      15000 |     6204       8795 |  298   702 |     22630|"
                         "       1.67      22.33|"]) == "routing (22,630 arcs left)"
    assert nextpnr_step(["Info: Critical path report for clock 'clk'"]) == "timing report"


def test_the_board_hook_reads_the_tool_whose_log_moved(tmp_path):
    """``progress(phase, {tool: log})``: the call the board builds make."""
    rpt, tim = tmp_path / "top.rpt", tmp_path / "top.tim"
    p = _progress()
    p("synthesis, place and route", {"yosys": rpt, "nextpnr": tim})
    rpt.write_text("1. Executing Verilog-2005 frontend: top.v\n3.7. Executing DFFLEGALIZE pass.\n")
    p.poll()
    assert _lines(p)[-1].endswith("synthesis, place and route: yosys: pass 3.7: DFFLEGALIZE")
    tim.write_text("Info: Routing..\nInfo: Setting up routing queue.\n")
    p.poll()
    assert _lines(p)[-1].endswith("nextpnr: routing")
    p.close()


def test_verilator_build_step(tmp_path):
    assert verilator_build_step(tmp_path / "absent") == Step("verilating (Verilog to C++)")
    assert verilator_build_step(tmp_path) == Step("verilating (Verilog to C++)")
    (tmp_path / "Vtop.mk").write_text("")
    for stem in ("Vtop", "Vtop__Syms", "Vtop___024root__0"):
        (tmp_path / f"{stem}.cpp").write_text("")
    (tmp_path / "Vtop.o").write_text("")
    assert verilator_build_step(tmp_path) == Step("C++ files compiled", 1, 3)
    assert str(verilator_build_step(tmp_path)) == "1/3 C++ files compiled"
    for stem in ("Vtop__Syms", "Vtop___024root__0"):
        (tmp_path / f"{stem}.o").write_text("")
    (tmp_path / "Vtop__ALL.a").write_text("")
    assert verilator_build_step(tmp_path) == Step("C++ files compiled, linking", 3, 3)


def test_a_watch_that_counts_draws_a_bar(tmp_path):
    p = _progress()
    p.phase("Verilator build", watch=lambda: verilator_build_step(tmp_path))
    (tmp_path / "Vtop.mk").write_text("")
    (tmp_path / "Vtop.cpp").write_text("")
    (tmp_path / "Vtop__Syms.cpp").write_text("")
    (tmp_path / "Vtop.o").write_text("")
    p.poll()
    assert _lines(p)[-1].startswith("[dlforge test 00:00] Verilator build: 1/2 C++ files "
                                    "compiled |")
    assert _lines(p)[-1].endswith("|  50%")
    p.close()


def test_count_in_log(tmp_path):
    log = tmp_path / "sim.log"
    log.write_text("")
    watch = count_in_log(LogTail(log), '"predicted_cycles"', 20, "layers")
    assert watch() is None
    with open(log, "a") as f:
        for name in ("conv1", "layer1.0.conv1"):
            f.write("INFO " + json.dumps({"name": name, "predicted_cycles": 5}) + "\n")
    assert watch() == Step("layers", 2, 20) and str(watch()) == "2/20 layers"


def test_a_closed_stream_does_not_fail_the_command():
    stream = io.StringIO()
    p = _progress(stream=stream)
    stream.close()
    p.phase("x")                                  # (no exception)
    p.update("y", 1, 2)
    p.close()


@pytest.mark.parametrize("outcome", ["done", "failed"])
def test_context_manager_says_how_it_ended(outcome):
    p = _progress()
    with pytest.raises(RuntimeError) if outcome == "failed" else _nothing():
        with p:
            p.phase("work")
            if outcome == "failed":
                raise RuntimeError("boom")
    assert p.stream.getvalue().splitlines()[-1].endswith(f"] {outcome}")


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.verilator
def test_a_simulation_run_reports_its_build_and_its_run(tmp_path, monkeypatch):
    """run_cocotb on the Progress it is given: the conversion, the Verilator build (its C++
    files counted while it runs) and the run, in that order; a run of the same build again
    has no build phase."""
    from dlforge.rtl.stream_pipe import Narrow
    from amaranth import unsigned
    from dlforge.sim.tools.runner import run_cocotb
    monkeypatch.setenv("DLFORGE_BUILD_DIR", str(tmp_path))
    for attempt in range(2):
        stream = io.StringIO()
        progress = Progress("t", stream=stream, enabled=True, interval=0.2)
        result = run_cocotb(Narrow(unsigned(8), 8, 2), name="narrow_progress",
                            test_module="dlforge.sim.tb.narrow",
                            params={"out_lanes": 2, "beats": 5}, quiet=True,
                            progress=progress)
        progress.close()
        assert result.passed
        phases = list(dict.fromkeys(line.split("] ", 1)[1].split(":", 2)[1].strip()
                                    for line in stream.getvalue().splitlines()[:-1]))
        assert phases == (["converting to Verilog", "verilator build",
                           "simulating (narrow)"] if attempt == 0 else
                          ["converting to Verilog", "simulating (narrow)"]), phases
