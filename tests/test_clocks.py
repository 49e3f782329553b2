"""The PLL solvers reach the asked frequency inside the primitives' ranges, and the clock
block instantiates the primitive with those settings."""

import pytest

from dlforge.boards.clocks import ecp5_pll, ice40_pll


@pytest.mark.parametrize("mhz", [25, 30, 40, 45, 50, 60, 75, 100, 125])
def test_ecp5_settings_in_range(mhz):
    s = ecp5_pll(25e6, mhz * 1e6)
    p = s.params
    assert s.fout_hz == pytest.approx(25e6 / p["CLKI_DIV"] * p["CLKFB_DIV"])
    assert 3.125e6 <= 25e6 / p["CLKI_DIV"] <= 400e6
    assert 400e6 <= s.fout_hz * p["CLKOP_DIV"] <= 800e6
    assert abs(s.fout_hz - mhz * 1e6) <= 0.01 * mhz * 1e6


def test_ecp5_exact_values():
    s = ecp5_pll(25e6, 45e6)
    assert s.fout_hz == 45e6
    assert s.params == {"CLKI_DIV": 5, "CLKFB_DIV": 9, "CLKOP_DIV": 13, "CLKOP_CPHASE": 6}
    # 48 MHz needs a 1 MHz phase detector, below the 3.125 MHz floor: the nearest is chosen
    assert ecp5_pll(25e6, 48e6).fout_hz == pytest.approx(46.875e6)


@pytest.mark.parametrize("mhz", [16, 24, 30, 36, 48, 60])
def test_ice40_settings_in_range(mhz):
    s = ice40_pll(12e6, mhz * 1e6)
    p = s.params
    fpfd = 12e6 / (p["DIVR"] + 1)
    fvco = fpfd * (p["DIVF"] + 1)
    assert 10e6 <= fpfd <= 133e6 and 533e6 <= fvco <= 1066e6
    assert s.fout_hz == pytest.approx(fvco / 2 ** p["DIVQ"])
    assert abs(s.fout_hz - mhz * 1e6) <= 0.02 * mhz * 1e6


def test_ice40_exact_value():
    s = ice40_pll(12e6, 24e6)
    assert s.fout_hz == 24e6 and s.params["DIVQ"] == 5 and s.params["DIVF"] == 63


def test_unreachable_frequencies():
    with pytest.raises(ValueError, match="ECP5.*nearest is 400 MHz"):
        ecp5_pll(25e6, 1e9)
    with pytest.raises(ValueError, match="iCE40"):
        ice40_pll(12e6, 5e6)


def _board_rtlil(name, freq=None):
    from dlforge.boards.presets import board_preset
    from dlforge.boards.top import BoardTop
    preset = board_preset(name, freq_mhz=freq)
    platform = preset.platform()
    top = BoardTop(preset, platform)
    plan = platform.prepare(top, "t")
    return top, plan.files["t.il"]


def test_ecp5_primitive_in_the_design():
    top, text = _board_rtlil("ulx3s-25f", 60)
    assert "EHXPLLL" in text and top.pll.fout_hz == 60e6
    for key, value in top.pll.params.items():
        assert f"parameter \\{key} {value}" in text or f"\\{key} {value}" in text, key


def test_ice40_primitive_in_the_design():
    top, text = _board_rtlil("icebreaker", 36)
    assert "SB_PLL40_PAD" in text and top.pll.fout_hz == 36e6
    assert "\\DIVF 47" in text


def test_no_pll_when_the_oscillator_is_the_clock():
    top, text = _board_rtlil("icebreaker", 12)
    assert "SB_PLL40" not in text and top.divisor == 4


def _tool(name):
    import shutil
    import sys
    from pathlib import Path
    local = Path(sys.executable).parent / name
    return str(local) if local.exists() else shutil.which(name)


@pytest.mark.skipif(_tool("yowasp-ecppll") is None, reason="yowasp-ecppll not installed")
def test_ecp5_solver_agrees_with_ecppll(tmp_path):
    """Lattice's own calculator (prjtrellis ecppll, from the YoWASP wheel) as the reference."""
    import re
    import subprocess
    for mhz in (45, 50, 60, 75, 100):
        subprocess.run([_tool("yowasp-ecppll"), "-i", "25", "-o", str(mhz), "-f", "pll.v"],
                       cwd=tmp_path, check=True, capture_output=True)
        text = (tmp_path / "pll.v").read_text()
        ref = {k: int(v) for k, v in re.findall(r"\.(CLKI_DIV|CLKFB_DIV|CLKOP_DIV)\((\d+)\)",
                                                  text)}
        ours = ecp5_pll(25e6, mhz * 1e6).params
        assert {k: ours[k] for k in ref} == ref, mhz


@pytest.mark.skipif(_tool("yowasp-icepll") is None, reason="yowasp-icepll not installed")
def test_ice40_solver_agrees_with_icepll():
    import re
    import subprocess
    for mhz in (24, 30, 36, 48, 60):
        out = subprocess.run([_tool("yowasp-icepll"), "-i", "12", "-o", str(mhz), "-q", "-m"],
                             check=True, capture_output=True, text=True).stdout
        ref = {k: int(v) for k, v in re.findall(r"// (DIVR|DIVF|DIVQ|FILTER_RANGE) =\s*(\d+)",
                                                  out)}
        assert ice40_pll(12e6, mhz * 1e6).params == ref, mhz
