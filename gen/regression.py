"""Run a block's cocotb regression over its parameter sets and summarise what was verified;
run a block's benchmark (:func:`run_bench`), its results checked in the same run."""

from dlforge.sim.tools.progress import count_in_log
from dlforge.sim.tools.runner import build_dir_root, default_simulator, run_cocotb
from .blocks import get_block

__all__ = ["run_regression", "run_bench", "BENCH_CHECKS"]

#: What each block's benchmark testcase compares, every item of the run (its testbench
#: fails the run on a difference).  A testbench that says it itself (resample) keeps its own.
BENCH_CHECKS = {
    "idct": "every output block bit-exact to the islow IDCT model (libjpeg-turbo's "
            "jpeg_idct_islow), in this run",
    "entropy": "every file's coefficients equal to the golden model's, in this run",
    "blocks": "every file's 8x8 sample blocks bit-exact to the golden model, in this run",
    "jpeg": "every file bit-exact to the golden model (status, size and every pixel; the "
            "model is bit-exact to libjpeg-turbo), in this run",
    "conv": "every layer's output bit-exact to the int8 golden model, in this run",
}


def run_regression(block_name, *, sim=None, waves=False, param_sets=None, quiet=True,
                   progress=None, gate_level=False, **tb_options):
    """Simulate every parameter set; return a list of rows (parameters, pass/fail, metrics).
    ``progress``: a :class:`~dlforge.sim.tools.progress.Progress` (None: each run's own).
    ``gate_level``: simulate yosys' ECP5 netlist of each parameter set with the cell models
    (:mod:`dlforge.boards.gate_level`) instead of the RTL, on Icarus unless ``sim`` says
    otherwise (Verilator takes longer to build a flat netlist than Icarus takes to run it)."""
    block = get_block(block_name)
    sim = sim or ("icarus" if gate_level else default_simulator())
    rows = []
    sets = list(param_sets or block.regression or (block.defaults(),))
    for k, params in enumerate(sets):
        params = block.full_params(params)
        if progress is not None and len(sets) > 1:
            progress.phase(f"parameter set {k + 1}/{len(sets)}: {block.module_name(params)}")
        component = block.build(**params)
        name = block.module_name(params)
        netlist = None
        if gate_level:
            from dlforge.boards.gate_level import ecp5_netlist
            if progress is not None:
                progress.phase(f"{name}: yosys synth_ecp5 (gate-level netlist)")
            netlist = ecp5_netlist(component, name, build_dir_root() / "gate" / name,
                                   autoname=params.get("contexts", 1) < 2)
        result = run_cocotb(component, name=name, test_module=block.testbench,
                            params=block.tb_params(component, **tb_options), sim=sim, waves=waves,
                            quiet=quiet, cxx_opt=block.cxx_opt, progress=progress,
                            netlist=netlist)
        rows.append({"block": block.name, "sim": sim, "parameters": params,
                     "gate_level": netlist.sources[0] if netlist else None,
                     "tests": result.tests, "failures": result.failures, "passed": result.passed,
                     "metrics": result.metrics, "log_dir": str(result.test_dir),
                     "waves": str(result.waves) if result.waves else None})
    return rows


def _run_watch(block_name, tb):
    """The bench run's detail from its sim.log: the conv testbench logs each layer it
    finishes."""
    if block_name != "conv":
        return None
    total = len(tb["names"]) if tb.get("names") else None
    if total is None and tb.get("layers") == "resnet18":
        from dlforge.host.conv.networks import resnet18_layers
        total = len(resnet18_layers())
    return lambda tail: count_in_log(tail, '"predicted_cycles"', total, "layers")


def run_bench(block_name, params, tb, *, component=None, sim=None, check=True, progress=None,
              clock_mhz=None):
    """A block's benchmark testcase on ``params`` with testbench parameters ``tb`` (the
    block's own bench parameters updated by the caller's); returns the report (the
    configuration, ``passed``, ``checked`` and the testbench's metrics).  ``check``: compare
    every result with the golden model in the same run (the default; False times only).
    ``component``: the block already built with ``params`` (else built here).  The decoder
    core's ("jpeg") report also has its rate at ``clock_mhz`` (None: the ECP5 core's measured
    Fmax) beside libjpeg-turbo on one CPU core (:func:`_beside_cpu`)."""
    block = get_block(block_name)
    if block.bench is None:
        raise ValueError(f"{block.name} has no benchmark")
    sim = sim or default_simulator()
    testcase, _ = block.bench
    tb = dict(tb, check=bool(check))       # (whatever the block's bench parameters say)
    if block.name == "jpeg":
        from .bench.device import stated_clock
        clock = stated_clock(clock_mhz, params.get("contexts", 1))  # (refused before sim)
    if component is None:
        component = block.build(**params)
    result = run_cocotb(component, name=block.module_name(params), test_module=block.testbench,
                        params=tb, sim=sim, testcase=testcase, quiet=True,
                        cxx_opt=block.cxx_opt, progress=progress,
                        watch_run=_run_watch(block.name, tb))
    checked = BENCH_CHECKS.get(block.name) if tb.get("check", True) else False
    report = {"block": block.name, "parameters": params, "simulator": sim,
              "testbench": block.testbench, "testcase": testcase, "testbench_params": tb,
              "passed": result.passed, "checked": checked, **result.metrics}
    if not result.passed:
        report["failed"] = [{"test": name, "message": message[:2000]}
                            for name, message in result.failed]
        report["log_dir"] = str(result.test_dir)
    if block.name == "jpeg" and report.get("per_file"):
        if progress is not None:
            progress.phase("libjpeg-turbo on one CPU core, the same files")
        report |= _beside_cpu(report, tb, clock)
    return report


def _beside_cpu(report, tb, clock):
    """The decoder core's aggregate pixels per clock at ``clock`` (MHz, its source) beside
    libjpeg-turbo on one CPU core, measured now on the files of the report's rows that
    decoded OK (the testbench's files, found by its own
    :func:`~dlforge.sim.corpus.pick.files_of`; a file in several rows, for ``repeat`` or
    ``modes``, counts in each): {"cpu", "at_clock"}."""
    from .bench.device import cpu_rate
    from dlforge.sim.corpus.pick import files_of
    mhz, source = clock
    rows = report["per_file"]
    copies = int(tb.get("repeat", 1)) * len(tb.get("modes", ["fancy"]))  # rows a file, in order
    jobs = [named for named in files_of(tb) for _ in range(copies)]
    if [name for name, _ in jobs] != [row["file"] for row in rows]:
        raise RuntimeError("the files found again for libjpeg-turbo are not the files the "
                           "testbench decoded")
    decoded = [named for named, row in zip(jobs, rows) if row["status"] == "OK"]
    if not decoded:
        return {}
    cpu = cpu_rate(decoded)
    mps = report["aggregate_pixels_per_clock"] * mhz
    return {"cpu": {"libjpeg_turbo_megapixels_per_second_one_core": cpu,
                    "files": len(decoded),
                    "what": "simplejpeg.decode_jpeg, islow, fancy upsampling, best of 3, "
                            "the files the core decoded OK in this run, this machine"},
            "at_clock": {"clock_mhz": mhz, "clock_source": source,
                         "megapixels_per_second": mps, "vs_cpu_core": mps / cpu}}
