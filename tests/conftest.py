import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Simulator builds are shared between test runs and xdist workers (content-hashed, locked).
os.environ.setdefault("DLFORGE_BUILD_DIR", str(ROOT / "build"))

#: Set by .ci/run: a test that skips because a tool or package is missing (iverilog,
#: openFPGALoader, g++, a YoWASP tool, jpeglib, scikit-image, ...) fails instead, so that CI
#: cannot go green by skipping.  Users without the tools still get skips locally.
CI = os.environ.get("DLFORGE_CI", "") not in ("", "0")

#: The skips CI accepts: what the machine is, not what is installed on it (a skip reason
#: containing one of these).
CI_MAY_SKIP = (
    "needs CUDA",                  # the loader's pinned memory: CI has no GPU
    "CUDA is there",               # ... and its no-CUDA branch on a machine with one
    "x86-only",                    # JSIMD_FORCE* of libjpeg-turbo on x86 only
    "Pillow 13's pass order",      # the resample model follows Pillow >= 13
    "process_vm_readv",            # the kernel's choice (ptrace scope), probed by the link
)


#: The per-test limit (pytest-timeout) of a test in the xdist group "sim_board": its first use
#: builds the simulated board with Verilator (5 to 15 minutes on the 2-core machine, and
#: another worker may hold the build's lock meanwhile).  Other tests have pyproject's 1200 s
#: unless they mark their own.
SIM_BOARD_TIMEOUT = 2400


def pytest_collection_modifyitems(config, items):
    for item in items:
        groups = [m.args[0] for m in item.iter_markers("xdist_group") if m.args]
        if "sim_board" in groups and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SIM_BOARD_TIMEOUT))
    if shutil.which("iverilog") and shutil.which("vvp"):
        return
    skip = pytest.mark.skip(reason="Icarus Verilog not installed (iverilog/vvp not on PATH); "
                                   "Debian: apt-get install iverilog")
    for item in items:
        if "icarus" in item.keywords:
            item.add_marker(skip)


def _skip_reason(report):
    if isinstance(report.longrepr, tuple):          # (path, line, "Skipped: reason")
        return str(report.longrepr[2])
    return str(report.longrepr)


def _fail_if_ci_skip(report, what):
    if not (CI and report.skipped) or hasattr(report, "wasxfail"):
        return
    reason = _skip_reason(report)
    if any(ok in reason for ok in CI_MAY_SKIP):
        return
    report.outcome = "failed"
    report.longrepr = (f"{what} skipped under DLFORGE_CI=1, which does not allow it "
                       f"(install what it needs; .ci/run should have): {reason}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_if_ci_skip(outcome.get_result(), item.nodeid)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield                                 # a module-level importorskip
    _fail_if_ci_skip(outcome.get_result(), collector.nodeid)
