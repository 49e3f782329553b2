"""Progress of long commands on stderr: the phase, the time since the start and, where a tool
says it, how far it has got (yosys's pass, nextpnr's placer and router, Verilator's C++ files
compiled, a bench's files or layers done).

Only ever on stderr, so that a command's JSON on stdout stays clean, and rate-limited: on a
terminal one line rewritten in place (``\\r``) at most every second, elsewhere (a log file,
CI) at most one line every :data:`INTERVAL` seconds, plus one line per phase change and one
at the end.  A background thread repeats the line while a step that reports nothing runs (a
Verilator build, a simulation), polling the phase's ``watch`` (for example a log file's last
lines) for the detail.

On by default except under pytest (``PYTEST_CURRENT_TEST``, which subprocesses inherit);
:data:`ENV` set to 1 turns it on and 0 off everywhere, and ``enabled=`` overrides both.
"""

import math
import os
import re
import sys
import threading
import time
from pathlib import Path

__all__ = ["Progress", "ENV", "INTERVAL_ENV", "INTERVAL", "progress_enabled", "LogTail",
           "yosys_step", "nextpnr_step", "verilator_build_step", "count_in_log", "elapsed"]

#: 1: progress lines on; 0: off (default: on, except under pytest).
ENV = "DLFORGE_PROGRESS"
#: Seconds between lines when stderr is not a terminal (default :data:`INTERVAL`).
INTERVAL_ENV = "DLFORGE_PROGRESS_INTERVAL"
INTERVAL = 10.0
TTY_INTERVAL = 1.0


def progress_enabled(asked=None):
    """Whether progress is shown: ``asked`` if given, else :data:`ENV`, else not under
    pytest."""
    if asked is not None:
        return bool(asked)
    value = os.environ.get(ENV, "").strip().lower()
    if value:
        return value not in ("0", "no", "off", "false")
    return "PYTEST_CURRENT_TEST" not in os.environ


def elapsed(seconds):
    """``75.3`` -> ``"1m15s"``; ``3725`` -> ``"1h02m05s"``."""
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class Progress:
    """One long command's progress line.

    ``what``: the command (``"dlforge build"``); ``stream``: stderr by default; ``enabled``:
    see :func:`progress_enabled`; ``interval``: seconds between repeated lines; ``clock``:
    a monotonic clock (tests pass a fake one); ``heartbeat``: run the background thread that
    repeats the line and polls ``watch`` (off for tests that drive the clock).

    A disabled Progress accepts every call and writes nothing, so callers need no tests.
    """

    def __init__(self, what, *, stream=None, enabled=None, interval=None, clock=time.monotonic,
                 heartbeat=True):
        self.what = what
        self.enabled = progress_enabled(enabled)
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        if interval is None:
            try:
                interval = float(os.environ.get(INTERVAL_ENV, ""))
            except ValueError:
                interval = TTY_INTERVAL if self.tty else INTERVAL
        self.interval = interval
        self.clock = clock
        self.started = clock()
        self.name = None
        self.detail = None
        self.watch = None
        self.lines = 0                     # lines (or rewrites) written
        self._last = -math.inf
        self._shown = None                 # the last (phase, detail) written
        self._width = 0
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread = None
        self._heartbeat = heartbeat

    # ---- what callers say ---------------------------------------------------------------------

    def phase(self, name, detail=None, watch=None):
        """A new phase: written at once.  ``watch``: a callable returning the phase's detail
        (or None), polled by the background thread."""
        with self._lock:
            self.name, self.detail, self.watch = name, detail, watch
            self._emit(force=True)
        self._start_thread()
        return self

    def update(self, detail=None, done=None, total=None):
        """How far the phase has got (``done`` of ``total``, and/or a ``detail`` text);
        written when the last line is older than the interval."""
        text = detail
        if done is not None:
            count = f"{done}/{total}" if total is not None else f"{done}"
            text = f"{count} {detail}" if detail else count
        with self._lock:
            self.detail = text
            self._emit()

    def __call__(self, name, logs=None):
        """The duck-typed hook the board builds call (they may not import this module):
        ``progress(phase, {tool: log path})`` starts a phase whose detail is read from the
        logs' new lines (yosys's pass, nextpnr's step; another tool's last line), the last
        tool whose log moved first."""
        tails = [(tool, LogTail(path)) for tool, path in (logs or {}).items()]
        state = {}

        def watch():
            for tool, tail in tails:
                lines = tail.new_lines()
                found = _PARSERS.get(tool, _last_line)(lines) if lines else None
                if found:
                    state[tool] = found
                    state[None] = tool
            tool = state.get(None)
            return f"{tool}: {state[tool]}" if tool else None
        self.phase(name, watch=watch if tails else None)

    def close(self, outcome="done"):
        """Stop the thread and write the last line (``outcome`` and the total time)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        with self._lock:
            if self.enabled:
                self._write(f"[{self.what} {elapsed(self.clock() - self.started)}] {outcome}",
                            end=True)

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        self.close("failed" if kind is not None else "done")
        return False

    # ---- writing ------------------------------------------------------------------------------

    def poll(self):
        """Read the phase's ``watch`` and write the line if it is due (the thread's body)."""
        with self._lock:
            if self.watch is not None:
                try:
                    found = self.watch()
                except Exception:         # a log not there yet, a folder being replaced
                    found = None
                if found:
                    self.detail = found
            self._emit()

    def _emit(self, force=False):
        if not self.enabled or self.name is None:
            return
        now = self.clock()
        if not force and now - self._last < self.interval:
            return
        if not force and not self.tty and (self.name, self.detail) == self._shown \
                and now - self._last < 6 * self.interval:
            return                    # (nothing new: a plain log gets a line a minute or so)
        self._last = now
        self._shown = (self.name, self.detail)
        line = f"[{self.what} {elapsed(now - self.started)}] {self.name}"
        if self.detail:
            line += f": {self.detail}"
        self._write(line)

    def _write(self, line, end=False):
        try:
            if self.tty:
                pad = max(self._width - len(line), 0)
                self.stream.write("\r" + line + " " * pad + ("\n" if end else ""))
                self._width = 0 if end else len(line)
            else:
                self.stream.write(line + "\n")
            self.stream.flush()
        except (OSError, ValueError):     # a closed stream: progress is not worth a failure
            self.enabled = False
        self.lines += 1

    def _start_thread(self):
        if not (self.enabled and self._heartbeat) or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._beat, name="dlforge-progress", daemon=True)
        self._thread.start()

    def _beat(self):
        tick = min(self.interval, 1.0)
        while not self._stop.wait(tick):
            self.poll()


class LogTail:
    """The lines a growing log file gained since the last call (at most the last 64 KiB);
    what the file held when the tail was made (a last run's log) is skipped, unless the
    tool rewrites it from the start."""

    def __init__(self, path):
        self.path = Path(path)
        try:
            self.offset = self.path.stat().st_size
        except OSError:
            self.offset = 0

    def new_lines(self):
        try:
            size = self.path.stat().st_size
        except OSError:
            return []
        if size < self.offset:            # rewritten
            self.offset = 0
        start = max(self.offset, size - 65536)
        with open(self.path, "rb") as f:
            f.seek(start)
            data = f.read(size - start)
        # (a line still being written waits for its newline)
        cut = data.rfind(b"\n") + 1
        self.offset = start + cut
        return data[:cut].decode(errors="replace").splitlines()


_YOSYS_PASS = re.compile(r"^(\d+(?:\.\d+)*)\. Executing (.+?)(?: pass)?(?: \(.*\))?\.?\s*$")


def yosys_step(lines):
    """The last pass yosys's log names (``"2.41. Executing ABC9 pass."`` -> ``"pass 2.41:
    ABC9"``), or None."""
    for line in reversed(lines):
        found = _YOSYS_PASS.match(line.strip())
        if found:
            return f"pass {found.group(1)}: {found.group(2)[:60]}"
    return None


#: nextpnr's log words -> its step
_NEXTPNR_STEPS = (("Critical path", "timing report"), ("Max frequency", "timing report"),
                  ("Slack histogram", "timing report"),
                  ("router", "routing"), ("Routing", "routing"), ("Router", "routing"),
                  ("placer", "placing"), ("Placer", "placing"), ("placement", "placing"),
                  ("Packing", "packing"), ("Packed", "packing"),
                  ("utilisation", "reading the netlist"))
#: the router's table row: "Info:   15000 |  6204  8795 |  298  702 |  22630|  1.67  22.33|"
_NEXTPNR_ROUTED = re.compile(r"^Info:\s+(\d+)\s*\|\s*\d+\s+\d+\s*\|\s*\d+\s+\d+\s*\|"
                             r"\s*(\d+)\s*\|")
#: the placers' "at iteration #6, type ALL: wirelen solved = ..., legal = 171604; ..."
#: and "at initial placer iter 3, wirelen = 1810"
_NEXTPNR_PLACED = re.compile(r"at (initial placer )?iter(?:ation)? #?(\d+)")


def nextpnr_step(lines):
    """nextpnr's step from its log's last lines (packing, placing, routing, timing report),
    with the placer's iteration or the router's arcs left where the line gives them, or
    None."""
    for line in reversed(lines):
        routed = _NEXTPNR_ROUTED.match(line)
        if routed:
            return f"routing ({int(routed.group(2)):,} arcs left)"
        placed = _NEXTPNR_PLACED.search(line)
        if placed:
            return (f"placing ({'initial ' if placed.group(1) else ''}iteration "
                    f"{placed.group(2)})")
        for word, step in _NEXTPNR_STEPS:
            if word in line:
                return step
    return None


def verilator_build_step(folder):
    """How far a Verilator build in ``folder`` has got: verilating until its makefile
    exists, then the C++ files compiled of those generated."""
    folder = Path(folder)
    if not folder.is_dir() or not any(folder.glob("*.mk")):
        return "verilating (Verilog to C++)"
    sources = {p.stem for p in folder.glob("*.cpp")}
    done = sum(1 for p in folder.glob("*.o") if p.stem in sources)
    if sources and done >= len(sources) and any(folder.glob("*.a")):
        return f"linking ({done}/{len(sources)} C++ files compiled)"
    return f"compiling C++: {done}/{len(sources)} files"


def _last_line(lines):
    text = next((line.strip() for line in reversed(lines) if line.strip()), "")
    return text[:100] or None


_PARSERS = {"yosys": yosys_step, "nextpnr": nextpnr_step}


def count_in_log(tail, needle, total=None, noun="done"):
    """A watch: how many lines with ``needle`` a :class:`LogTail` has shown so far."""
    seen = {"n": 0}

    def watch():
        seen["n"] += sum(needle in line for line in tail.new_lines())
        if not seen["n"]:
            return None
        return f"{seen['n']}/{total} {noun}" if total else f"{seen['n']} {noun}"
    return watch
