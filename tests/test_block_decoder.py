"""The block decoder's Verilog (entropy decoder -> coefficient buffer -> IDCT) under cocotb:
every quick-corpus file decodes to the model's 8x8 sample blocks."""

import pytest

from dlforge.rtl.jpeg.block_decoder import BlockDecoder
from dlforge.sim.tools.runner import run_cocotb


@pytest.mark.verilator
@pytest.mark.parametrize("samples_per_clock", [8])
def test_quick_corpus_blocks(samples_per_clock):
    result = run_cocotb(BlockDecoder(samples_per_clock), name=f"blocks_p{samples_per_clock}",
                        test_module="dlforge.sim.tb.block_decoder",
                        params={"corpus": "quick", "ready_prob": 0.8,
                                "samples_per_clock": samples_per_clock}, quiet=True)
    assert result.passed, f"{result.failed} (log: {result.test_dir}/sim.log)"
    assert result.metrics["files"] >= 50
