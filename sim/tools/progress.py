"""Progress of long commands on stderr: the phase and, where a tool says it, how far it has
got (yosys's pass, nextpnr's placer and router, Verilator's C++ files compiled, a bench's
files or layers done).  Reading the tools' logs into that is ours; tqdm draws the line.

Only ever on stderr, so that a command's JSON on stdout stays clean.  On a terminal tqdm
rewrites one line (one per command in progress) at most every second; elsewhere (a log file,
CI) each line it draws becomes a line of its own, at most one every :data:`INTERVAL` seconds,
plus one per phase and one at the end.  A background thread keeps the line's time moving
while a step that reports nothing runs (a Verilator build, a simulation), polling the phase's
``watch`` (for example a log file's last lines) for the detail.

On by default except under pytest (``PYTEST_CURRENT_TEST``, which subprocesses inherit);
:data:`ENV` set to 1 turns it on and 0 off everywhere, and ``enabled=`` overrides both.
"""

import os
import re
import sys
import threading
from pathlib import Path
from typing import NamedTuple

from tqdm import tqdm

__all__ = ["Progress", "Step", "ENV", "INTERVAL_ENV", "INTERVAL", "progress_enabled",
           "LogTail", "yosys_step", "nextpnr_step", "verilator_build_step", "count_in_log"]

#: 1: progress lines on; 0: off (default: on, except under pytest).
ENV = "DLFORGE_PROGRESS"
#: Seconds between lines (default :data:`INTERVAL`, or :data:`TTY_INTERVAL` on a terminal).
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


class Step(NamedTuple):
    """How far a phase has got: a text and, where known, ``done`` of ``total``."""
    detail: str | None
    done: int | None = None
    total: int | None = None

    def __str__(self):
        if self.done is None:
            return self.detail or ""
        count = f"{self.done}/{self.total}" if self.total is not None else f"{self.done}"
        return f"{count} {self.detail}" if self.detail else count


class Progress:
    """One long command's progress line, drawn by tqdm.

    ``what``: the command (``"dlforge build"``); ``stream``: stderr by default; ``enabled``:
    see :func:`progress_enabled`; ``interval``: the least seconds between lines (0: every
    change); ``heartbeat``: run the background thread that polls ``watch`` and keeps the
    time moving (off for tests).

    A disabled Progress accepts every call and writes nothing, so callers need no tests.
    """

    def __init__(self, what, *, stream=None, enabled=None, interval=None, heartbeat=True):
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
        self.name = None
        self.step = Step(None)
        self.watch = None
        self._bar = None                   # made at the first phase
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread = None
        self._heartbeat = heartbeat

    def phase(self, name, detail=None, watch=None):
        """A new phase: drawn at once.  ``watch``: a callable returning the phase's detail (a
        text or a :class:`Step`, or None), polled by the background thread."""
        with self._lock:
            self.name, self.step, self.watch = name, Step(detail), watch
            self._draw(force=True)
        if self.enabled and self._heartbeat and self._thread is None:
            self._thread = threading.Thread(target=self._beat, name="dlforge-progress",
                                            daemon=True)
            self._thread.start()
        return self

    def update(self, detail=None, done=None, total=None):
        """How far the phase has got (``done`` of ``total``, and/or a ``detail`` text);
        drawn when the last line is older than the interval."""
        with self._lock:
            self.step = Step(detail, done, total)
            self._draw()

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
        """Stop the thread and draw the last line (``outcome`` and the total time)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        with self._lock:
            if not self.enabled:
                return
            self.name, self.step, self.watch = outcome, Step(None), None
            self._draw(force=True)
            self._bar.close()
            self.enabled = False           # (a closed line takes no more calls)

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        self.close("failed" if kind is not None else "done")
        return False

    def poll(self):
        """Read the phase's ``watch`` and draw the line if it is due (the thread's body)."""
        with self._lock:
            if self.watch is not None:
                try:
                    found = self.watch()
                except Exception:         # a log not there yet, a folder being replaced
                    found = None
                if found:
                    self.step = found if isinstance(found, Step) else Step(found)
            self._draw()

    def _draw(self, force=False):
        if not self.enabled or self.name is None:
            return
        counted = self.step.total is not None and self.step.done is not None
        head = "[" + self.what.replace("{", "{{").replace("}", "}}") + " {elapsed}] {desc}"
        shown = {"desc": f"{self.name}: {self.step}" if str(self.step) else self.name,
                 "bar_format": head + (" |{bar:12}| {percentage:3.0f}%" if counted else ""),
                 "total": self.step.total if counted else None}
        done = self.step.done if counted else 0
        bar = self._bar
        if bar is None:                   # (tqdm draws a new line at once)
            self._bar = tqdm(**shown, initial=done, mininterval=self.interval, miniters=0,
                             file=self.stream if self.tty else _Lines(self.stream),
                             dynamic_ncols=self.tty, leave=None)
            return
        bar.set_description_str(shown["desc"], refresh=False)
        bar.bar_format, bar.total = shown["bar_format"], shown["total"]
        if force:
            bar.n = bar.last_print_n = done
            bar.refresh()
        else:
            bar.update(done - bar.n)      # (drawn if the last line is older than the interval)

    def _beat(self):
        tick = max(min(self.interval, 1.0), 0.1)
        while not self._stop.wait(tick):
            self.poll()


class _Lines:
    """A log file for tqdm: each line it draws (``\\r`` and the line) becomes a line of its
    own; its cursor moves, blanking and a line drawn again unchanged are left out."""

    def __init__(self, stream):
        self.stream = stream
        self.last = None

    def write(self, text):
        line = text.strip()
        if text.startswith("\r") and line and line != self.last:   # (closing draws it again)
            self.stream.write(line + "\n")
            self.last = line

    def flush(self):
        self.stream.flush()


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
    """How far a Verilator build in ``folder`` has got (a :class:`Step`): verilating until
    its makefile exists, then the C++ files compiled of those generated, then linking."""
    folder = Path(folder)
    if not folder.is_dir() or not any(folder.glob("*.mk")):
        return Step("verilating (Verilog to C++)")
    sources = {p.stem for p in folder.glob("*.cpp")}
    done = sum(1 for p in folder.glob("*.o") if p.stem in sources)
    if sources and done >= len(sources) and any(folder.glob("*.a")):
        return Step("C++ files compiled, linking", done, len(sources))
    return Step("C++ files compiled", done, len(sources))


def _last_line(lines):
    text = next((line.strip() for line in reversed(lines) if line.strip()), "")
    return text[:100] or None


_PARSERS = {"yosys": yosys_step, "nextpnr": nextpnr_step}


def count_in_log(tail, needle, total=None, noun="done"):
    """A watch: how many lines with ``needle`` a :class:`LogTail` has shown so far (a
    :class:`Step`)."""
    seen = {"n": 0}

    def watch():
        seen["n"] += sum(needle in line for line in tail.new_lines())
        return Step(noun, seen["n"], total) if seen["n"] else None
    return watch
