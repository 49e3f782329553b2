"""`dlforge build` for real with the YoWASP tools: bitstreams for the iCEBreaker and a ULX3S,
their reports checked, and the two ways a build fails (too big, too slow) reported with the
numbers."""

import json

import pytest

from dlforge.boards.build import BuildFailed, build_board, toolchain_env
from dlforge.gen.cli import main

# A bitstream per test (the iCEBreaker one shared): minutes each with the YoWASP tools.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

KEYS = {"bitstream", "target_mhz", "fmax_mhz", "meets_timing", "luts", "ffs", "bram", "dsp"}


@pytest.fixture(scope="module")
def icebreaker(tmp_path_factory):
    out = tmp_path_factory.mktemp("icebreaker")
    return build_board("icebreaker", out_dir=out)


def test_icebreaker_bitstream(icebreaker):
    r = icebreaker
    assert KEYS <= set(r)
    assert r["meets_timing"] and r["fmax_mhz"] >= r["target_mhz"] == 24.0
    assert r["bitstream"].endswith(".bin")
    with open(r["bitstream"], "rb") as f:
        assert len(f.read()) > 100_000                  # a whole UP5K image (104 kB)
    assert 1000 < r["luts"] <= 5280 and 500 < r["ffs"] < r["luts"] and r["bram"] >= 1
    assert r["capacity"]["luts"] == [r["luts"], 5280]
    assert r["uart_divisor"] == 8 and r["baud"] == 3_000_000
    assert r["preset"]["cores"] == 0 and r["preset"]["engine"] is None


def test_command_json_and_a_missed_clock(tmp_path, capsys):
    """48 MHz is more than the link's logic reaches on an iCE40: the report says so and the
    command fails."""
    status = main(["build", "--board", "icebreaker", "--freq", "48", "-o", str(tmp_path),
                   "--json"])
    out = capsys.readouterr()
    report = json.loads(out.out)
    assert status == 1 and "timing not met" in out.err
    assert KEYS <= set(report) and report["target_mhz"] == 48.0
    assert not report["meets_timing"] and report["fmax_mhz"] < 48
    assert report["luts"] > 1000


def test_ulx3s_bitstream(tmp_path):
    r = build_board("ulx3s-12f", out_dir=tmp_path)
    assert r["meets_timing"] and r["fmax_mhz"] >= r["target_mhz"] == 45.0
    assert r["bitstream"].endswith(".bit")
    with open(r["bitstream"], "rb") as f:
        assert len(f.read()) > 100_000
    assert r["dsp"] <= 28 and r["luts"] <= 24288 and r["bram"] <= 56
    assert r["preset"]["engine"] == "2x2x2 int8" and r["uart_divisor"] == 15
    assert r["placer"] == "static"          # the ECP5 placer of boards.ooc.PLACERS


def test_a_design_that_does_not_fit(tmp_path):
    """The smallest convolution engine on an iCE40 UP5K: refused with what overflows."""
    with pytest.raises(BuildFailed, match="does not fit the iCE40UP5K") as info:
        build_board("icebreaker", engine="2x2x2", out_dir=tmp_path)
    report = info.value.report
    assert not report["fits"] and report["luts"] > 5280 and report["bitstream"] is None
    assert report["capacity"]["luts"][1] == 5280


def test_toolchain_is_the_yowasp_one(monkeypatch):
    for var in ("YOSYS", "NEXTPNR_ECP5", "ECPPACK"):
        monkeypatch.delenv(var, raising=False)
    env = toolchain_env("ecp5")
    assert "yowasp" in env["YOSYS"] and "yowasp" in env["NEXTPNR_ECP5"]
    assert "yowasp" in env["ECPPACK"]
