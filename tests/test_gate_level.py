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


def _wide_dp16kd_bench():
    """A DP16KD at 36/36 bits wired as yosys' ``$__PDPW16KD_`` wires it, and a script of
    writes (whole words and single bytes) and reads, one per clock, printed in hex."""
    conns = [".CLKA(clk)", ".CLKB(clk)", ".CEA(1'b1)", ".CEB(1'b1)", ".WEA(1'b1)", ".WEB(1'b0)",
             ".OCEA(1'b0)", ".OCEB(1'b1)", ".RSTA(1'b0)", ".RSTB(1'b0)"]
    conns += [f".CS{x}{i}(1'b0)" for x in "AB" for i in range(3)]
    conns += [f".ADA{i}(be[{i}])" for i in range(4)] + [".ADA4(1'b0)", ".ADB4(1'b0)"]
    conns += [f".ADB{i}(1'b0)" for i in range(4)]
    conns += [f".AD{x}{i}({x.lower()}w[{i - 5}])" for x in "AB" for i in range(5, 14)]
    conns += [f".DIA{i}(di[{i}])" for i in range(18)] + [f".DIB{i}(di[{i + 18}])"
                                                         for i in range(18)]
    conns += [f".DOA{i}(q[{i}])" for i in range(18)] + [f".DOB{i}(q[{i + 18}])"
                                                        for i in range(18)]
    steps = [  # (byte enables, write word, data, read word)
        (0xF, 5, 0x123456789, 0), (0xF, 6, 0xFEDCBA987, 5), (0x4, 5, 0xAAAAAAAAA, 6),
        (0x0, 6, 0x000000000, 5), (0xF, 7, 0x0F0F0F0F0, 7), (0x0, 0, 0, 7)]
    script = "\n".join(
        f"    be = 4'h{be:x}; aw = 9'd{wa}; di = 36'h{d:09x}; bw = 9'd{ra};\n"
        f"    #5 clk = 1; #1 $display(\"%h\", q); #4 clk = 0;" for be, wa, d, ra in steps)
    return f"""module tb;
  reg clk = 0; reg [3:0] be; reg [8:0] aw, bw; reg [35:0] di; wire [35:0] q;
  DP16KD #(.DATA_WIDTH_A(36), .DATA_WIDTH_B(36)) ram ({", ".join(conns)});
  initial begin
{script}
    $finish;
  end
endmodule
"""


@pytest.mark.icarus
def test_dp16kd_model_at_36_bits(tmp_path):
    """The pseudo dual-port mode the wide FIFOs map to: byte enables, the two halves, and X
    for a read of the word written in the same clock (undefined on the chip)."""
    import subprocess
    bench = tmp_path / "tb.v"
    bench.write_text(_wide_dp16kd_bench())
    models = cell_models(bench.read_text(), tmp_path)
    subprocess.run(["iverilog", "-g2012", "-o", str(tmp_path / "tb.vvp"), str(bench),
                    str(models)], check=True)
    out = subprocess.run(["vvp", "-n", str(tmp_path / "tb.vvp")], check=True,
                         capture_output=True, text=True).stdout.split()
    byte2 = 0x1FF << 18
    assert out == ["000000000",                                # word 0: never written
                   "123456789",                                # word 5 before its byte write
                   "fedcba987",
                   f"{(0x123456789 & ~byte2) | (0xAAAAAAAAA & byte2):09x}",
                   "xxxxxxxxx",                                # read and write of word 7
                   "0f0f0f0f0"]


def _narrow_dp16kd_bench(width):
    """A DP16KD with both ports ``width`` (1, 2 or 4) bits wide: port A writes a value to
    each of a few addresses (neighbours in one 9-bit half, the two halves, the last word),
    then port B reads them back, one a clock, printed in hex.  The word address goes on
    ADx[13:log2(width)], as yosys' mapping puts it."""
    words = 16384 // width
    shift = width.bit_length() - 1
    addrs = [0, 1, 2, 3, 7, 8, 9, words // 2, words - 1]
    values = [(5 * i + 3) % (1 << width) for i in range(len(addrs))]
    conns = [".CLKA(clk)", ".CLKB(clk)", ".CEA(1'b1)", ".CEB(1'b1)", ".WEA(we)", ".WEB(1'b0)",
             ".OCEA(1'b0)", ".OCEB(1'b1)", ".RSTA(1'b0)", ".RSTB(1'b0)"]
    conns += [f".CS{x}{i}(1'b0)" for x in "AB" for i in range(3)]
    conns += [f".AD{x}{i}({x.lower()}w[{i}])" for x in "AB" for i in range(14)]
    conns += [f".DIA{i}(di[{i}])" if i < width else f".DIA{i}(1'b0)" for i in range(18)]
    conns += [f".DOB{i}(q[{i}])" for i in range(width)]
    writes = [f"    we = 1; aw = 14'd{a << shift}; di = {width}'d{v}; #5 clk = 1; #5 clk = 0;"
              for a, v in zip(addrs, values)]
    reads = [f"    we = 0; bw = 14'd{a << shift}; #5 clk = 1; #1 $display(\"%h\", q); #4 clk = 0;"
             for a in addrs]
    bench = f"""module tb;
  reg clk = 0, we = 0; reg [13:0] aw = 0, bw = 0; reg [{width - 1}:0] di; wire [{width - 1}:0] q;
  DP16KD #(.DATA_WIDTH_A({width}), .DATA_WIDTH_B({width})) ram ({", ".join(conns)});
  initial begin
{chr(10).join(writes + reads)}
    $finish;
  end
endmodule
"""
    return bench, [f"{v:x}" for v in values]


@pytest.mark.icarus
@pytest.mark.parametrize("width", [1, 2, 4])
def test_dp16kd_model_at_narrow_widths(tmp_path, width):
    """What yosys maps the two-file core's deeper memories to: every address holds its own
    bits (no two addresses share one)."""
    import subprocess
    text, expected = _narrow_dp16kd_bench(width)
    bench = tmp_path / "tb.v"
    bench.write_text(text)
    models = cell_models(text, tmp_path)
    subprocess.run(["iverilog", "-g2012", "-o", str(tmp_path / "tb.vvp"), str(bench),
                    str(models)], check=True)
    out = subprocess.run(["vvp", "-n", str(tmp_path / "tb.vvp")], check=True,
                         capture_output=True, text=True).stdout.split()
    assert out == expected
