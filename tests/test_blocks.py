"""The block registry: parameters are validated and named consistently."""

import pytest

from dlforge.gen.blocks import BLOCKS, get_block


def test_idct_is_registered():
    assert "idct" in BLOCKS()
    block = get_block("idct")
    assert block.defaults() == {"samples_per_clock": 1}
    assert [p["samples_per_clock"] for p in block.regression] == [1, 2, 4, 8]
    assert block.module_name({"samples_per_clock": 4}) == "idct_p4"


def test_parameter_checks():
    block = get_block("idct")
    assert block.full_params({}) == {"samples_per_clock": 1}
    with pytest.raises(ValueError, match="unknown parameter"):
        block.full_params({"rows": 3})
    with pytest.raises(ValueError, match="must be one of"):
        block.full_params({"samples_per_clock": 16})
    with pytest.raises(KeyError, match="known blocks"):
        get_block("jpeg9000")
