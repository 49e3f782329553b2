"""A memory's ``no_rw_check`` attribute made effective in Amaranth's RTLIL, as it is in Verilog.

The gateware marks the memories whose read never meets a write to the same word in the same
clock, or does not care what it reads then, ``no_rw_check`` (``lib.memory.Memory(attrs=...)``):
block RAM may then read as it likes.  Yosys applies that attribute in ``memory_dff``, where it
joins an asynchronous read port and its flip-flop into a synchronous port.  From Amaranth's
Verilog that happens; Amaranth's RTLIL already has synchronous ports (``$memrd_v2`` with
``CLK_ENABLE``), the pass leaves them alone, and their read-before-write collision stays
defined.  A DP16KD reads across its two ports as it likes, so yosys then builds the defined
behaviour around each such block RAM (``emulate_read_first``: the written word and address
held a clock and a comparator and multiplexer behind the read): on the two-file decoder core
about 2,000 flip-flops, some 1,300 LUT4 and a multiplexer behind the coefficient buffer's
read, none of which the design asked for.

:func:`apply` sets, on every read port of a ``no_rw_check`` memory, the bits of
``COLLISION_X_MASK`` (the port's read is undefined when that write port writes its word in the
same clock) for each write port it is not transparent to: what ``memory_dff -no-rw-check``
would set.  Every flow that reads RTLIL (``dlforge synth``, board builds, the gate-level
check) reads it through this.
"""

import re

__all__ = ["apply"]

_MODULE = re.compile(r"^module .*?^end$", re.M | re.S)
_MEMORY = re.compile(r"^  memory [^\n]*?(\\\S+)$", re.M)
_CELL = re.compile(r"^  cell \$memrd_v2 .*?^  end$", re.M | re.S)


def _marked(module):
    """Names of the memories of ``module`` (RTLIL text) that carry ``no_rw_check``: the
    attribute lines directly above a ``memory`` line belong to it."""
    names = set()
    lines = module.split("\n")
    for k, line in enumerate(lines):
        found = _MEMORY.match(line)
        if not found:
            continue
        j = k - 1
        while j >= 0 and lines[j].startswith("  attribute "):
            if re.match(r"  attribute \\no_rw_check 1$", lines[j]):
                names.add(found.group(1))
            j -= 1
    return names


def _param(cell, name):
    found = re.search(rf"^    parameter \\{name} (\S+)$", cell, re.M)
    return found.group(1) if found else None


def _fix_port(cell, names):
    memid = _param(cell, "MEMID")
    if memid is None or memid.strip('"').replace("\\\\", "\\") not in names:
        return cell
    transparency, collision = _param(cell, "TRANSPARENCY_MASK"), _param(cell, "COLLISION_X_MASK")
    width, _, bits = collision.partition("'")
    t_bits = transparency.partition("'")[2]
    if not bits or len(bits) != len(t_bits):
        return cell
    undefined = "".join("0" if t == "1" else "1" for t in t_bits)
    return cell.replace(f"parameter \\COLLISION_X_MASK {collision}",
                        f"parameter \\COLLISION_X_MASK {width}'{undefined}")


def _fix_module(module):
    names = _marked(module)
    if not names:
        return module
    return _CELL.sub(lambda cell: _fix_port(cell.group(0), names), module)


def apply(text):
    """``text`` (Amaranth's RTLIL) with every ``no_rw_check`` memory's read ports allowed
    any value on a collision with a write port they are not transparent to."""
    return _MODULE.sub(lambda module: _fix_module(module.group(0)), text)
