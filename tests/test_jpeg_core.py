"""The decoder core's Verilog under cocotb: whole files in, images bit-exact to the golden
model (itself checked against libjpeg-turbo) or the model's status out, files back to back."""

import pytest

from dlforge.rtl.jpeg.core import JpegCore
from dlforge.sim.runner import run_cocotb


def _run(core, name, **params):
    result = run_cocotb(core, name=name, test_module="dlforge.sim.tb_jpeg_core",
                        params=params | {"input_bytes": core.input_bytes,
                                         "max_width": core.max_width,
                                         "max_height": core.max_height}, quiet=True)
    assert result.passed, f"{result.failed} (log: {result.test_dir}/sim.log)"
    return result.metrics


def test_quick_corpus_both_modes_with_back_pressure():
    m = _run(JpegCore(max_width=512), "jpeg_w512", corpus="quick", modes=["fancy", "fast"],
             ready_prob=0.7, valid_prob=0.9)
    assert m["ok"] == m["files"] >= 100


def test_bad_files_between_good_ones():
    """Malformed and unsupported files, each followed by a good one: every status right,
    every good file still bit-exact."""
    m = _run(JpegCore(max_width=512), "jpeg_w512", corpus="mixed", ready_prob=0.8)
    assert m["files"] >= 80 and 0 < m["ok"] < m["files"]


def test_fuzzed_files():
    """300 truncated, bit-flipped and spliced files back to back: each gives the model's
    status (and, where it decodes, the model's pixels); none hangs the core."""
    m = _run(JpegCore(max_width=512), "jpeg_w512", corpus="fuzz", limit=300, seed=11,
             ready_prob=0.8)
    assert m["files"] == 300 and m["ok"] > 20


def test_wide_input():
    m = _run(JpegCore(max_width=512, input_bytes=4), "jpeg_w512_b4", corpus="quick", limit=20,
             modes=["fancy"], valid_prob=0.8)
    assert m["ok"] == m["files"] == 20


def test_invalid_parameters():
    with pytest.raises(ValueError):
        JpegCore(input_bytes=2)
