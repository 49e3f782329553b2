"""The tree keeps its import rule (tests/import_rule.py), and the check would see a break."""

import shutil
from pathlib import Path

from import_rule import cycles, violations

ROOT = Path(__file__).resolve().parent.parent


def test_the_tree_keeps_the_rule():
    assert violations(ROOT) == []


def test_no_file_imports_in_a_circle():
    assert cycles(ROOT) == []


def _tree(tmp_path, files):
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for folder in {p.parent for p in tmp_path.rglob("*.py")}:
        (folder / "__init__.py").touch()
    return tmp_path


def test_a_deliberate_break_is_seen(tmp_path):
    root = _tree(tmp_path, {
        "rtl/core.py": "def f():\n    from ..host.board import Board\n",   # in a function
        "host/board.py": "from dlforge.rtl.core import f\n",
        "sim/models/model.py": "from dlforge.sim.tb import bench\n",
        "sim/tb/bench.py": "from dlforge.gen import cli\n",
        "gen/cli.py": "from dlforge.host import board\nfrom dlforge.sim.tb import bench\n",
    })
    found = violations(root)
    assert any(v.startswith("rtl/core.py:2: dlforge.rtl.core (rtl) imports dlforge.host.board")
               for v in found), found
    assert any("dlforge.sim.models.model (sim.models) imports dlforge.sim.tb.bench" in v
               for v in found), found
    assert any("dlforge.sim.tb.bench (sim.tb) imports dlforge.gen.cli" in v for v in found), found
    assert not any(v.startswith("gen/") or v.startswith("host/") for v in found), found
    assert sorted(map(sorted, cycles(root))) == [["dlforge.gen.cli", "dlforge.sim.tb.bench"],
                                                 ["dlforge.host.board", "dlforge.rtl.core"]]


def test_the_real_tree_with_one_break_fails(tmp_path):
    """A copy of the project's own tree with one import added breaks the rule."""
    for top in ("rtl", "boards", "sim", "host", "gen"):
        shutil.copytree(ROOT / top, tmp_path / top,
                        ignore=shutil.ignore_patterns("__pycache__", "*.cpp", "*.h"))
    target = tmp_path / "sim" / "models" / "jpeg_model.py"
    target.write_text(target.read_text() + "\n\ndef _late():\n"
                      "    from dlforge.host.device.open import open_device\n")
    found = violations(tmp_path)
    assert len(found) == 1 and "sim/models/jpeg_model.py" in found[0], found


def test_the_network_program_contract_is_the_one_narrow_exception(tmp_path):
    """sim.models may import host/conv/program.py and no other host module (nor may another
    sim part); program.py itself, and the packages above it, may import rtl only."""
    root = _tree(tmp_path, {
        "rtl/core.py": "X = 1\n",
        "host/conv/program.py": "from dlforge.rtl.core import X\n",
        "host/conv/plan.py": "from dlforge.host.conv.program import X\n",
        "sim/models/network_model.py": "from dlforge.host.conv.program import X\n",
        "sim/models/conv_model.py": "X = 2\n",
        "sim/corpus/photos.py": "X = 3\n",
    })
    assert violations(root) == []
    (root / "sim/models/conv_model.py").write_text("from dlforge.host.conv.plan import X\n")
    (root / "sim/corpus/photos.py").write_text("from dlforge.host.conv.program import X\n")
    (root / "host/conv/program.py").write_text(
        "from dlforge.rtl.core import X\nfrom dlforge.host.conv.plan import Y\n"
        "def late():\n    from dlforge.sim.models.conv_model import X\n")
    (root / "host/conv/__init__.py").write_text("from dlforge.host.conv.plan import X\n")
    found = violations(root)
    assert [v.split(": ", 1)[1] for v in found] == [
        "dlforge.host.conv (host) imports dlforge.host.conv.plan (host)",
        "dlforge.host.conv.program (host) imports dlforge.host.conv.plan (host)",
        "dlforge.host.conv.program (host) imports dlforge.sim.models.conv_model (sim.models)",
        "dlforge.sim.corpus.photos (sim.corpus) imports dlforge.host.conv.program (host)",
        "dlforge.sim.models.conv_model (sim.models) imports dlforge.host.conv.plan (host)",
    ], found
