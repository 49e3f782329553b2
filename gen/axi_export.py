"""The accelerator as Verilog with AXI ports, and the manifest a shell integrator reads
instead of our source (docs/axi-export.md); ``dlforge export-axi`` writes them
(:mod:`dlforge.gen.commands.axi`)."""

import json
from pathlib import Path

from ..rtl.jpeg.limits import DEFAULT_MAX_HEIGHT, DEFAULT_MAX_WIDTH
from .manifest import describe_shape

__all__ = ["TOP", "axi_manifest", "export_axi"]

TOP = "dlforge_axi"

_AXI_ROLES = {
    "s_axis": ("AXI4-Stream", "slave", "host to card (an XDMA H2C stream): request frames "
                                       "padded to whole beats; TLAST and TKEEP are ignored, "
                                       "frames delimit themselves"),
    "m_axis": ("AXI4-Stream", "master", "card to host (an XDMA C2H stream): reply frames "
                                        "padded to whole beats; TLAST on the last beat of "
                                        "every frame, TKEEP all ones"),
    "s_axil": ("AXI4-Lite", "slave", "registers (an XDMA AXI-Lite user BAR): register N at "
                                     "byte address 4*N"),
}


def _register_map(top):
    from ..rtl.link.protocol import MAX_CORES, Register
    values = top.constant_registers()
    regs = []
    for r in Register:
        entry = {"name": r.name, "number": int(r), "byte_address": 4 * int(r),
                 "access": "write 1 to reset the decoder cores and the engine (reads 0)"
                           if r is Register.RESET else "read-only"}
        if r in (Register.JPEG_IMAGES, Register.JPEG_ERRORS):
            entry["count"] = MAX_CORES          # one per core: number + core
            entry["implemented"] = top.n_cores
        if r in values:
            entry["value"] = values[r]
        regs.append(entry)
    return regs


def _ports(component):
    """Every Verilog port of the top, in the order Amaranth emits the signature."""
    from amaranth.hdl import Value
    from amaranth.lib import wiring
    ports = []
    for path, member, value in component.signature.flatten(component):
        name = "__".join(str(p) for p in path)
        entry = {"name": name, "direction": "input" if member.flow == wiring.In else "output",
                 "width": len(Value.cast(value)), "shape": describe_shape(member.shape)}
        if name == "aclk":
            entry["role"] = "ACLK: the clock of every interface (rising edge), e.g. axi_aclk"
        elif name == "aresetn":
            entry["role"] = ("ARESETn: synchronous reset, active low, for every interface, "
                             "e.g. axi_aresetn")
        else:
            entry["interface"] = path[0]
            entry["axi_signal"] = str(path[1]).upper()
            if path[1] in ("awprot", "arprot"):
                entry["role"] = "ignored"
            elif path == ("s_axis", "tlast"):
                entry["role"] = "ignored (frames are self-delimiting)"
        ports.append(entry)
    return ports


def axi_manifest(component, verilog_name=None):
    """A JSON-able description of an :class:`~dlforge.rtl.axi_export.AxiAccelerator`."""
    from ..rtl.link.protocol import (HEADER_BYTES, HEADER_FIELDS, MAGIC, TRAILER_BYTES, VERSION,
                                     Opcode, Status)
    top = component.accelerator
    ports = _ports(component)
    interfaces = {}
    for iface, (protocol, mode, purpose) in _AXI_ROLES.items():
        signals = {p["axi_signal"]: p["name"] for p in ports if p.get("interface") == iface}
        info = {"protocol": protocol, "mode": mode, "purpose": purpose, "signals": signals,
                "clock": "aclk", "reset": "aresetn"}
        if protocol == "AXI4-Stream":
            info["data_width"] = 8 * top.link_bytes
        else:
            info |= {"data_width": 32, "addr_width": component.addr_width,
                     "responses": "OKAY for aligned addresses inside the 64 registers "
                                  "(writes other than 1 to RESET are ignored); SLVERR for "
                                  "unaligned addresses or, with addr_width > 8, addresses "
                                  "from 0x100 up"}
        interfaces[iface] = info
    return {
        "block": "axi",
        "top": TOP,
        "verilog": verilog_name or f"{TOP}.v",
        "parameters": {"cores": top.n_cores, "max_width": top.max_width,
                       "max_height": top.max_height, "max_payload": top.max_payload,
                       "reply_payload": top.reply_payload,
                       "input_fifo_bytes": top.input_fifo_bytes,
                       "link_bytes": top.link_bytes,
                       "addr_width": component.addr_width,
                       "engine": top.conv.as_dict() if top.conv else None},
        "ports": ports,
        "interfaces": interfaces,
        "clocking": {"clock": "aclk", "reset": "aresetn",
                     "note": "one clock domain; reset synchronous to aclk, active low, "
                             "at least one cycle"},
        "registers": _register_map(top),
        "protocol": {
            "version": {"major": VERSION >> 16, "minor": VERSION & 0xFFFF, "register": VERSION},
            "frame": {"magic": MAGIC.hex(), "header_bytes": HEADER_BYTES,
                      "header": [{"bytes": f"{f.at}..{f.at + f.size - 1}" if f.size > 1
                                  else str(f.at), "field": f"{f.name}: {f.meaning}"}
                                 | ({"type": f"uint{8 * f.size} LE"}
                                    if f.size > 1 and f.name != "magic" else {})
                                 for f in HEADER_FIELDS],
                      "payload": "length bytes (requests at most max_payload, replies at "
                                 "most reply_payload)",
                      "trailer_bytes": TRAILER_BYTES,
                      "trailer": "CRC-32 (IEEE, as zlib.crc32) of the payload section, "
                                 "uint32 LE",
                      "link_bytes": top.link_bytes,
                      "padding": "each section (header, payload, trailer) is zero-padded to "
                                 "whole beats of link_bytes; the CRC-32 covers the padded "
                                 "payload; frames start on beat boundaries"},
            "opcodes": {op.name: int(op) for op in Opcode},
            "statuses": {s.name: int(s) for s in Status},
            "document": "docs/protocol.md",
        },
        "host": {
            "transport": "xdma:PATH",
            "h2c": "PATH_h2c_0: the host writes request frames, which reach s_axis",
            "c2h": "PATH_c2h_0: the host reads reply frames from m_axis; TLAST ends each read "
                   "at a frame boundary",
            "example": ("dlforge stream --device xdma:/dev/xdma0"
                        + (f"?link_bytes={top.link_bytes}" if top.link_bytes > 1 else "")),
            "registers": "the host runtime reads registers with READ_REGS frames over the "
                         "streams; s_axil is for drivers and monitors (e.g. /dev/xdma0_user)",
            "data_width": (f"these streams are {8 * top.link_bytes} bits: connect an XDMA "
                           f"stream of that width directly (export with --link-bytes 8..64 "
                           f"for 64..512 bits)"),
            "device_string": (f"xdma:PATH?link_bytes={top.link_bytes}" if top.link_bytes > 1
                              else "xdma:PATH"),
        },
    }


def export_axi(out_dir, cores=1, max_width=DEFAULT_MAX_WIDTH, max_height=DEFAULT_MAX_HEIGHT,
               max_payload=None, reply_payload=None, conv=None, addr_width=8, link_bytes=1):
    """Write ``out_dir/dlforge_axi.v`` and ``out_dir/manifest.json``; return (path, manifest)."""
    from amaranth.back import verilog

    from ..rtl.axi_export import AxiAccelerator
    from ..rtl.link.protocol import MAX_PAYLOAD
    component = AxiAccelerator(cores, max_width, max_height,
                               MAX_PAYLOAD if max_payload is None else max_payload, conv=conv,
                               reply_payload=reply_payload, addr_width=addr_width,
                               link_bytes=link_bytes)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{TOP}.v"
    path.write_text(verilog.convert(component, name=TOP, emit_src=False))
    info = axi_manifest(component, path.name)
    (out_dir / "manifest.json").write_text(json.dumps(info, indent=2) + "\n")
    return path, info
