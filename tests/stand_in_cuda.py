"""Stand-in CUDA streams and events on CPU, logging what the scheduler asks of them.

No GPU here: this runs the scheduler's CUDA branches (side stream, communication stream,
copy stream, timing events) on CPU tensors, so a wrong call or a missing wait fails a test.
Kernels are not asynchronous here, so it checks the *protocol* (who waits on whom, which
tensors are ``record_stream``-ed), not real concurrency.
"""

import time
from contextlib import contextmanager

import torch


class StandInCuda:
    def __init__(self):
        self.log = []
        self.main = Stream(self, "main")
        self._current = [self.main]
        self._streams = 0

    def install(self, monkeypatch):
        cuda = self

        def make_stream(device=None):
            cuda._streams += 1
            return Stream(cuda, f"stream{cuda._streams}")

        @contextmanager
        def use(stream):
            cuda._current.append(stream)
            try:
                yield
            finally:
                cuda._current.pop()

        monkeypatch.setattr(torch.cuda, "Stream", make_stream)
        monkeypatch.setattr(torch.cuda, "Event",
                            lambda enable_timing=False: Event(cuda))
        monkeypatch.setattr(torch.cuda, "stream", use)
        monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: cuda.current)
        monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
        monkeypatch.setattr(torch.Tensor, "record_stream",
                            lambda t, s: cuda.log.append(("record_stream", s.name,
                                                          tuple(t.shape))))
        return self

    @property
    def current(self):
        return self._current[-1]

    def calls(self, kind):
        return [entry[1:] for entry in self.log if entry[0] == kind]


class Stream:
    def __init__(self, cuda, name):
        self.cuda, self.name = cuda, name

    def wait_stream(self, other):
        self.cuda.log.append(("wait_stream", self.name, other.name))

    def wait_event(self, event):
        self.cuda.log.append(("wait_event", self.name, event.stream.name))

    def __eq__(self, other):
        return isinstance(other, Stream) and other.name == self.name

    def __hash__(self):
        return hash(self.name)


class Event:
    def __init__(self, cuda):
        self.cuda, self.stream, self.t = cuda, None, None

    def record(self, stream=None):
        self.stream = stream or self.cuda.current
        self.t = time.perf_counter_ns()
        self.cuda.log.append(("record", self.stream.name))

    def query(self):
        return True

    def synchronize(self):
        pass

    def elapsed_time(self, end):
        return (end.t - self.t) / 1e6
