"""DLBooster's reorganised backpropagation: a layer's input gradient first, its weight gradient
off the critical path.

In a backward pass only the gradient with respect to a layer's *input* is needed by the layer
before it; the gradient with respect to its *weights* is needed by nothing until the
optimizer step (or the all-reduce of data-parallel training).  Stock autograd computes both
together, so the previous layer waits for both.  :class:`SplitBackward` swaps the forward of
every Conv1d/2d/3d, ConvTranspose1d/2d/3d and Linear module for an autograd Function whose
backward computes the input gradient on the main stream and hands the weight and bias
gradients to an *executor*:

* ``"cuda"``: a side stream that waits on the main stream (events), with ``record_stream``
  on the tensors it reads so the caching allocator keeps them; the optimizer step makes the
  main stream wait on the side stream's last event;
* ``"thread"`` (CPU): one worker thread, in submission order; the step waits for it;
* ``"inline"``: right after the input gradient, in the backward's own thread (the same
  order, no overlap; the reference schedule).

The kernels are the ones autograd uses: ``aten.convolution_backward`` with an output mask
that asks for the input gradient alone, then for the weight (and bias) gradient alone, and
the same ``mm`` formulas autograd's ``addmm``/``mm`` derivatives use for Linear.  So in fp32
the parameters after any number of steps equal stock autograd's bit for bit (the tests check
it), except where a weight collects three or more gradients in one step, which are summed in
a different order.  Every other layer (BatchNorm included) keeps its autograd backward.

    split = SplitBackward(model)           # executor "auto": cuda on a GPU, else "thread"
    split.attach(optimizer)                # optimizer.step() first waits for weight grads
    loss.backward(); optimizer.step()

A parameter of a split layer must be used only through split layers (sharing it between
several is fine), and each step has one backward pass (no gradient accumulation across
several backward calls before the step, as with DDP's ``no_sync``).
"""

import functools
import queue
import threading
from contextlib import ExitStack, nullcontext

import torch
import torch.nn as nn
import torch.nn.functional as F

from dlforge.host.sched.trace import Timeline

__all__ = ["SplitBackward", "InlineExecutor", "ThreadExecutor", "CudaStreamExecutor",
           "make_executor", "SPLIT_TYPES", "EXECUTORS"]

SPLIT_TYPES = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d,
               nn.ConvTranspose3d, nn.Linear)
EXECUTORS = ("auto", "cuda", "thread", "inline")


# ---- where the weight gradients run ----------------------------------------------------------

class InlineExecutor:
    """Runs each weight-gradient task at once, in the caller's thread."""
    track = "main thread"
    stream = None

    def submit(self, task, tensors=()):
        task()

    def wait(self):
        pass

    def close(self):
        pass


class ThreadExecutor:
    """One worker thread running tasks in submission order; :meth:`wait` blocks until all
    submitted tasks ran and re-raises the first error one of them raised.

    The worker takes the submitter's intra-op thread count: OpenMP keeps that count per
    thread, a new thread starts at the machine's core count, and MKL's gemm then blocks the
    product differently (not bit-equal to the same product on the main thread).
    """
    track = "weight-grad thread"
    stream = None

    def __init__(self):
        self._threads = None                    # the count applied in the worker
        self._queue = queue.SimpleQueue()
        self._pending = 0
        self._error = None
        self._done = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="dlforge-weight-grad",
                                        daemon=True)
        self._thread.start()

    def submit(self, task, tensors=()):
        if self._thread is None:
            raise RuntimeError("the weight-gradient thread is closed")
        with self._done:
            self._pending += 1
        self._queue.put((task, torch.get_num_threads()))

    def _run(self):
        while (item := self._queue.get()) is not None:
            task, threads = item
            try:
                if threads != self._threads:
                    torch.set_num_threads(threads)
                    self._threads = threads
                task()
            except BaseException as error:      # handed to the waiting thread
                self._error = self._error or error
            finally:
                with self._done:
                    self._pending -= 1
                    self._done.notify_all()

    def wait(self):
        with self._done:
            self._done.wait_for(lambda: self._pending == 0)
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def close(self):
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None


class CudaStreamExecutor:
    """Enqueues tasks on a side stream ordered after the submitting stream's work; :meth:`wait`
    orders the current stream after the side stream's last task."""
    track = "weight-grad stream"

    def __init__(self, device=None):
        self.device = torch.device(device if device is not None else "cuda")
        self.stream = torch.cuda.Stream(self.device)
        self._last = None

    def submit(self, task, tensors=()):
        self.stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(self.stream):
            task()
        for t in tensors:               # read on the side stream: not reused before it ran
            t.record_stream(self.stream)
        done = torch.cuda.Event()
        done.record(self.stream)
        self._last = done

    def wait(self):
        if self._last is not None:
            torch.cuda.current_stream(self.device).wait_event(self._last)
            self._last = None

    def close(self):
        self.wait()


def make_executor(kind, device):
    """The executor ``kind`` names (``"auto"``: a side stream on CUDA, else a thread)."""
    device = torch.device(device)
    if kind == "auto":
        kind = "cuda" if device.type == "cuda" else "thread"
    if kind == "cuda":
        if device.type != "cuda" or not torch.cuda.is_available():
            raise ValueError("the cuda executor needs a model on a CUDA device")
        return CudaStreamExecutor(device)
    if kind == "thread":
        return ThreadExecutor()
    if kind == "inline":
        return InlineExecutor()
    raise ValueError(f"unknown executor {kind!r}; one of {', '.join(EXECUTORS)}")


# ---- the split layers ------------------------------------------------------------------------

class _Layer:
    """One split module: its name, how to run it, and the scheduler it reports to."""

    def __init__(self, name, module, split):
        self.name, self.module, self.split = name, module, split
        self.is_linear = isinstance(module, nn.Linear)
        if not self.is_linear:
            self.transposed = isinstance(module, nn.modules.conv._ConvTransposeNd)
            # Reflect/replicate/circular padding is an F.pad before a zero-padded convolution,
            # as the module's own forward does it.
            self.pre_pad = module.padding_mode != "zeros"
            self.padding = ((0,) * len(module.kernel_size) if self.pre_pad else
                            _numeric_padding(module))

    def params(self):
        return [p for p in (self.module.weight, self.module.bias) if p is not None]


def _numeric_padding(conv):
    """The padding as numbers, or None where only the module's own forward can do it
    (``padding="same"`` with an asymmetric split)."""
    if conv.padding == "valid":
        return (0,) * len(conv.kernel_size)
    if conv.padding == "same":
        total = [d * (k - 1) for d, k in zip(conv.dilation, conv.kernel_size)]
        if any(t % 2 for t in total):
            return None
        return tuple(t // 2 for t in total)
    return tuple(conv.padding)


def splittable(module):
    """Whether :class:`SplitBackward` can take over this module's backward."""
    if not isinstance(module, SPLIT_TYPES) or not module.weight.requires_grad:
        return False
    if isinstance(module, nn.Linear):
        return True
    return _numeric_padding(module) is not None


def _autocast_dtype(device_type):
    if torch.is_autocast_enabled(device_type):
        return torch.get_autocast_dtype(device_type)
    return None


class _SplitFunction(torch.autograd.Function):
    """y = layer(x); backward: dx now, dW and db through the executor."""

    @staticmethod
    def forward(ctx, x, weight, bias, layer, cast_dtype):
        ctx.layer = layer
        with torch.autocast(x.device.type, enabled=False) if cast_dtype else nullcontext():
            if cast_dtype is not None:          # autocast's cast, kept for the backward
                x, weight = x.to(cast_dtype), weight.to(cast_dtype)
                bias = None if bias is None else bias.to(cast_dtype)
            if layer.is_linear:
                y = F.linear(x, weight, bias)
            else:
                m = layer.module
                y = torch.ops.aten.convolution(x, weight, bias, m.stride, layer.padding,
                                               m.dilation, layer.transposed,
                                               m.output_padding, m.groups)
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        return y

    @staticmethod
    def backward(ctx, grad_out):
        layer, split = ctx.layer, ctx.layer.split
        x, weight = ctx.saved_tensors
        grad_in = None
        if ctx.needs_input_grad[0]:
            with split.timeline.span(f"input_grad {layer.name}", "input_grad",
                                     split.main_track, split.main_stream()):
                grad_in = (_linear_input_grad(grad_out, x, weight) if layer.is_linear else
                           _conv_grads(layer, grad_out, x, weight, (True, False, False))[0])
        split.submit_weight_grad(layer, grad_out.detach(), x.detach(), weight.detach(),
                                 ctx.has_bias)
        return grad_in, None, None, None, None


def _conv_grads(layer, grad_out, x, weight, mask):
    m = layer.module
    bias_sizes = [weight.shape[1] * m.groups if layer.transposed else weight.shape[0]] \
        if mask[2] else None
    return torch.ops.aten.convolution_backward(
        grad_out, x, weight, bias_sizes, m.stride, layer.padding, m.dilation,
        layer.transposed, m.output_padding, m.groups, list(mask))


def _as_matrix(t):
    return t if t.dim() == 2 else t.reshape(-1, t.shape[-1])


def _column_major(t):
    return t.stride(0) == 1 and t.stride(1) == t.shape[0]


def _linear_input_grad(grad_out, x, weight):
    """autograd's ``mm_mat1_backward`` for x @ weight.t()."""
    g, x2 = _as_matrix(grad_out), _as_matrix(x)
    if _column_major(x2):
        grad = weight.t().mm(g.t()).t()
    else:
        grad = g.mm(weight)
    return grad.reshape(x.shape)


def _linear_weight_grads(grad_out, x, weight, has_bias):
    """autograd's ``mm_mat2_backward`` (through the transpose) and the bias's sum."""
    g, x2 = _as_matrix(grad_out), _as_matrix(x)
    if _column_major(weight.t()):
        grad_w = g.t().mm(x2)
    else:
        grad_w = x2.t().mm(g).t()
    return grad_w, (g.sum(0) if has_bias else None)


def _accumulate(param, grad):
    """Add ``grad`` to ``param.grad`` as AccumulateGrad does (taking it when there is none)."""
    if grad is None:
        return
    if grad.dtype != param.dtype:
        grad = grad.to(param.dtype)
    if param.grad is None:
        if grad.stride() != param.stride():
            grad = torch.empty_strided(param.shape, param.stride(), dtype=param.dtype,
                                       device=param.device).copy_(grad)
        param.grad = grad
    else:
        param.grad.add_(grad)


# ---- the scheduler ---------------------------------------------------------------------------

class SplitBackward:
    """Takes over the backward of ``model``'s splittable layers (see the module docstring).

    ``on_grad_ready`` callbacks get each parameter once its gradient for the step is final:
    a split layer's parameter after its last use's weight-gradient task (called in the
    executor's context), others from autograd's post-accumulate hook.  ``step_waits`` run
    after the weight gradients in :meth:`wait` (the gradient exchange adds itself there).
    """

    def __init__(self, model, executor="auto", timeline=None, layers=SPLIT_TYPES):
        self.model = model
        device = next(model.parameters()).device
        self.executor = executor if hasattr(executor, "submit") else make_executor(executor,
                                                                                    device)
        self.is_cuda = isinstance(self.executor, CudaStreamExecutor)
        self.main_track = "main stream" if device.type == "cuda" else "main thread"
        self.timeline = timeline if timeline is not None else Timeline(enabled=False)
        self.on_grad_ready = []
        self.step_waits = []
        self.layers = {}
        self._uses = {}                 # parameter -> uses whose weight grads are still due
        self._lock = threading.Lock()
        self._handles = []
        for name, module in model.named_modules():
            if isinstance(module, tuple(layers)) and splittable(module):
                layer = _Layer(name, module, self)
                self.layers[name] = layer
                module.forward = functools.partial(self._forward, layer)
        self.params = list({id(p): p for layer in self.layers.values()
                            for p in layer.params()}.values())
        owned = {id(p) for p in self.params}
        for p in model.parameters():
            if p.requires_grad and id(p) not in owned:
                self._handles.append(p.register_post_accumulate_grad_hook(self._notify))

    # -- forward and backward

    def _forward(self, layer, x):
        m = layer.module
        if not (torch.is_grad_enabled() and m.weight.requires_grad):
            return type(m).forward(m, x)        # nothing to split: the module's own forward
        if not layer.is_linear and layer.pre_pad:
            x = F.pad(x, m._reversed_padding_repeated_twice, mode=m.padding_mode)
        unbatched = not layer.is_linear and x.dim() == m.weight.dim() - 1
        if unbatched:
            x = x.unsqueeze(0)
        with self._lock:
            for p in layer.params():
                self._uses[p] = self._uses.get(p, 0) + 1
        y = _SplitFunction.apply(x, m.weight, m.bias, layer, _autocast_dtype(x.device.type))
        return y.squeeze(0) if unbatched else y

    def main_stream(self):
        return torch.cuda.current_stream() if self.is_cuda else None

    def submit_weight_grad(self, layer, grad_out, x, weight, has_bias):
        ex = self.executor

        def task():
            with torch.no_grad(), self.timeline.span(f"weight_grad {layer.name}", "weight_grad",
                                                     ex.track, ex.stream):
                if layer.is_linear:
                    grad_w, grad_b = _linear_weight_grads(grad_out, x, weight, has_bias)
                else:
                    _, grad_w, grad_b = _conv_grads(layer, grad_out, x, weight,
                                                    (False, True, has_bias))
                _accumulate(layer.module.weight, grad_w)
                if has_bias:
                    _accumulate(layer.module.bias, grad_b)
            self._used(layer.params())

        ex.submit(task, (grad_out, x))

    def _used(self, params):
        ready = []
        with self._lock:
            for p in params:
                left = self._uses.get(p, 0) - 1
                self._uses[p] = max(left, 0)
                if left == 0:
                    ready.append(p)
        for p in ready:
            self._notify(p)

    def _notify(self, param):
        for callback in self.on_grad_ready:
            callback(param)

    # -- the step

    def wait(self):
        """Until every weight gradient of the step exists (and ``step_waits`` ran).  The
        attached optimizer calls it; call it yourself before anything else that reads
        ``.grad`` after the backward (``clip_grad_norm_``, ``GradScaler.unscale_``)."""
        with self.timeline.span("wait weight grads", "wait", self.main_track,
                                self.main_stream()):
            self.executor.wait()
        with self._lock:                # uses whose backward never ran: no gradient comes
            unfinished = [p for p, n in self._uses.items() if n]
            self._uses.clear()
        for p in unfinished:
            self._notify(p)
        for wait in self.step_waits:
            wait()

    def attach(self, optimizer):
        """Make ``optimizer.step()`` call :meth:`wait` first, and time the step."""
        open_span = ExitStack()

        def before(opt, args, kwargs):
            self.wait()
            open_span.enter_context(self.timeline.span("optimizer", "optimizer",
                                                       self.main_track, self.main_stream()))

        def after(opt, args, kwargs):
            open_span.close()

        self._handles += [optimizer.register_step_pre_hook(before),
                          optimizer.register_step_post_hook(after)]
        return optimizer

    def remove(self):
        """Give the layers their own forward back and stop the executor."""
        self.executor.close()
        for layer in self.layers.values():
            layer.module.__dict__.pop("forward", None)
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
