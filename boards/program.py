"""``dlforge program``: load a bitstream into a board with openFPGALoader (Debian package
``openfpgaloader``), with an error that says what to do when the tool or the board is missing.

The bitstream goes to the FPGA's configuration RAM (lost at power-off), which is what a
development loop wants; ``flash=True`` writes the board's SPI flash instead.
"""

import shutil
import subprocess
from pathlib import Path

from .build import _default_dir, _top_name
from .presets import board_preset

__all__ = ["program_board", "ProgramError", "LOADER_BOARDS"]

#: dlforge board -> openFPGALoader's board name (its USB cable and FPGA family)
LOADER_BOARDS = {"ulx3s-12f": "ulx3s", "ulx3s-25f": "ulx3s", "ulx3s-45f": "ulx3s",
                 "ulx3s-85f": "ulx3s", "icebreaker": "ice40_generic"}

_NO_BOARD = ("unable to open ftdi device", "failed to claim cable", "jtag init failed",
             "no device found", "cable not found", "device not found")


class ProgramError(RuntimeError):
    """Programming a board failed, with a message that says what to do about it (install the
    tool, plug in the board, build the bitstream) for the CLI to show instead of a traceback."""

    pass


def program_board(board, bitstream=None, flash=False, timeout=300):
    """Program ``board``; returns openFPGALoader's output.  Raises :class:`ProgramError`."""
    board_preset(board)                                   # a known board, or ValueError
    loader = shutil.which("openFPGALoader")
    if loader is None:
        raise ProgramError("openFPGALoader is not installed: on Debian or Ubuntu "
                           "`apt-get install openfpgaloader` (it programs the ULX3S and the "
                           "iCEBreaker over their USB cables)")
    if bitstream is None:
        suffix = "bin" if board == "icebreaker" else "bit"
        bitstream = _default_dir(board) / f"{_top_name(board)}.{suffix}"
        if not bitstream.exists():
            raise ProgramError(f"no bitstream at {bitstream}: run `dlforge build --board "
                               f"{board}` first, or give --bitstream FILE")
    bitstream = Path(bitstream)
    if not bitstream.is_file():
        raise ProgramError(f"no such bitstream: {bitstream}")
    cmd = [loader, "-b", LOADER_BOARDS[board]]
    if flash or board == "icebreaker":
        cmd.append("-f")                  # the iCE40 boots from its SPI flash: write it there
    cmd.append(str(bitstream))
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise ProgramError(f"openFPGALoader did not finish within {timeout} s") from None
    text = (result.stdout + result.stderr).strip()
    if result.returncode == 0 and not any(s in text.lower() for s in _NO_BOARD):
        return text
    last = "\n".join(text.splitlines()[-4:])
    if any(s in text.lower() for s in _NO_BOARD):
        raise ProgramError(f"no {board} found: is it plugged in by USB, and may this user open "
                           f"it (udev rules, or run as root)? openFPGALoader said:\n{last}")
    raise ProgramError(f"openFPGALoader failed (exit {result.returncode}):\n{last}")
