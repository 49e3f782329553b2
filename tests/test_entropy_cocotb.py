"""The entropy-decoding Verilog under cocotb: the quick corpus and the malformed scans.

Verilator only for now: under Icarus 11 this design stops advancing after a few clocks
(a zero-delay evaluation loop that Verilator does not see); not yet investigated.
"""

from dlforge.rtl.jpeg.entropy_decoder import EntropyDecoder
from dlforge.sim.runner import run_cocotb


def regress(sim=None, limit=1000):
    result = run_cocotb(EntropyDecoder(), name="entropy", test_module="dlforge.sim.tb_entropy",
                        params={"corpus": "quick", "limit": limit, "ready_prob": 0.8},
                        sim=sim, quiet=True)
    assert result.tests == 2
    assert result.passed, f"{result.failed} (log: {result.test_dir}/sim.log)"
    return result.metrics


def test_quick_corpus():
    metrics = regress()
    assert metrics["files"] >= 50
    assert metrics["symbols_per_clock_min"] > 0
