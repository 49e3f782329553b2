"""Where a design's small memories go: block RAM or LUT RAM, chosen per build.

Yosys maps a shallow, wide memory by its own cost rule, and on the ECP5 it picks LUT RAM for
FIFOs and corner turns: a 16x4 LUT RAM there takes six logic cells, so the raster's 197-bit
group FIFO became 50 of them (some 300 LUT4), where six of the 208 block RAMs hold it.  Which
is better depends on the board: a core alone is short of logic, two cores on an 85F are short
of block RAM.  ``small_ram`` ("block" or "lut") says which, and the memories it governs carry
the mapping attribute (``ram_style``, read by yosys' ``memory_libmap`` and by Vivado).

:class:`SmallRamFifo` is ``SyncFIFOBuffered`` with that choice.  It already reads its memory
through a register, as block RAM reads, so only the attributes differ; its behaviour is
``SyncFIFOBuffered``'s.
"""

from amaranth.lib.fifo import SyncFIFOBuffered

__all__ = ["SMALL_RAMS", "SmallRamFifo", "check_small_ram", "ram_style"]

#: The choices, first the default.
SMALL_RAMS = ("block", "lut")


def check_small_ram(small_ram):
    """The error a constructor raises for a value not in :data:`SMALL_RAMS` (or None)."""
    if small_ram not in SMALL_RAMS:
        return f"small_ram must be one of {SMALL_RAMS}, not {small_ram!r}"
    return None


def ram_style(small_ram):
    """The ``ram_style`` attribute for a choice (yosys and Vivado both read it)."""
    return {"block": "block", "lut": "distributed"}[small_ram]


class SmallRamFifo(SyncFIFOBuffered):
    """``SyncFIFOBuffered(width=..., depth=...)`` with its storage in the RAM ``small_ram``
    names."""

    def __init__(self, *, width, depth, small_ram="block"):
        problem = check_small_ram(small_ram)
        if problem:
            self._MustUse__silence = True       # never elaborated: no "unused" warning
            raise ValueError(problem)
        self.small_ram = small_ram
        super().__init__(width=width, depth=depth)

    def elaborate(self, platform):
        m = super().elaborate(platform)
        if self.depth > 1:                          # depth 0 and 1 have no memory
            attrs = m.submodules.storage.attrs
            attrs["ram_style"] = ram_style(self.small_ram)
            # The FIFO never reads the entry it writes in the same clock (it reads only
            # below its level, and writes only while not full); without this yosys keeps a
            # bypass register and multiplexer per bit for that collision.
            attrs["no_rw_check"] = 1
        return m
