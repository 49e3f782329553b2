"""The timeline: per-step figures from spans, and a Chrome/Perfetto trace file that is valid
JSON with complete events per track, microsecond times, and the scheduler's span names."""

import json
import pickle

import torch
import torch.nn.functional as F

from dlforge.host.sched.models import build_model
from dlforge.host.sched.trace import Span, Timeline, chrome_trace, write_trace
from dlforge.host.sched.split_backward import SplitBackward

torch.set_num_threads(1)
MS = 1_000_000


def _made_up():
    t = Timeline("made up")
    t.add("step 0", "step", "steps", 0, 100 * MS)
    t.add("data", "data_wait", "main thread", 0, 10 * MS)
    t.add("forward", "forward", "main thread", 10 * MS, 40 * MS)
    t.add("backward", "backward", "main thread", 40 * MS, 70 * MS)
    t.add("input_grad fc", "input_grad", "main thread", 45 * MS, 50 * MS)   # nested
    t.add("weight_grad fc", "weight_grad", "weight-grad thread", 50 * MS, 75 * MS)
    t.add("step 1", "step", "steps", 100 * MS, 150 * MS)
    t.add("weight_grad fc", "weight_grad", "weight-grad thread", 140 * MS, 160 * MS)
    return t


def test_figures_per_step():
    first, second = _made_up().figures()
    assert first == {"step": "step 0", "step_ms": 100.0, "data_wait_ms": 10.0,
                     "busy_fraction": {"main thread": 0.6, "weight-grad thread": 0.25}}
    assert second["step_ms"] == 50.0 and second["data_wait_ms"] == 0.0
    assert second["busy_fraction"] == {"weight-grad thread": 0.2}    # clipped to the step


def test_chrome_trace_events():
    trace = chrome_trace([_made_up(), _made_up()], {"model": "none"})
    events = trace["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    assert len(complete) == 16 and {e["pid"] for e in complete} == {0, 1}
    forward = next(e for e in complete if e["name"] == "forward")
    assert (forward["ts"], forward["dur"], forward["cat"]) == (10_000, 30_000, "forward")
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e["name"] == "thread_name"}
    assert names[(0, forward["tid"])] == "main thread"
    assert sorted(set(names.values())) == ["main thread", "steps", "weight-grad thread"]
    assert trace["otherData"] == {"model": "none"}


def test_disabled_timeline_records_nothing():
    t = Timeline(enabled=False)
    with t.span("forward", "forward", "main thread"):
        pass
    t.add("x", "forward", "main thread", 0, 1)
    assert t.spans == [] and t.figures() == []


def test_spans_pickle():
    span = Span("weight_grad fc", "weight_grad", "weight-grad thread", 3, 9)
    assert pickle.loads(pickle.dumps(span)) == span and span.end_ns == 9


def test_trace_of_a_scheduled_step(tmp_path):
    model = build_model("small", 10, 16)
    timeline = Timeline("scheduled")
    split = SplitBackward(model, "thread", timeline=timeline)
    optimizer = split.attach(torch.optim.SGD(model.parameters(), lr=0.1))
    for _ in range(2):
        with timeline.step():
            with timeline.span("forward", "forward", "main thread"):
                loss = F.cross_entropy(model(torch.randn(2, 3, 16, 16)), torch.tensor([1, 2]))
            loss.backward()
            optimizer.step()
    split.remove()
    path = write_trace(tmp_path / "sub" / "trace.json", [timeline])
    trace = json.loads((tmp_path / "sub" / "trace.json").read_text())
    assert path.endswith("trace.json")
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in complete)
    tracks = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"]
              if e["name"] == "thread_name"}
    by_name = {e["name"]: tracks[e["tid"]] for e in complete}
    assert by_name["weight_grad conv1"] == "weight-grad thread"
    assert by_name["input_grad layer1.0.conv2"] == "main thread"
    assert by_name["optimizer"] == "main thread" and by_name["step 1"] == "steps"
    assert {e["cat"] for e in complete} == {"step", "forward", "input_grad", "weight_grad",
                                            "wait", "optimizer"}
    figures = timeline.figures()
    assert len(figures) == 2 and 0 < figures[1]["busy_fraction"]["main thread"] <= 1
