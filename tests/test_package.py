"""One distribution, imported as dlforge.*: a plain wheel install works, not only the editable one."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# every package of the tree (a wheel that left one out would fail here)
SUBPACKAGES = ["rtl", "rtl.jpeg", "rtl.conv", "rtl.link", "rtl.resample", "gen", "gen.bench",
               "gen.commands", "host", "host.link", "host.device", "host.jpeg", "host.conv", "host.sched",
               "sim", "sim.models", "sim.corpus", "sim.tb", "sim.board", "sim.tools", "boards"]


def test_editable_install_maps_the_design_card_folders():
    import dlforge
    import dlforge.rtl.jpeg.idct as idct

    assert Path(dlforge.__file__).parent == ROOT
    assert Path(idct.__file__) == ROOT / "rtl" / "jpeg" / "idct.py"


@pytest.mark.slow
def test_wheel_installs_and_imports(tmp_path):
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                          "-w", str(tmp_path / "dist"), str(ROOT)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    wheel = next((tmp_path / "dist").glob("dlforge-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"dlforge"}   # no bare sim/, host/, ...
    assert "dlforge/sim/tb/idct.py" in names and "dlforge/rtl/jpeg/idct.py" in names
    # the simulated board's harness, compiled on the user's machine
    assert {"dlforge/sim/board/main.cpp", "dlforge/sim/board/dma_engine.h"} <= set(names)
    target = tmp_path / "site"
    out = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--target",
                          str(target), str(wheel)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    code = ("import sys, dlforge, importlib\n"
            f"assert dlforge.__file__.startswith({str(target)!r}), dlforge.__file__\n"
            f"for sub in {SUBPACKAGES!r}:\n"
            "    importlib.import_module('dlforge.' + sub)\n"
            "from dlforge.rtl.jpeg.idct import Idct\n"
            "from amaranth.back import verilog\n"
            "assert 'module idct' in verilog.convert(Idct(2), name='idct')\n"
            "print('ok')\n")
    # The wheel's folder goes first on sys.path, ahead of the editable install's finder.
    run = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(target)!r})\n" + code],
                         capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-3000:]
