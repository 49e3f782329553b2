"""The scheduler's timeline: spans per stream or thread, exported as a Chrome/Perfetto trace.

A schedule that claims to overlap work has to show it.  Every piece of a training step the
scheduler runs (the batch copy, the forward pass, each layer's input gradient, each layer's
weight gradient, each all-reduce bucket, the optimizer) is a span on a *track*: the stream
or thread it ran on.  :func:`write_trace` writes them as ``traceEvents`` of ``ph: "X"``
complete events (``ts``/``dur`` in microseconds, ``pid`` per process, ``tid`` per track)
that chrome://tracing and ui.perfetto.dev open, and :meth:`Timeline.figures` turns them into
per-step numbers: step time, time waiting for data, and how busy each track was.

On CPU a span is two ``time.perf_counter_ns`` readings.  On CUDA the host only *enqueues*
work, so a span given a ``stream`` is a pair of timing events on that stream instead,
resolved to the host clock after a synchronize (:meth:`Timeline.resolve`).
"""

import json
import threading
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path

__all__ = ["Timeline", "Span", "chrome_trace", "write_trace", "KINDS"]

# What a span is; the name says which one ("weight_grad layer1.0.conv2").
KINDS = ("step", "data_wait", "copy", "forward", "backward", "input_grad", "weight_grad",
         "communication", "wait", "optimizer", "augment")
_NOT_WORK = ("step", "data_wait")        # windows and waiting, not busy time


class Span(tuple):
    """(name, kind, track, start_ns, end_ns) on the host's monotonic clock."""
    __slots__ = ()

    def __new__(cls, name, kind, track, start_ns, end_ns):
        return super().__new__(cls, (name, kind, track, int(start_ns), int(end_ns)))

    def __getnewargs__(self):           # pickles (the ranks of a spawned run send theirs)
        return tuple(self)

    name = property(lambda s: s[0])
    kind = property(lambda s: s[1])
    track = property(lambda s: s[2])
    start_ns = property(lambda s: s[3])
    end_ns = property(lambda s: s[4])


class Timeline:
    """The spans of one process (one run of one variant: ``process`` names it in the trace).

    Thread-safe: the weight-gradient worker and the communication callbacks add spans too.
    ``enabled=False`` makes every call a no-op, so the scheduler can always call it.
    """

    def __init__(self, process="sched", enabled=True):
        self.process = process
        self.enabled = enabled
        self.spans = []
        self._cuda_pending = []          # (name, kind, track, start_event, end_event)
        self._anchor = None              # (cuda event, host ns) once a CUDA span is seen
        self._lock = threading.Lock()
        self._steps = 0

    @staticmethod
    def now():
        return time.perf_counter_ns()

    def add(self, name, kind, track, start_ns, end_ns):
        if self.enabled:
            with self._lock:
                self.spans.append(Span(name, kind, track, start_ns, end_ns))

    def span(self, name, kind, track, stream=None):
        """A context manager timing its body; with a CUDA ``stream``, the stream's work."""
        if not self.enabled:
            return nullcontext()
        if stream is not None:
            return self._cuda_span(name, kind, track, stream)
        return self._host_span(name, kind, track)

    @contextmanager
    def _host_span(self, name, kind, track):
        start = self.now()
        try:
            yield
        finally:
            self.add(name, kind, track, start, self.now())

    @contextmanager
    def _cuda_span(self, name, kind, track, stream):
        import torch
        if self._anchor is None:
            torch.cuda.synchronize()
            anchor = torch.cuda.Event(enable_timing=True)
            anchor.record(stream)
            anchor.synchronize()
            self._anchor = (anchor, self.now())
        start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
        start.record(stream)
        try:
            yield
        finally:
            end.record(stream)
            with self._lock:
                self._cuda_pending.append((name, kind, track, start, end))

    def step(self, stream=None):
        """A context manager around one training step (the window the figures use)."""
        self._steps += 1
        return self.span(f"step {self._steps - 1}", "step", "steps", stream)

    def resolve(self):
        """Turn finished CUDA spans into host-clock spans (synchronizes the device)."""
        if not self._cuda_pending:
            return
        import torch
        torch.cuda.synchronize()
        anchor, host = self._anchor
        with self._lock:
            pending, self._cuda_pending = self._cuda_pending, []
            for name, kind, track, start, end in pending:
                t0 = host + anchor.elapsed_time(start) * 1e6
                self.spans.append(Span(name, kind, track, t0,
                                       t0 + start.elapsed_time(end) * 1e6))

    def tracks(self):
        """Track names in the order they first appear."""
        return list(dict.fromkeys(s.track for s in sorted(self.spans, key=lambda s: s[3])))

    def figures(self):
        """Per step: ``step_ms``, ``data_wait_ms`` and ``busy_fraction`` per track (the part
        of the step some span of real work covered on that track)."""
        self.resolve()
        steps = sorted((s for s in self.spans if s.kind == "step"), key=lambda s: s.start_ns)
        out = []
        for step in steps:
            lo, hi = step.start_ns, step.end_ns
            length = max(hi - lo, 1)
            inside = [s for s in self.spans if s.end_ns > lo and s.start_ns < hi]
            wait = sum(min(s.end_ns, hi) - max(s.start_ns, lo)
                       for s in inside if s.kind == "data_wait")
            busy = {}
            for track in dict.fromkeys(s.track for s in inside if s.kind not in _NOT_WORK):
                busy[track] = round(_covered([(max(s.start_ns, lo), min(s.end_ns, hi))
                                              for s in inside
                                              if s.track == track and s.kind not in _NOT_WORK])
                                    / length, 4)
            out.append({"step": step.name, "step_ms": round((hi - lo) / 1e6, 3),
                        "data_wait_ms": round(wait / 1e6, 3), "busy_fraction": busy})
        return out

    def trace_events(self, pid, origin_ns):
        """This timeline's Chrome trace events (metadata first), ``ts`` from ``origin_ns``."""
        self.resolve()
        tracks = self.tracks()
        events = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                   "args": {"name": self.process}}]
        for tid, track in enumerate(tracks):
            events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                           "args": {"name": track}})
            events.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid,
                           "args": {"sort_index": tid}})
        for s in sorted(self.spans, key=lambda s: (s.start_ns, -s.end_ns)):
            events.append({"name": s.name, "cat": s.kind, "ph": "X", "pid": pid,
                           "tid": tracks.index(s.track),
                           "ts": round((s.start_ns - origin_ns) / 1e3, 3),
                           "dur": round((s.end_ns - s.start_ns) / 1e3, 3)})
        return events


def _covered(intervals):
    total, reach = 0, None
    for lo, hi in sorted(intervals):
        if reach is None or lo > reach:
            total += hi - lo
            reach = hi
        elif hi > reach:
            total += hi - reach
            reach = hi
    return total


def chrome_trace(timelines, other=None):
    """The trace as a dict: one ``pid`` per timeline, times from the earliest span."""
    for t in timelines:
        t.resolve()
    starts = [s.start_ns for t in timelines for s in t.spans]
    origin = min(starts) if starts else 0
    events = []
    for pid, t in enumerate(timelines):
        events += t.trace_events(pid, origin)
    trace = {"traceEvents": events, "displayTimeUnit": "ms"}
    if other:
        trace["otherData"] = other
    return trace


def write_trace(path, timelines, other=None):
    """Write the trace JSON to ``path``; returns the path as a string."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(chrome_trace(timelines, other)))
    return str(path)
