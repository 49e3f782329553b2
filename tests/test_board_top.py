"""Board tops: every preset elaborates for its platform, and its UART meets the host's bit rate
by construction (or the preset is refused)."""

import pytest

from dlforge.boards.presets import BOARDS, board_preset
from dlforge.boards.top import BoardTop
from dlforge.rtl.link.protocol import BAUD


def _prepare(preset):
    platform = preset.platform()
    top = BoardTop(preset, platform)
    return top, platform.prepare(top, "t")


@pytest.mark.parametrize("name", [n for n in BOARDS if BOARDS[n].cores == 0])
def test_engine_only_presets_elaborate(name):
    top, plan = _prepare(BOARDS[name])
    text = plan.files["t.il"]
    assert "uart_rx" in text and "core0" not in text
    assert ("engine" in text) == (BOARDS[name].conv is not None)
    assert abs(top.pll.fout_hz / top.divisor / BAUD - 1) <= 0.02


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in BOARDS if BOARDS[n].cores > 0])
def test_decoder_presets_elaborate(name):
    top, plan = _prepare(BOARDS[name])
    text = plan.files["t.il"]
    assert "core0" in text and "core1" not in text
    assert abs(top.pll.fout_hz / top.divisor / BAUD - 1) <= 0.02


def test_frequencies_the_uart_cannot_use_are_refused():
    preset = board_preset("ulx3s-12f", freq_mhz=10)          # 3.3 clocks per bit
    with pytest.raises(ValueError, match="clocks per bit"):
        BoardTop(preset, preset.platform())


def test_the_clock_moves_to_one_the_uart_can_use():
    # 40 MHz / 13 is 2.6 % off 3 Mbaud: a clock near 39 MHz (13 clocks per bit) is taken
    preset = board_preset("ulx3s-12f", freq_mhz=40)
    top = BoardTop(preset, preset.platform())
    top._MustUse__silence = True
    assert top.divisor == 13 and abs(top.pll.fout_hz / 13 / BAUD - 1) <= 0.02
    assert abs(top.pll.fout_hz - 40e6) <= 4e6
    preset = board_preset("ulx3s-12f", freq_mhz=45)          # exact already
    top = BoardTop(preset, preset.platform())
    top._MustUse__silence = True
    assert top.pll.fout_hz == 45e6 and top.divisor == 15


def test_options():
    assert board_preset("ulx3s-85f", cores=2).cores == 2
    assert board_preset("icebreaker", freq_mhz=36).freq_mhz == 36.0
    assert board_preset("ulx3s-45f", cores=0).cores == 0       # the link alone
    with pytest.raises(ValueError, match="cores must be at least 0"):
        board_preset("ulx3s-45f", cores=-1)
    with pytest.raises(ValueError, match="unknown board"):
        board_preset("ulx3s-99f")
    with pytest.raises(ValueError, match="outside"):
        board_preset("icebreaker", freq_mhz=1000)
    assert board_preset("ulx3s-85f", engine="none").conv is None
    engine = board_preset("icebreaker", engine="4x2x2").conv
    assert (engine.rows, engine.cols, engine.simd) == (4, 2, 2)
    with pytest.raises(ValueError, match="ROWSxCOLSxLANES"):
        board_preset("icebreaker", engine="big")
    two = board_preset("ulx3s-85f", cores=2, max_width=2048, small_ram="block")
    assert (two.cores, two.max_width, two.small_ram) == (2, 2048, "block")
    assert two.describe()["max_width"] == 2048
    for width in (2040, 0, 8192):
        with pytest.raises(ValueError, match="multiple of 16"):
            board_preset("ulx3s-85f", max_width=width)
    with pytest.raises(ValueError, match="small_ram must be one of"):
        board_preset("ulx3s-85f", small_ram="bram")
    pair = board_preset("ulx3s-85f", contexts=2)
    assert pair.contexts == 2 and pair.describe()["files_per_core"] == 2
    assert BOARDS["ulx3s-85f"].describe()["files_per_core"] == 1
    with pytest.raises(ValueError, match="contexts\\) must be 1 or 2"):
        board_preset("ulx3s-85f", contexts=3)


@pytest.mark.slow
def test_a_board_of_two_file_cores_elaborates():
    """``--contexts 2``: the board's core is the C-slowed pair, two lanes to the host."""
    top, plan = _prepare(board_preset("ulx3s-45f", contexts=2, max_width=256))
    text = plan.files["t.il"]
    # one core (JpegCorePair: its C-slowed jobs), a feed per file
    assert "core0.pair.jobs" in text and "core1" not in text
    assert "core0.feed0" in text and "core0.feed1" in text


def test_presets_describe_themselves():
    for name, preset in BOARDS.items():
        d = preset.describe()
        assert d["board"] == name and d["device"] == preset.device
        assert (d["engine"] is None) == (preset.conv is None)
