"""The generated IDCT Verilog under cocotb: bit-exact against the golden model, full rate, stalls."""

import pytest

from dlforge.rtl.jpeg.idct import Idct
from dlforge.sim.tools.runner import run_cocotb


def regress(samples_per_clock, blocks, sim=None, seed=1):
    """Run the regression on ``sim`` (default: $SIM, else Verilator) and check its figures."""
    dut = Idct(samples_per_clock)
    result = run_cocotb(dut, name=f"idct_p{samples_per_clock}", test_module="dlforge.sim.tb.idct",
                        params={"samples_per_clock": samples_per_clock, "latency": dut.latency,
                                "blocks": blocks, "seed": seed},
                        sim=sim, quiet=True)
    assert result.tests == 3
    assert result.passed, f"{result.failed} (log: {result.test_dir}/sim.log)"
    m = result.metrics
    assert m["random_blocks"] == blocks
    assert m["cycles_per_block"] == 64 / samples_per_clock      # no bubbles between blocks
    assert m["latency_cycles"] == dut.latency
    return m


@pytest.mark.verilator
@pytest.mark.slow
@pytest.mark.parametrize("samples_per_clock", [1, 8])
def test_10k_blocks(samples_per_clock):
    regress(samples_per_clock, blocks=10_000, seed=samples_per_clock)


@pytest.mark.verilator
@pytest.mark.parametrize("samples_per_clock", [2, 4])
def test_other_widths(samples_per_clock):
    regress(samples_per_clock, blocks=2000, seed=samples_per_clock)


@pytest.mark.icarus
@pytest.mark.parametrize("samples_per_clock", [1, 8])
def test_icarus_subset(samples_per_clock):
    regress(samples_per_clock, blocks=300, sim="icarus", seed=10 + samples_per_clock)
