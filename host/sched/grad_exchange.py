"""Data-parallel gradient exchange that overlaps the rest of the backward pass.

Each process computes gradients on its own part of the batch; before the optimizer step they
must be averaged over the process group.  Like DistributedDataParallel, :class:`GradExchange`
packs the parameters into *buckets* of about ``bucket_cap_mb`` (the first of at most
``first_bucket_cap_mb``), in reverse registration order, which is roughly the order backward
produces them, and all-reduces a bucket with
``torch.distributed`` as soon as all its gradients are final, asynchronously, so the
communication runs while the backward pass goes on.  Gradients come from a
:class:`~dlforge.host.sched.split_backward.SplitBackward`: a split layer's when its weight-gradient
task finished (on the side stream or worker thread), any other parameter's from autograd's
post-accumulate hook.

Buckets are launched strictly in index order (a bucket that is ready early waits for the ones
before it): every process must issue the same collectives in the same order, and gradients
become ready on two threads.  The step (``optimizer.step()`` once
``SplitBackward.attach``-ed) launches what is left, waits for every reduction and writes the
averages back into ``.grad``.

On CUDA a bucket is flattened on a communication stream that first waits on every stream its
gradients were produced on; NCCL's own stream waits on that one, and the step makes the main
stream wait on the reductions (``work.wait()``); tensors crossing streams are
``record_stream``-ed.  On CPU (gloo) the same schedule runs without streams.

    split = SplitBackward(model)
    exchange = GradExchange(split)                 # the default process group
    split.attach(optimizer)
    loss.backward(); optimizer.step()              # step waits for the all-reduces

Gradients are divided by the world size before the sum, as DDP's default hook does.  Buffers
(BatchNorm running statistics) are not synchronised after construction; parameters are
broadcast from rank 0 once, as DDP does.  A parameter with no gradient on this process in a
step gets the group's average (zeros if no process had one), so all processes step alike.
"""

import threading

import torch
import torch.distributed as dist

__all__ = ["GradExchange", "plan_buckets"]


def plan_buckets(params, cap_bytes, first_cap_bytes=None):
    """Split ``params`` (in order) into lists of at most ``cap_bytes`` each (a larger
    parameter gets a bucket of its own), a new bucket also where dtype or device changes.
    The first bucket holds at most ``first_cap_bytes`` when that is smaller (DDP's 1 MiB:
    the first reduction starts early)."""
    buckets, current, size = [], [], 0
    for p in params:
        nbytes = p.numel() * p.element_size()
        cap = cap_bytes if buckets or first_cap_bytes is None else min(cap_bytes,
                                                                        first_cap_bytes)
        if current and (size + nbytes > cap or p.dtype != current[0].dtype
                        or p.device != current[0].device):
            buckets.append(current)
            current, size = [], 0
        current.append(p)
        size += nbytes
    if current:
        buckets.append(current)
    return buckets


class _Bucket:
    def __init__(self, index, params):
        self.index, self.params = index, params
        self.reset()

    def reset(self):
        self.ready = set()
        self.streams = []               # CUDA streams the gradients were produced on
        self.work = self.flat = None
        self.span = None                # CUDA: the open span; CPU: the future closing it


class GradExchange:
    """All-reduces ``split.model``'s gradients over ``group`` in buckets as they are ready."""

    def __init__(self, split, group=None, bucket_cap_mb=25.0, first_bucket_cap_mb=1.0,
                 broadcast=True):
        if not dist.is_initialized():
            raise RuntimeError("GradExchange needs torch.distributed.init_process_group first")
        self.split, self.group = split, group
        self.world_size = dist.get_world_size(group)
        self.timeline = split.timeline
        params = [p for p in split.model.parameters() if p.requires_grad]
        plan = plan_buckets(reversed(params), bucket_cap_mb * 2 ** 20,
                            first_bucket_cap_mb * 2 ** 20)
        self.buckets = [_Bucket(i, b) for i, b in enumerate(plan)]
        self._bucket_of = {id(p): b for b in self.buckets for p in b.params}
        self.device = params[0].device
        self.is_cuda = self.device.type == "cuda"
        self.backend = dist.get_backend(group)
        self.track = f"allreduce ({self.backend})"
        self.comm_stream = torch.cuda.Stream(self.device) if self.is_cuda else None
        self.allreduces = 0             # collectives issued, over all steps
        self._next = 0                  # the next bucket to launch
        self._open = False              # a gradient arrived since the last finish
        self._lock = threading.Lock()
        if broadcast:
            with torch.no_grad():
                for t in list(split.model.parameters()) + list(split.model.buffers()):
                    dist.broadcast(t, 0, group=group)
        split.on_grad_ready.append(self._ready)
        split.step_waits.append(self.finish)

    def _ready(self, param):
        bucket = self._bucket_of.get(id(param))
        if bucket is None:
            return
        with self._lock:
            self._open = True
            bucket.ready.add(id(param))
            if self.is_cuda:
                bucket.streams.append(torch.cuda.current_stream(self.device))
            while (self._next < len(self.buckets)
                   and len(self.buckets[self._next].ready) == len(self.buckets[self._next].params)):
                self._launch(self.buckets[self._next])

    def _launch(self, bucket):
        """Flatten, pre-divide and start the all-reduce of ``bucket`` (under the lock)."""
        self._next += 1
        self.allreduces += 1
        name = f"allreduce bucket {bucket.index}"
        if self.is_cuda:
            comm = self.comm_stream
            for s in bucket.streams + [torch.cuda.current_stream(self.device)]:
                comm.wait_stream(s)
            with torch.cuda.stream(comm):
                bucket.span = self.timeline.span(name, "communication", self.track, comm)
                bucket.span.__enter__()
                bucket.flat = self._flatten(bucket)
                for p in bucket.params:
                    if p.grad is not None:
                        p.grad.record_stream(comm)
                bucket.work = dist.all_reduce(bucket.flat, group=self.group, async_op=True)
        else:
            start = self.timeline.now()
            bucket.flat = self._flatten(bucket)
            bucket.work = dist.all_reduce(bucket.flat, group=self.group, async_op=True)
            if self.timeline.enabled:       # the span ends when gloo's future completes
                bucket.span = bucket.work.get_future().then(
                    lambda fut, s=start: self.timeline.add(name, "communication", self.track,
                                                           s, self.timeline.now()))

    def _flatten(self, bucket):
        with torch.no_grad():
            flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                              for p in bucket.params])
            return flat.div_(self.world_size)

    def finish(self):
        """Launch what is left, wait for every reduction, write the averages to ``.grad``.
        Once per step: a second call before the next backward does nothing."""
        with self._lock:
            if not self._open:
                return
            self._open = False
            while self._next < len(self.buckets):
                self._launch(self.buckets[self._next])
            self._next = 0
        main = self.split.main_stream()
        with torch.no_grad(), self.timeline.span("wait allreduce", "wait", self.split.main_track,
                                                 main):
            for bucket in self.buckets:
                if self.is_cuda:
                    with torch.cuda.stream(self.comm_stream):
                        bucket.work.wait()          # the comm stream waits for NCCL
                        bucket.span.__exit__(None, None, None)
                    main.wait_stream(self.comm_stream)
                    bucket.flat.record_stream(main)
                else:
                    bucket.work.wait()
                    if bucket.span is not None:
                        bucket.span.wait()          # its span is on the timeline
                offset = 0
                for p in bucket.params:
                    view = bucket.flat[offset:offset + p.numel()].view_as(p)
                    offset += p.numel()
                    if p.grad is None:
                        p.grad = view.clone()
                    else:
                        p.grad.copy_(view)
                bucket.reset()
