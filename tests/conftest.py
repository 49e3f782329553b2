import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Simulator builds are shared between test runs and xdist workers (content-hashed, locked).
os.environ.setdefault("DLFORGE_BUILD_DIR", str(ROOT / "build"))


def pytest_collection_modifyitems(config, items):
    if shutil.which("iverilog") and shutil.which("vvp"):
        return
    skip = pytest.mark.skip(reason="Icarus Verilog not installed (iverilog/vvp not on PATH); "
                                   "Debian: apt-get install iverilog")
    for item in items:
        if "icarus" in item.keywords:
            item.add_marker(skip)
