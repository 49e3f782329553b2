"""``dlforge bench sched``: stock PyTorch training and the scheduled version side by side.

Both variants start from the same weights and train on the same synthetic batches (seeded
uint8 images, normalised on the device) with SGD and momentum; their steps alternate, each
timed to the end of its device work, so a machine's load changes hit both alike.  Stock
copies and normalises each batch on the main stream when its step starts; the scheduled
version takes its batches from a :class:`~dlforge.host.sched.gpu_feed.GpuFeed` one batch ahead
(copy stream on CUDA) and splits the backward.  Reported:
images per second of each (all processes together), their ratio (scheduled / stock), the
largest parameter difference after the steps, and a Chrome/Perfetto trace.

With ``world_size > 1`` the processes form one group (gloo on CPU, nccl with one GPU each on
CUDA): stock is ``DistributedDataParallel``, the scheduled version is
:class:`~dlforge.host.sched.split_backward.SplitBackward` with
:class:`~dlforge.host.sched.grad_exchange.GradExchange`; each process trains on its own batches.
"""

import copy
import socket
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from dlforge.host.sched.gpu_feed import Augment, GpuFeed
from dlforge.host.sched.models import MODELS, build_model
from dlforge.host.sched.trace import Timeline, write_trace
from dlforge.host.sched.split_backward import SplitBackward

__all__ = ["bench_sched", "free_port"]



def _defaults(device, model):
    cpu = torch.device(device).type == "cpu"
    batch = 8 if cpu else 64
    size = 224 if model.startswith("resnet") else 32
    steps = 3 if cpu else 20
    return batch, steps, size


def free_port():
    """A TCP port nothing listens on now (bound to port 0, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _batches(count, batch, size, classes, seed, pin):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(count):
        images = torch.randint(0, 256, (batch, 3, size, size), dtype=torch.uint8, generator=g)
        labels = torch.randint(0, classes, (batch,), generator=g)
        out.append((images.pin_memory(), labels.pin_memory()) if pin else (images, labels))
    return out


def _plain_inputs(data, device, timeline, track):
    """Stock's input: each batch copied and normalised on the main stream when its turn
    comes (the same arithmetic as the feed's)."""
    normalise = Augment(flip=0.0)
    for images, labels in data:
        stream = torch.cuda.current_stream(device) if device.type == "cuda" else None
        with timeline.span("copy batch", "copy", track, stream):
            x = normalise(images.to(device, non_blocking=True))
            y = labels.to(device, non_blocking=True)
        yield x, y


class _Variant:
    """One model, its optimizer, inputs and timeline, and a training step that times
    itself."""

    def __init__(self, name, model, optimizer, timeline, device, data):
        self.name, self.model, self.optimizer = name, model, optimizer
        self.timeline, self.device = timeline, device
        self.track = "main stream" if device.type == "cuda" else "main thread"
        if name == "stock":
            self.inputs = _plain_inputs(data, device, timeline, self.track)
        else:                               # copies on a copy stream, a batch ahead
            self.inputs = iter(GpuFeed(data, device, ahead=1, timeline=timeline))
        self.step_s = []

    def stream(self):
        return torch.cuda.current_stream(self.device) if self.device.type == "cuda" else None

    def step(self, timed):
        tl, stream = self.timeline, self.stream()
        start = time.perf_counter()
        with tl.step(stream):
            x, y = next(self.inputs)
            with tl.span("forward", "forward", self.track, stream):
                loss = F.cross_entropy(self.model(x), y)
            with tl.span("backward", "backward", self.track, stream):
                loss.backward()
            if self.name == "stock":
                with tl.span("optimizer", "optimizer", self.track, stream):
                    self.optimizer.step()
            else:
                self.optimizer.step()           # waits for the weight grads (attached)
            self.optimizer.zero_grad()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        if timed:
            self.step_s.append(time.perf_counter() - start)


def _sgd(model):
    return torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)


def _run(cfg, rank=0, world_size=1):
    """Train both variants in this process; the figures and the two timelines."""
    device = torch.device(cfg["device"])
    if device.type == "cuda":
        device = torch.device("cuda", rank if world_size > 1 else (device.index or 0))
        torch.cuda.set_device(device)
    torch.manual_seed(cfg["seed"])
    stock = build_model(cfg["model"], cfg["num_classes"], cfg["image_size"]).to(device)
    sched = copy.deepcopy(stock)
    stock_tl = Timeline(f"stock rank {rank}")
    sched_tl = Timeline(f"scheduled rank {rank}")
    split = SplitBackward(sched, cfg["executor"], timeline=sched_tl)
    exchange = None
    stock_model = stock
    if world_size > 1:
        from torch.nn.parallel import DistributedDataParallel
        from dlforge.host.sched.grad_exchange import GradExchange
        stock_model = DistributedDataParallel(
            stock, device_ids=[device] if device.type == "cuda" else None,
            bucket_cap_mb=cfg["bucket_cap_mb"])
        exchange = GradExchange(split, bucket_cap_mb=cfg["bucket_cap_mb"])
    data = _batches(cfg["warmup"] + cfg["steps"], cfg["batch"], cfg["image_size"],
                    cfg["num_classes"], cfg["seed"] + 1 + rank, pin=device.type == "cuda")
    variants = [_Variant("stock", stock_model, _sgd(stock), stock_tl, device, data),
                _Variant("scheduled", sched, split.attach(_sgd(sched)), sched_tl, device, data)]
    try:
        for i in range(len(data)):
            for v in (variants if i % 2 == 0 else variants[::-1]):
                if world_size > 1:
                    torch.distributed.barrier()
                v.step(timed=i >= cfg["warmup"])
    finally:
        split.remove()
    diff = max((a.detach() - b.detach()).abs().max().item()
               for a, b in zip(stock.parameters(), sched.parameters()))
    images = cfg["batch"] * world_size * cfg["steps"]
    stock_rate = images / sum(variants[0].step_s)
    sched_rate = images / sum(variants[1].step_s)
    result = {
        "model": cfg["model"], "device": device.type, "batch": cfg["batch"],
        "steps": cfg["steps"], "warmup": cfg["warmup"], "world_size": world_size,
        "image_size": cfg["image_size"], "num_classes": cfg["num_classes"],
        "executor": type(split.executor).__name__, "threads": torch.get_num_threads(),
        "split_layers": len(split.layers),
        "buckets": len(exchange.buckets) if exchange else None,
        "allreduces": exchange.allreduces if exchange else 0,
        "stock_images_per_s": round(stock_rate, 3),
        "sched_images_per_s": round(sched_rate, 3),
        "ratio": round(sched_rate / stock_rate, 4),
        "max_param_abs_diff": diff,
        "stock_step_ms": [round(s * 1e3, 2) for s in variants[0].step_s],
        "sched_step_ms": [round(s * 1e3, 2) for s in variants[1].step_s],
        "iterations": sched_tl.figures()[cfg["warmup"]:],
        "stock_iterations": stock_tl.figures()[cfg["warmup"]:],
    }
    return result, [sched_tl, stock_tl]


def _rank_main(rank, world_size, port, cfg, out_dir):
    """One process of a ``world_size > 1`` run (torch.multiprocessing.spawn's target)."""
    import torch.distributed as dist
    if cfg["threads"]:
        torch.set_num_threads(cfg["threads"])
    backend = "nccl" if cfg["device"].startswith("cuda") else "gloo"
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world_size)
    try:
        result, timelines = _run(cfg, rank, world_size)
        diffs = [None] * world_size
        dist.all_gather_object(diffs, result["max_param_abs_diff"])
        result["max_param_abs_diff"] = max(diffs)
        torch.save({"result": result,
                    "timelines": [(t.process, list(t.spans)) for t in timelines]},
                   Path(out_dir) / f"rank{rank}.pt")
        # Neither rank closes its gloo pairs while the other may still use them.
        dist.barrier()
    finally:
        dist.destroy_process_group()


def bench_sched(device="cpu", model="resnet18", batch=None, steps=None, world_size=1,
                trace=None, image_size=None, num_classes=None, warmup=1, executor="auto",
                bucket_cap_mb=25.0, seed=0, threads=None):
    """Run the comparison; a dict of the figures (``stock_images_per_s``,
    ``sched_images_per_s``, ``ratio``, ``max_param_abs_diff``, ``trace``, ...)."""
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}; one of {', '.join(MODELS)}")
    if torch.device(device).type == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device here")
    d_batch, d_steps, d_size = _defaults(device, model)
    cfg = {"device": device, "model": model, "batch": batch or d_batch,
           "steps": steps or d_steps, "image_size": image_size or d_size,
           "num_classes": num_classes or (1000 if model.startswith("resnet") else 10),
           "warmup": warmup, "executor": executor, "bucket_cap_mb": bucket_cap_mb,
           "seed": seed, "threads": threads}
    if world_size > 1 and torch.device(device).type == "cuda" \
            and torch.cuda.device_count() < world_size:
        raise ValueError(f"--world-size {world_size} needs as many GPUs "
                         f"({torch.cuda.device_count()} here)")
    previous_threads = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        if world_size == 1:
            result, timelines = _run(cfg)
        else:
            result, timelines = _spawn(cfg, world_size)
    finally:
        torch.set_num_threads(previous_threads)
    result["trace"] = None
    if trace:
        result["trace"] = write_trace(trace, timelines, {
            k: result[k] for k in ("model", "device", "batch", "world_size", "ratio")})
    return result


def _spawn(cfg, world_size):
    import torch.multiprocessing as mp
    with tempfile.TemporaryDirectory(prefix="dlforge-bench-sched-") as out:
        try:
            mp.spawn(_rank_main, args=(world_size, free_port(), cfg, out), nprocs=world_size)
        except mp.ProcessExitedException as exc:
            # gloo's teardown has been seen to abort a rank ("terminate called without an
            # active exception") on a loaded machine after every rank had saved its figures.
            # The figures are complete then (they are saved after the last collective);
            # a rank that died before saving them fails the run.
            if not all((Path(out) / f"rank{r}.pt").exists() for r in range(world_size)):
                raise
            print(f"bench sched: a rank died in teardown after saving its results ({exc})",
                  file=sys.stderr)
        ranks = [torch.load(Path(out) / f"rank{r}.pt", weights_only=False)
                 for r in range(world_size)]
    timelines = []
    for saved in ranks:
        for process, spans in saved["timelines"]:
            t = Timeline(process)
            t.spans = list(spans)
            timelines.append(t)
    return ranks[0]["result"], timelines
