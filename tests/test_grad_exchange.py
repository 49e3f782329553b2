"""The gradient exchange: buckets by size, one all-reduce per bucket and step, and two gloo
processes training on halves of a batch ending where one process on the whole batch ends."""

import copy
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

from dlforge.gen.bench.sched import free_port
from dlforge.host.sched.grad_exchange import GradExchange, plan_buckets
from dlforge.host.sched.models import build_model
from dlforge.host.sched.trace import Timeline
from dlforge.host.sched.split_backward import CudaStreamExecutor, SplitBackward

from stand_in_cuda import StandInCuda

torch.set_num_threads(1)

STEPS, HALF = 3, 4
# Two processes average the halves' mean losses; one process takes the mean of the whole
# batch: the same value summed in another order, so a few float32 ulps apart after 3 steps
# (measured: at most 1.5e-8 absolute).
TOLERANCE = dict(rtol=1e-5, atol=1e-7)


def _data(size, seed=5):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(2 * HALF, 3, size, size, generator=g),
             torch.randint(0, 10, (2 * HALF,), generator=g)) for _ in range(STEPS)]


def _train_side_by_side(model, optimizer, stock, stock_optimizer):
    for x, y in _data(16):
        for m, opt in ((model, optimizer), (stock, stock_optimizer)):
            opt.zero_grad()
            F.cross_entropy(m(x), y).backward()
            opt.step()


def _sgd(model):
    return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


def _model(name):
    torch.manual_seed(0)
    return build_model(name, 10, 16)


def _train_rank(rank, world_size, port, out_dir, names, bucket_cap_mb):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world_size)
    try:
        results = {}
        for name in names:
            model = _model(name)
            split = SplitBackward(model, "thread")
            exchange = GradExchange(split, bucket_cap_mb=bucket_cap_mb)
            optimizer = split.attach(_sgd(model))
            for x, y in _data(16):
                part = slice(rank * HALF, (rank + 1) * HALF)
                optimizer.zero_grad()
                F.cross_entropy(model(x[part]), y[part]).backward()
                optimizer.step()
            split.remove()
            results[name] = {"state": model.state_dict(), "allreduces": exchange.allreduces,
                             "buckets": len(exchange.buckets)}
        torch.save(results, Path(out_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_two_gloo_processes_equal_one_process_on_the_concatenated_batch(tmp_path):
    names, cap = ("mlp", "shared"), 0.005
    mp.spawn(_train_rank, args=(2, free_port(), str(tmp_path), names, cap), nprocs=2)
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    for name in names:
        model = _model(name)
        optimizer = _sgd(model)
        for x, y in _data(16):
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
        expected_buckets = len(plan_buckets(
            reversed([p for p in model.parameters() if p.requires_grad]), cap * 2 ** 20,
            2 ** 20))
        assert expected_buckets > 1
        for rank in ranks:
            assert rank[name]["buckets"] == expected_buckets
            assert rank[name]["allreduces"] == STEPS * expected_buckets
            for key, value in model.state_dict().items():
                torch.testing.assert_close(rank[name]["state"][key], value, **TOLERANCE,
                                           msg=f"{name} {key}")
        for key in model.state_dict():          # and the two processes agree exactly
            assert torch.equal(ranks[0][name]["state"][key], ranks[1][name]["state"][key])


def test_buckets_by_size_dtype_and_order():
    params = [torch.zeros(n) for n in (10, 10, 30, 5, 5)] + [torch.zeros(4, dtype=torch.float64)]
    sizes = [[p.numel() for p in b] for b in plan_buckets(params, 20 * 4)]
    assert sizes == [[10, 10], [30], [5, 5], [4]]      # a big one alone; float64 apart
    assert len(plan_buckets(params, 1 << 30)) == 2
    first_small = [[p.numel() for p in b] for b in plan_buckets(params, 1 << 30, 12 * 4)]
    assert first_small == [[10], [10, 30, 5, 5], [4]]


@pytest.fixture
def one_process_group():
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0,
                            world_size=1)
    yield
    dist.destroy_process_group()


@pytest.mark.parametrize("cap_mb, buckets", [(0.001, 6), (0.01, 4), (0.5, 2), (25, 1)])
def test_one_allreduce_per_bucket_and_step(one_process_group, cap_mb, buckets):
    # The MLP's tensors (reverse order): 10, 10x128, 128, 128x256, 256, 256x768 floats.
    model = _model("mlp")
    stock = copy.deepcopy(model)
    timeline = Timeline()
    split = SplitBackward(model, "thread", timeline=timeline)
    exchange = GradExchange(split, bucket_cap_mb=cap_mb)
    optimizer = split.attach(_sgd(model))
    stock_optimizer = _sgd(stock)
    _train_side_by_side(model, optimizer, stock, stock_optimizer)
    split.remove()
    assert len(exchange.buckets) == buckets
    assert exchange.allreduces == STEPS * buckets
    # (on gloo a span is recorded when its reduction completes, on gloo's thread: in the
    # order they were started, not necessarily the order they were recorded)
    comm = sorted((s for s in timeline.spans if s.kind == "communication"),
                  key=lambda s: s.start_ns)
    assert [s.name for s in comm[:buckets]] == [f"allreduce bucket {i}" for i in range(buckets)]
    assert {s.track for s in comm} == {"allreduce (gloo)"}
    for a, b in zip(stock.parameters(), model.parameters()):
        assert torch.equal(a, b)                # one process: the average is the gradient


def test_first_buckets_go_out_during_the_backward(one_process_group):
    model = _model("small")
    timeline = Timeline()
    split = SplitBackward(model, "inline", timeline=timeline)
    GradExchange(split, bucket_cap_mb=0.001)
    x, y = _data(16)[0]
    with timeline.span("backward", "backward", "main thread"):
        F.cross_entropy(model(x), y).backward()
    split.wait()
    split.remove()
    backward, = (s for s in timeline.spans if s.kind == "backward")
    first = min(s.start_ns for s in timeline.spans if s.kind == "communication")
    assert first < backward.end_ns


def test_needs_a_process_group():
    with pytest.raises(RuntimeError, match="init_process_group"):
        GradExchange(SplitBackward(_model("mlp"), "inline"))


def test_cuda_stream_protocol_with_stand_in_streams(one_process_group, monkeypatch):
    """The CUDA branch on stand-in streams: a bucket is flattened on the communication
    stream after it waited on every stream its gradients came from (the side stream for
    split layers, the main stream for BatchNorm), and the step waits on it."""
    cuda = StandInCuda().install(monkeypatch)
    model = _model("small")
    stock = copy.deepcopy(model)
    timeline = Timeline()
    split = SplitBackward(model, CudaStreamExecutor("cuda"), timeline=timeline)
    exchange = GradExchange(split, bucket_cap_mb=0.01)
    exchange.is_cuda, exchange.comm_stream = True, torch.cuda.Stream()
    side, comm = split.executor.stream.name, exchange.comm_stream.name
    optimizer, stock_optimizer = split.attach(_sgd(model)), _sgd(stock)
    _train_side_by_side(model, optimizer, stock, stock_optimizer)
    split.remove()
    for a, b in zip(stock.parameters(), model.parameters()):
        assert torch.equal(a, b)
    launches = STEPS * len(exchange.buckets)
    assert exchange.allreduces == launches and len(exchange.buckets) > 2
    assert {c[1] for c in cuda.calls("wait_stream") if c[0] == comm} == {"main", side}
    assert cuda.calls("wait_stream").count(("main", comm)) == launches
    flats = [c for c in cuda.calls("record_stream") if c[0] == "main"]
    assert len(flats) == launches               # each flat buffer kept for the main stream
    timeline.resolve()
    comm_spans = [s for s in timeline.spans if s.kind == "communication"]
    assert len(comm_spans) == launches and {s.track for s in comm_spans} == {"allreduce (gloo)"}


def test_waiting_early_for_clipping_reduces_once(one_process_group):
    model = _model("mlp")
    stock = copy.deepcopy(model)
    split = SplitBackward(model, "thread")
    exchange = GradExchange(split, bucket_cap_mb=0.01)
    optimizer, stock_optimizer = split.attach(_sgd(model)), _sgd(stock)
    for x, y in _data(16):
        for m, opt in ((model, optimizer), (stock, stock_optimizer)):
            opt.zero_grad()
            F.cross_entropy(m(x), y).backward()
            if m is model:
                split.wait()                    # the gradients are final before clipping
            torch.nn.utils.clip_grad_norm_(m.parameters(), 0.5)
            opt.step()
    split.remove()
    assert exchange.allreduces == STEPS * len(exchange.buckets)
    for a, b in zip(stock.parameters(), model.parameters()):
        assert torch.equal(a, b)
