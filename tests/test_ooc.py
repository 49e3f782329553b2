"""Out-of-context synthesis with the YoWASP tools: real figures from a real place-and-route."""

import pytest
from amaranth import unsigned

from dlforge.boards.ooc import DEVICES, abc9_failed, synthesize
from dlforge.rtl.stream_pipe import Narrow


@pytest.mark.slow
def test_small_block_on_ecp5(tmp_path):
    figures = synthesize(Narrow(unsigned(8), 8, 2), "narrow", tmp_path, device="ecp5-25f",
                         freq_mhz=50)
    assert figures["device"] == "ecp5-25f" and figures["top"] == "narrow"
    assert 64 <= figures["ffs"] < 200          # the 64-bit holding register and a few more
    assert 0 < figures["luts"] < 500 and figures["dsp"] == 0 and figures["bram"] == 0
    assert figures["fmax_mhz"] > 50 and figures["meets_timing"]
    assert figures["placer"] == "static"        # the ECP5 default (see PLACERS)
    assert "Running Static placer" in (tmp_path / "nextpnr.log").read_text()
    assert (tmp_path / "narrow.il").exists() and (tmp_path / "report.json").exists()


def test_unknown_device(tmp_path):
    block = Narrow(unsigned(8), 8, 2)
    with pytest.raises(ValueError, match="unknown device"):
        synthesize(block, "narrow", tmp_path, device="xc7a35t")
    block._MustUse__silence = True


def test_devices_cover_the_boards_we_target():
    assert {"ecp5-85f", "ice40-up5k"} <= set(DEVICES)


def test_ultrascale_plus_is_a_projection(tmp_path):
    """xcup: yosys synth_xilinx's cells counted, no place-and-route, and said so."""
    figures = synthesize(Narrow(unsigned(8), 8, 2), "narrow", tmp_path, device="xcup")
    assert figures["device"] == "xcup" and "synthesis only" in figures["projection"]
    assert figures["fmax_mhz"] is None and figures["meets_timing"] is None
    assert 64 <= figures["ffs"] < 200          # the 64-bit holding register and a few more
    assert 0 < figures["luts"] < 200
    assert figures["dsp"] == figures["bram"] == figures["uram"] == figures["lutram"] == 0
    assert (tmp_path / "stat.json").exists()


def test_synth_command_prints_a_projection(tmp_path, capsys):
    from dlforge.gen.cli import main
    assert main(["synth", "idct", "--device", "xcup", "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "projection" in out and "LUT6" in out and "DSP48E2" in out
    with pytest.raises(SystemExit):
        main(["synth", "idct", "--device", "xc7a35t"])


def test_abc9_failures_fall_back_and_other_errors_do_not():
    abc9 = "2.44.21.4. Executing ABC9_EXE pass\n2.44.21.6. Executing AIGER frontend.\n"
    assert abc9_failed(abc9 + "ERROR: Assert `count_id(wire->name) == 0' failed in x.cc\n")
    assert abc9_failed(abc9 + "ERROR: Assert `GetSize(conn.first) == GetSize(conn.second)'"
                                " failed in ../yosys-src/kernel/rtlil.cc:3102.\n")
    # A real design error, or an assertion outside ABC9, must not be hidden by a rerun.
    assert not abc9_failed(abc9 + "ERROR: Module `foo' referenced in module `top' is not"
                                    " part of the design.\n")
    assert not abc9_failed("2.3. Executing PROC pass\nERROR: Assert `x' failed in y.cc\n")
    assert not abc9_failed("")
    # The closing check failing on what ABC9 mapped (two drivers on one net) falls back too;
    # where ABC9 did not run (the -noabc9 rerun, iCE40), the same failure is the design's.
    check = ("Warning: multiple conflicting drivers for top.\\x [7]:\n"
             "ERROR: Found 1 problems in 'check -assert'.\n")
    assert abc9_failed("4.2. Executing ABC9 pass.\n" + check)
    assert not abc9_failed("4.2. Executing ABC pass.\n" + check)


def test_a_renaming_pass_out_of_memory_falls_back_and_nothing_else_does():
    """yosys' WebAssembly build stops in AUTONAME, its last pass, on the two-file core (the
    log ends with that pass's header): the flow reruns without it.  A stop anywhere else is
    not such a case."""
    from dlforge.boards.ooc import autoname_trapped
    mapped = ("2.46. Executing OPT_LUT_INS pass (discard unused LUT inputs).\n"
              "Removed 0 unused cells and 50111 unused wires.\n\n")
    assert autoname_trapped(mapped + "2.47. Executing AUTONAME pass.\n")
    assert not autoname_trapped(mapped)
    assert not autoname_trapped(mapped + "2.47. Executing AUTONAME pass.\n"
                                         "2.48. Executing HIERARCHY pass (managing design "
                                         "hierarchy).\n")
    assert not autoname_trapped("")
