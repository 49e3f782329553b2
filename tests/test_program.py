"""`dlforge program`: openFPGALoader run for real with no board attached, and the messages for
a missing tool or bitstream."""

import os
import shutil

import pytest

from dlforge.boards.program import LOADER_BOARDS, ProgramError, program_board
from dlforge.boards.presets import BOARDS
from dlforge.gen.cli import main

needs_loader = pytest.mark.skipif(shutil.which("openFPGALoader") is None,
                                  reason="openFPGALoader not installed "
                                         "(Debian: apt-get install openfpgaloader)")


@needs_loader
@pytest.mark.parametrize("board", ["ulx3s-85f", "icebreaker"])
def test_no_board_attached(tmp_path, board):
    bitstream = tmp_path / "design.bit"
    bitstream.write_bytes(b"\xff" * 64)
    with pytest.raises(ProgramError, match=f"no {board} found: is it plugged in") as info:
        program_board(board, bitstream)
    assert "openFPGALoader said" in str(info.value)


def test_missing_loader(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    bitstream = tmp_path / "design.bit"
    bitstream.write_bytes(b"\0")
    with pytest.raises(ProgramError, match="apt-get install openfpgaloader"):
        program_board("ulx3s-12f", bitstream)


@needs_loader
def test_missing_bitstream(tmp_path, monkeypatch):
    monkeypatch.setenv("DLFORGE_BUILD_DIR", str(tmp_path))
    with pytest.raises(ProgramError, match="dlforge build --board ulx3s-45f"):
        program_board("ulx3s-45f")
    with pytest.raises(ProgramError, match="no such bitstream"):
        program_board("ulx3s-45f", tmp_path / "nothing.bit")


def test_unknown_board():
    with pytest.raises(ValueError, match="unknown board"):
        program_board("arty-a7")


def test_every_board_has_a_cable():
    assert set(LOADER_BOARDS) == set(BOARDS)


@needs_loader
def test_command_exit_status_and_message(tmp_path, capsys):
    bitstream = tmp_path / "design.bit"
    bitstream.write_bytes(b"\xff" * 64)
    assert main(["program", "--board", "ulx3s-25f", "--bitstream", str(bitstream)]) == 2
    assert "no ulx3s-25f found" in capsys.readouterr().err
    assert os.path.exists(bitstream)
