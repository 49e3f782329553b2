"""The boards dlforge builds for, and what of the accelerator each one holds.

Sizes come from place-and-route on each device (see docs/boards.md for the figures).  The
JPEG decoder core needs about 33k LUT4 and 161 block RAMs at 4096 pixels wide, so the small
parts carry the convolution engine alone (``cores=0``), the 45F one core at reduced limits,
the 85F one full-width core next to a small engine.
"""

from dataclasses import dataclass, replace

from amaranth_boards.icebreaker import ICEBreakerPlatform
from amaranth_boards.ulx3s import (ULX3S_12F_Platform, ULX3S_25F_Platform, ULX3S_45F_Platform,
                                   ULX3S_85F_Platform)

from ..rtl.conv.config import EngineConfig, parse_engine
from ..rtl.jpeg.limits import DEFAULT_MAX_HEIGHT, DEFAULT_MAX_WIDTH, LIMIT_MAX_WIDTH
from ..rtl.small_ram import check_small_ram

__all__ = ["BoardPreset", "BOARDS", "board_preset"]


@dataclass(frozen=True)
class BoardPreset:
    """What one board gets built with (device, clock, and which parts of the accelerator fit),
    in one place, so that building or programming a board needs only its name."""

    name: str
    platform: type
    device: str                     # the FPGA, as its vendor names it
    freq_mhz: float                 # default system clock (the PLL's target)
    cores: int                      # JPEG decoder cores
    max_width: int = DEFAULT_MAX_WIDTH
    max_height: int = DEFAULT_MAX_HEIGHT
    max_payload: int = 1024         # request frame payload (two slots in the receiver)
    reply_payload: int = 1024       # reply frame payload (two buffers per core)
    conv: EngineConfig = None
    rx_fifo: int = 2048             # the UART receiver's buffer, bytes
    small_ram: str = "block"        # the cores' FIFOs and corner turns (dlforge.rtl.small_ram)
    contexts: int = 1               # files per core (2: C-slowed pairs, rtl/jpeg/core_pair.py)

    def with_options(self, cores=None, freq_mhz=None, engine=None, max_width=None,
                     small_ram=None, contexts=None):
        """A copy with the user's changes; ``engine`` is ``"none"`` or ``"RxCxS"`` (rows,
        columns, int8 lanes; buffers as the board's own engine, or the small one's);
        ``max_width``, ``small_ram`` and ``contexts`` are the cores' (block RAM against
        image width; files per core)."""
        preset = self
        if contexts is not None:
            if contexts not in (1, 2):
                raise ValueError(f"{self.name}: files per core (contexts) must be 1 or 2, "
                                 f"not {contexts}")
            preset = replace(preset, contexts=contexts)
        if max_width is not None:
            if max_width % 16 or not 16 <= max_width <= LIMIT_MAX_WIDTH - 8:
                raise ValueError(f"{self.name}: max width must be a multiple of 16 from 16 to "
                                 f"{LIMIT_MAX_WIDTH - 8}, not {max_width}")
            preset = replace(preset, max_width=max_width)
        if small_ram is not None:
            problem = check_small_ram(small_ram)
            if problem:
                raise ValueError(f"{self.name}: {problem}")
            preset = replace(preset, small_ram=small_ram)
        if engine is not None:
            preset = replace(preset, conv=parse_engine(engine, self.conv or SMALL_ENGINE))
        if cores is not None:
            if cores < 0:
                raise ValueError(f"{self.name}: cores must be at least 0, not {cores}")
            preset = replace(preset, cores=cores)
        if freq_mhz is not None:
            if not 1 <= freq_mhz <= 400:
                raise ValueError(f"--freq {freq_mhz} MHz is outside 1-400 MHz")
            preset = replace(preset, freq_mhz=float(freq_mhz))
        return preset

    def describe(self):
        engine = self.conv
        return {"board": self.name, "device": self.device, "freq_mhz": self.freq_mhz,
                "cores": self.cores, "max_width": self.max_width, "max_height": self.max_height,
                "small_ram": self.small_ram, "files_per_core": self.contexts,
                "max_payload": self.max_payload, "reply_payload": self.reply_payload,
                "engine": None if engine is None else
                f"{engine.rows}x{engine.cols}x{engine.simd} int{engine.operand_bits}"}


# Engines for the boards.  The requantisation stage takes 17 of the ECP5's 18x18 multipliers
# whatever the array size, and the 12F/25F parts have 28: a 2x2 array of 2 int8 lanes (8 MACs
# a clock) is what fits there.  Buffers are sized for 3x3 kernels over up to 128 input
# channels; host words are 16 bytes.
SMALL_ENGINE = EngineConfig(rows=2, cols=2, simd=2, weight_depth=512, input_depth=2048,
                            psum_depth=256, link_bytes=16, max_reduction=1152)
MEDIUM_ENGINE = EngineConfig(rows=2, cols=2, simd=4, weight_depth=512, input_depth=2048,
                             psum_depth=256, link_bytes=16, max_reduction=1152)
BOARDS = {p.name: p for p in (
    BoardPreset("ulx3s-12f", ULX3S_12F_Platform, "LFE5U-12F", 45.0, cores=0,
                conv=SMALL_ENGINE),
    BoardPreset("ulx3s-25f", ULX3S_25F_Platform, "LFE5U-25F", 45.0, cores=0,
                conv=SMALL_ENGINE),
    # (the core fills 83 % of the 45F's LUTs; placed for 45 MHz it was estimated at 37.9)
    BoardPreset("ulx3s-45f", ULX3S_45F_Platform, "LFE5U-45F", 36.0, cores=1, max_width=1024),
    # (routed for 45 MHz it reached 43.5, held by the Huffman decoder's symbol loop)
    # (its block RAM was 203 of 208 with LUT-RAM FIFOs and corner turns: it keeps them there)
    BoardPreset("ulx3s-85f", ULX3S_85F_Platform, "LFE5U-85F", 39.0, cores=1, max_width=4096,
                conv=MEDIUM_ENGINE, small_ram="lut"),
    BoardPreset("icebreaker", ICEBreakerPlatform, "iCE40UP5K", 24.0, cores=0,
                max_payload=256, reply_payload=256, rx_fifo=512),
)}


def board_preset(name, cores=None, freq_mhz=None, engine=None, max_width=None, small_ram=None,
                 contexts=None):
    try:
        preset = BOARDS[name]
    except KeyError:
        raise ValueError(f"unknown board {name!r}; known: {', '.join(BOARDS)}") from None
    return preset.with_options(cores, freq_mhz, engine, max_width, small_ram, contexts)

