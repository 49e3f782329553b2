"""Running the simulated board: the built program started, its device string learnt
(``tcp:127.0.0.1:PORT``, ``serial:/dev/pts/N``, ``xdma:P`` or ``dma:PATH``), stopped, and its
statistics collected."""

import json
import os
import selectors
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from dlforge.sim.board.build import DEFAULTS, UART_DEFAULTS, build_board

__all__ = ["SimBoard"]


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
