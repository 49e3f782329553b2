"""The split backward: parameters bit-equal to stock autograd after several momentum-SGD steps,
input gradients on the critical path before any weight gradient, the optimizer waiting for
the weight gradients, and the layer types, fallbacks and clean-up."""

import copy
import threading

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from dlforge.host.sched.models import build_model
from dlforge.host.sched.trace import Timeline
from dlforge.host.sched.split_backward import (CudaStreamExecutor, InlineExecutor, SplitBackward,
                                               ThreadExecutor, make_executor, splittable)

from stand_in_cuda import StandInCuda

torch.set_num_threads(1)


def _batches(steps, batch=4, size=32, classes=10, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(batch, 3, size, size, generator=g),
             torch.randint(0, classes, (batch,), generator=g)) for _ in range(steps)]


def _sgd(model):
    return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)


def _train(model, optimizer, batches):
    for x, y in batches:
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()


def _stock_and_scheduled(name, executor, steps=3, timeline=None):
    torch.manual_seed(0)
    stock = build_model(name, 10, 32)
    sched = copy.deepcopy(stock)
    batches = _batches(steps)
    _train(stock, _sgd(stock), batches)
    with SplitBackward(sched, executor, timeline=timeline) as split:
        _train(sched, split.attach(_sgd(sched)), batches)
    return stock, sched, split


def _assert_same_state(a, b):
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(x, y), name


@pytest.mark.parametrize("executor", ["thread", "inline"])
def test_mlp_parameters_equal_stock_autograd_exactly(executor):
    stock, sched, split = _stock_and_scheduled("mlp", executor)
    assert len(split.layers) == 3
    _assert_same_state(stock, sched)
    assert not torch.equal(stock[1].weight, build_model("mlp", 10, 32)[1].weight)


@pytest.mark.parametrize("executor", ["thread", "inline"])
def test_small_resnet_with_batchnorm_equals_stock_autograd_exactly(executor):
    stock, sched, split = _stock_and_scheduled("small", executor)
    assert "layer2.0.downsample.0" in split.layers and "fc" in split.layers
    assert not any("bn" in name for name in split.layers)
    _assert_same_state(stock, sched)            # running statistics included


def test_shared_weights_and_a_layer_used_twice_equal_stock_autograd():
    """Exact, not just close: each use's weight gradient is added to ``.grad`` in the order
    the backward reaches the uses, the order autograd's input buffer sums them in, and with
    two uses that sum is one addition (commutative in IEEE arithmetic).  A weight collecting
    three or more gradients from a mix of split and unsplit paths could be summed in
    another order; none of the nets here does."""
    stock, sched, split = _stock_and_scheduled("shared", "thread", steps=4)
    assert {"shared_a", "shared_b", "twice"} <= set(split.layers)
    _assert_same_state(stock, sched)


def _gated_split(model, timeline):
    """A SplitBackward whose worker is held by a first task until the gate opens."""
    gate = threading.Event()
    split = SplitBackward(model, ThreadExecutor(), timeline=timeline)
    split.executor.submit(lambda: gate.wait(timeout=60))
    return split, gate


def test_whole_backward_finishes_before_any_weight_gradient():
    torch.manual_seed(0)
    stock = build_model("small", 10, 32)
    sched = copy.deepcopy(stock)
    (x, y), = _batches(1)
    F.cross_entropy(stock(x), y).backward()
    timeline = Timeline()
    split, gate = _gated_split(sched, timeline)
    try:
        F.cross_entropy(sched(x), y).backward()     # returns with the worker still held
        names = [s.name for s in timeline.spans]
        assert not any(n.startswith("weight_grad") for n in names)
        assert {f"input_grad {n}" for n in split.layers if n != "conv1"} == set(names)
        assert all(p.grad is None for p in split.params)
        assert all(p.grad is not None for n, p in sched.named_parameters() if "bn" in n)
        gate.set()
        split.wait()
    finally:
        gate.set()
        split.remove()
    for (name, a), b in zip(stock.named_parameters(), sched.parameters()):
        assert torch.equal(a.grad, b.grad), name
    spans = {s.name: s for s in timeline.spans}
    for name in split.layers:
        if name != "conv1":                 # the image needs no gradient
            assert spans[f"input_grad {name}"].end_ns <= spans[f"weight_grad {name}"].start_ns


def test_inline_schedule_runs_each_input_gradient_before_its_weight_gradient():
    timeline = Timeline()
    _stock_and_scheduled("mlp", "inline", steps=1, timeline=timeline)
    names = [s.name for s in timeline.spans if s.kind in ("input_grad", "weight_grad")]
    assert names == ["input_grad 5", "weight_grad 5", "input_grad 3", "weight_grad 3",
                     "weight_grad 1"]


def test_optimizer_step_waits_for_late_weight_gradients():
    torch.manual_seed(0)
    model = build_model("mlp", 10, 32)
    timeline = Timeline()
    split, gate = _gated_split(model, timeline)
    optimizer = split.attach(_sgd(model))
    seen = []
    optimizer.register_step_pre_hook(
        lambda opt, args, kwargs: seen.append([p.grad is not None for p in model.parameters()]))
    threading.Timer(0.2, gate.set).start()
    (x, y), = _batches(1)
    try:
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
    finally:
        gate.set()
        split.remove()
    assert seen == [[True] * 6]
    last_grad = max(s.end_ns for s in timeline.spans if s.kind == "weight_grad")
    optimizer_span, = (s for s in timeline.spans if s.kind == "optimizer")
    assert optimizer_span.start_ns >= last_grad


def test_worker_errors_reach_the_step():
    executor = ThreadExecutor()
    executor.submit(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        executor.wait()
    executor.wait()                         # reported once
    executor.close()


@pytest.mark.parametrize("module, shape", [
    (nn.Conv1d(3, 4, 3, padding=1), (2, 3, 9)),
    (nn.Conv2d(3, 4, 3, stride=2, padding=1, groups=1, padding_mode="reflect"), (2, 3, 9, 9)),
    (nn.Conv2d(4, 4, 3, padding="same", dilation=2, groups=2), (2, 4, 9, 9)),
    (nn.Conv2d(3, 4, 3), (3, 9, 9)),                            # unbatched
    (nn.Conv3d(2, 3, 3, padding=1, bias=False), (1, 2, 5, 5, 5)),
    (nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1), (2, 3, 5, 5)),
    (nn.ConvTranspose1d(4, 6, 3, groups=2), (2, 4, 7)),
    (nn.Linear(6, 5), (2, 3, 6)),                               # a leading extra dim
])
def test_layer_kinds_give_autograds_gradients(module, shape):
    torch.manual_seed(0)
    stock = nn.Sequential(module)
    sched = copy.deepcopy(stock)
    x = torch.randn(shape, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    out = stock(x)
    grad_out = torch.randn_like(out)
    out.backward(grad_out)
    with SplitBackward(sched, "inline") as split:
        assert list(split.layers) == ["0"]
        out2 = sched(x2)
        out2.backward(grad_out)
        split.wait()
    assert torch.equal(out, out2)
    torch.testing.assert_close(x2.grad, x.grad, rtol=1e-6, atol=1e-6)
    for a, b in zip(stock.parameters(), sched.parameters()):
        torch.testing.assert_close(b.grad, a.grad, rtol=1e-6, atol=1e-6)


def test_what_is_not_split():
    assert not splittable(nn.BatchNorm2d(3))
    assert not splittable(nn.Conv2d(3, 3, 2, padding="same"))    # asymmetric padding
    frozen = nn.Linear(3, 3)
    frozen.weight.requires_grad_(False)
    assert not splittable(frozen)
    assert splittable(nn.Conv2d(3, 3, 3, padding="same"))


def test_no_grad_forward_is_the_modules_own_and_counts_no_use():
    model = build_model("mlp", 10, 8)
    x = torch.randn(2, 3, 8, 8)
    expected = model(x)
    with SplitBackward(model, "inline") as split, torch.no_grad():
        assert torch.equal(model(x), expected)
        assert split._uses == {}


def test_autocast_bfloat16_close_to_stock_autocast():
    torch.manual_seed(0)
    stock = build_model("small", 10, 32)
    sched = copy.deepcopy(stock)
    (x, y), = _batches(1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        F.cross_entropy(stock(x), y).backward()
    with SplitBackward(sched, "thread") as split:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            F.cross_entropy(sched(x), y).backward()
        split.wait()
    for (name, a), b in zip(stock.named_parameters(), sched.parameters()):
        assert b.grad.dtype == torch.float32
        torch.testing.assert_close(b.grad, a.grad, rtol=2e-2, atol=2e-3, msg=name)


def test_remove_restores_the_model():
    model = build_model("small", 10, 16)
    split = SplitBackward(model, "thread")
    assert "forward" in model.fc.__dict__
    split.remove()
    assert "forward" not in model.fc.__dict__
    assert split.executor._thread is None
    with pytest.raises(RuntimeError, match="closed"):
        split.executor.submit(lambda: None)


def test_executor_choice():
    auto = make_executor("auto", "cpu")
    assert isinstance(auto, ThreadExecutor)
    auto.close()
    assert isinstance(make_executor("inline", "cpu"), InlineExecutor)
    with pytest.raises(ValueError, match="CUDA"):
        make_executor("cuda", "cpu")
    with pytest.raises(ValueError, match="unknown"):
        make_executor("fpga", "cpu")


def test_cuda_stream_protocol_with_stand_in_streams(monkeypatch):
    """The CUDA branch, run on stand-in streams: each weight-gradient task waits on the main
    stream, keeps the tensors it reads for the side stream, and the step waits on it."""
    cuda = StandInCuda().install(monkeypatch)
    torch.manual_seed(0)
    stock = build_model("mlp", 10, 32)
    sched = copy.deepcopy(stock)
    batches = _batches(2)
    _train(stock, _sgd(stock), batches)
    timeline = Timeline()
    executor = CudaStreamExecutor("cuda")
    side = executor.stream.name
    with SplitBackward(sched, executor, timeline=timeline) as split:
        _train(sched, split.attach(_sgd(sched)), batches)
    _assert_same_state(stock, sched)
    tasks = 3 * len(batches)
    assert cuda.calls("wait_stream") == [(side, "main")] * tasks
    assert cuda.calls("record_stream").count((side, (4, 10))) == len(batches)   # fc's grad
    assert len([c for c in cuda.calls("record_stream") if c[0] == side]) == 2 * tasks
    assert cuda.calls("wait_event") == [("main", side)] * len(batches)
    assert not any(s.kind == "weight_grad" for s in timeline.spans)    # events, not yet read
    timeline.resolve()
    grads = [s for s in timeline.spans if s.kind == "weight_grad"]
    assert len(grads) == tasks and {s.track for s in grads} == {"weight-grad stream"}
