"""The entropy-decoding Verilog under cocotb: the quick corpus and the malformed scans."""

import pytest

from dlforge.rtl.jpeg.entropy_decoder import EntropyDecoder
from dlforge.sim.tools.runner import run_cocotb


def regress(sim=None, limit=1000):
    result = run_cocotb(EntropyDecoder(), name="entropy", test_module="dlforge.sim.tb.entropy",
                        params={"corpus": "quick", "limit": limit, "ready_prob": 0.8},
                        sim=sim, quiet=True)
    assert result.tests == 2
    assert result.passed, f"{result.failed} (log: {result.test_dir}/sim.log)"
    return result.metrics


@pytest.mark.verilator
def test_quick_corpus():
    metrics = regress()
    assert metrics["files"] >= 50
    assert metrics["symbols_per_clock_min"] > 0


@pytest.mark.icarus
def test_icarus_subset():
    metrics = regress(sim="icarus", limit=10)
    assert metrics["files"] == 10
