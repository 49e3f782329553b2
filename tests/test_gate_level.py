"""Gate-level simulation: yosys' ECP5 netlist of the decoder core under the core's own cocotb
testbench (issue 20), and the cell models that make it possible."""

import re
from pathlib import Path

import pytest

from dlforge.boards.gate_level import MULT18X18D_MODEL, cell_models


def test_only_the_cells_used_are_taken(tmp_path):
    netlist = ("module top(input a, output y);\n"
               "  LUT4 #(.INIT(16'h8000)) l (.A(a), .B(a), .C(a), .D(a), .Z(y));\n"
               "  DP16KD #(.DATA_WIDTH_A(32'd9)) m ();\n"
               "endmodule\n")
    text = cell_models(netlist, tmp_path).read_text()
    modules = set(re.findall(r"^module\s+(\w+)", text, re.M))
    assert {"LUT4", "DP16KD"} <= modules
    # nextpnr's packed cells (TRELLIS_COMB: an elaboration-time $error Icarus 11 cannot parse)
    # and the wheel's other cells the netlist does not use stay out
    assert not {"TRELLIS_COMB", "TRELLIS_FF", "TRELLIS_IO", "CCU2C"} & modules
    # the wheel's DP16KD is a black box: ours has a memory behind the same ports
    assert "blackbox" not in text and "reg [17:0] mem [0:1023];" in text


def test_a_cell_without_a_model_is_an_error(tmp_path):
    with pytest.raises(RuntimeError, match="no simulation model for the cells EHXPLLL"):
        cell_models("module top();\n  EHXPLLL p ();\nendmodule\n", tmp_path)


def test_mult_model_refuses_registered_configurations():
    """Its combinational model must not pass silently where yosys set a register."""
    assert "$finish" in MULT18X18D_MODEL and 'REG_INPUTA_CLK != "NONE"' in MULT18X18D_MODEL


@pytest.mark.slow
@pytest.mark.icarus
@pytest.mark.timeout(2400)      # yosys (3 min) and about 40 clocks a second on Icarus
def test_decoder_core_netlist_decodes_like_the_rtl():
    """The core's cocotb testbench on its synth_ecp5 netlist (Icarus): tiny files of every
    layout, both upsampling modes, every pixel against the golden model."""
    from dlforge.gen.regression import run_regression
    params = {"max_width": 256, "max_height": 256}
    [row] = run_regression("jpeg", sim="icarus", gate_level=True, param_sets=[params], blocks=6)
    assert row["passed"], row["failures"]
    assert row["metrics"]["files"] == 12 and row["metrics"]["ok"] == 12
    netlist = Path(row["gate_level"]).read_text()
    # every model behind it was used: block RAM, LUT RAM, multipliers, carry chains
    for cell in ("DP16KD", "TRELLIS_DPR16X4", "MULT18X18D", "CCU2C", "TRELLIS_FF", "LUT4"):
        assert re.search(rf"^\s+{cell} ", netlist, re.M), cell
