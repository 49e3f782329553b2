"""One pass of :class:`~dlforge.host.jpeg.loader.JpegBatches`: a background thread decodes the
pass's files with the loader's :class:`~dlforge.host.jpeg.decode_service.DecoderService`,
resizes (or transforms) each image, copies it into one of a pool of preallocated (pinned when
CUDA is there) batch buffers and queues the :class:`Batch`, ``prefetch`` batches ahead; the
pass's iterator hands the batches over and gives a buffer back to the pool once the consumer
has taken ``keep`` batches after it.

What the thread makes and does to each image is here too: the batch, the files left out
(:class:`Skipped`, :class:`DecodeFailed`), the host's resize (:func:`resize_image`) and the
seed of a file's ``train`` draws (:func:`train_seed`).  :mod:`dlforge.host.jpeg.loader`, the
dataset, exports them as its public API.
"""

import queue
import sys
import threading
import time
import weakref
from hashlib import blake2b
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from dlforge.host.jpeg.transforms import eval_request, train_request

__all__ = ["Batch", "Skipped", "DecodeFailed", "RESIZES", "resize_image", "train_generator",
           "train_seed", "BufferPool", "BatchPass", "live_pass"]

RESIZES = ("shorter-crop", "stretch")

_POLL_S = 0.05                  # how often blocked threads look at the stop flag
_ACTIVE = weakref.WeakKeyDictionary()      # DecoderService -> the live pass using it


# ---- what a pass hands over ------------------------------------------------------------------

class Batch(NamedTuple):
    """One batch.  ``images`` and ``labels`` are views into a pool buffer (see ``keep``)."""
    images: torch.Tensor        # uint8, (N, 3, S, S) for NCHW or (N, S, S, 3) for NHWC
    labels: torch.Tensor        # int64, (N,); -1 where the source gave no label
    names: list                 # the files' paths
    status: list                # "ok" | "fallback" per image


class Skipped(NamedTuple):
    """A file left out of the batches (status "error"), and why."""
    name: str
    error: str


class DecodeFailed(RuntimeError):
    """A file did not decode (raised when ``skip_errors=False``)."""

    def __init__(self, name, reason=None):
        super().__init__(name if reason is None else f"{name}: {reason}")
        self.name, self.reason = name, reason

    def __reduce__(self):
        return type(self), (self.name, self.reason)


# ---- resizing on the host ----------------------------------------------------------------------

def _as_tensor(pixels):
    if isinstance(pixels, torch.Tensor):
        t = pixels
    elif isinstance(pixels, np.ndarray) and pixels.flags.writeable:
        t = torch.from_numpy(pixels)
    else:                                   # read-only buffers: torch would warn; copy
        t = torch.tensor(np.asarray(pixels))
    if t.ndim == 2:                         # grey: (H, W) -> (H, W, 3)
        t = t[..., None]
    if t.ndim != 3 or t.shape[2] not in (1, 3) or t.dtype != torch.uint8:
        raise ValueError(f"pixels must be (H, W, 3) uint8, got {tuple(t.shape)} {t.dtype}")
    if t.shape[2] == 1:
        t = t.expand(-1, -1, 3)
    return t


def train_seed(seed, epoch, name):
    """The seed of one file's ``train`` draws (:func:`train_generator`'s)."""
    digest = blake2b(f"{seed}/{epoch}/{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def train_generator(seed, epoch, name):
    """The ``torch.Generator`` of one file's ``train`` draws: seeded from the loader's
    ``seed``, the epoch and the file's name, so a file gets the same crop and flip whatever
    the shard, worker or order that reads it (and other ones next epoch).  The loader itself
    hands :func:`~dlforge.host.jpeg.transforms.train_request` the seed (:func:`train_seed`): the
    same draws, without torch's per-call cost."""
    return torch.Generator().manual_seed(train_seed(seed, epoch, name))


def resize_image(pixels, size, resize="shorter-crop"):
    """(H, W, 3) uint8 pixels -> a (3, size, size) uint8 tensor (possibly a strided view).

    ``shorter-crop``: the shorter side to ``size`` (the longer one ``int(size * long /
    short)``, as torchvision), then the centre ``size`` x ``size``; ``stretch``: both sides
    to ``size``.  Bilinear with antialiasing on float32, then rounded and clamped to uint8.
    ``size=None``: no resize (3, H, W)."""
    x = _as_tensor(pixels).permute(2, 0, 1)             # (3, H, W) view
    if size is None:
        return x
    h, w = x.shape[1:]
    if resize == "stretch":
        nh = nw = size
    elif resize == "shorter-crop":
        nh, nw = (size, int(size * w / h)) if h <= w else (int(size * h / w), size)
    else:
        raise ValueError(f"resize must be one of {', '.join(RESIZES)}, not {resize!r}")
    top, left = int(round((nh - size) / 2.0)), int(round((nw - size) / 2.0))
    if (nh, nw) == (h, w):                  # already that size: bilinear would be identity
        return x[:, top:top + size, left:left + size]
    y = F.interpolate(x[None].float(), size=(nh, nw), mode="bilinear", antialias=True,
                      align_corners=False)[0]
    y = y[:, top:top + size, left:left + size]
    return y.round_().clamp_(0, 255).to(torch.uint8)


# ---- the producer thread -----------------------------------------------------------------------

class _Delta:
    """What the producer did since its last message (the consumer adds it to the stats)."""
    __slots__ = ("ok", "fallback", "error", "dropped", "cycles", "cpu", "errors",
                 "device_resized", "damaged")

    def __init__(self):
        self.ok = self.fallback = self.error = self.dropped = self.cycles = 0
        self.device_resized = self.damaged = 0
        self.cpu = 0.0
        self.errors = []

    def files(self):
        return self.ok + self.fallback + self.error


class BufferPool:
    """The batch buffers: ``n`` slots of (images, labels) tensors, and the free slots.

    Only the first :meth:`acquire` of a slot allocates (or a shape change, with size=None);
    with ``n == 0`` (inside a DataLoader worker) every batch gets fresh tensors."""

    def __init__(self, n, pin):
        self.n, self.pin = n, pin
        self.images = [None] * n
        self.labels = [None] * n
        self.free = queue.Queue()
        for slot in range(n):
            self.free.put(slot)

    def _new(self, shape, dtype):
        t = torch.empty(shape, dtype=dtype)
        return t.pin_memory() if self.pin else t

    def prepare(self, shape):
        """Allocate every slot now (fixed size): the consumer's thread, before the pass."""
        for slot in range(self.n):
            self.buffers(slot, shape)

    def buffers(self, slot, shape):
        if slot is None:
            return torch.empty(shape, dtype=torch.uint8), torch.empty(shape[0], dtype=torch.int64)
        if self.images[slot] is None or self.images[slot].shape != shape:
            self.images[slot] = self._new(shape, torch.uint8)
        if self.labels[slot] is None or self.labels[slot].shape[0] != shape[0]:
            self.labels[slot] = self._new((shape[0],), torch.int64)
        return self.images[slot], self.labels[slot]

    def acquire(self, stop):
        if self.n == 0:
            return None, True
        while not stop.is_set():
            try:
                return self.free.get(timeout=_POLL_S), True
            except queue.Empty:
                pass
        return None, False

    def release(self, slot):
        if slot is not None:
            self.free.put(slot)


class _Producer:
    """The background thread: decode, resize, fill buffers, queue batches.

    Messages: ("batch", Batch, slot, delta), ("end", delta), ("error", exception, delta)."""

    def __init__(self, ds, service, samples, pool):
        self.service, self.samples, self.pool = service, samples, pool
        self.batch_size, self.size, self.resize = ds.batch_size, ds.size, ds.resize
        self.transform, self.eval_resize = ds.transform, ds.eval_resize
        self.scale = ds.scale
        self.seed, self.epoch = ds.seed, ds.epoch
        self.nhwc = ds.layout == "NHWC"
        self.drop_last, self.skip_errors = ds.drop_last, ds.skip_errors
        self.queue = queue.Queue(maxsize=ds.prefetch)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, name="dlforge-loader", daemon=True)
        self._cpu = 0.0
        self._flips = {}                    # file index -> the train pipeline's flip draw

    def _put(self, item):
        while not self.stop.is_set():
            try:
                self.queue.put(item, timeout=_POLL_S)
                return True
            except queue.Full:
                pass
        return False

    def _tick(self, delta):
        now = time.thread_time()
        delta.cpu, self._cpu = now - self._cpu, now

    def run(self):
        self._cpu = time.thread_time()
        delta = _Delta()
        results = None
        try:
            results = self.service.decode((path for path, _ in self.samples),
                                          resize=self._request if self.transform else None,
                                          scale=self.scale)
            staged = []                     # (result, image tensor) of the batch being built
            for result in results:
                if self.stop.is_set():
                    return
                setattr(delta, result.status, getattr(delta, result.status) + 1)
                if result.cycles is not None:
                    delta.cycles += result.cycles
                if result.resized == "device":
                    delta.device_resized += 1
                if result.damage is not None:
                    delta.damaged += 1
                if result.status == "error":
                    self._flips.pop(result.index, None)
                    if not self.skip_errors:
                        raise DecodeFailed(result.name, result.error)
                    delta.errors.append(Skipped(result.name, result.error))
                    continue
                if self.transform:
                    image = self._transformed(result)
                else:
                    image = resize_image(result.pixels, self.size, self.resize)
                result.pixels = None        # the full-size image is not kept while staged
                staged.append((result, image.permute(1, 2, 0) if self.nhwc else image))
                if len(staged) == self.batch_size:
                    if not self._emit(staged, delta):
                        return
                    staged, delta = [], _Delta()
            if staged and not self.drop_last:
                if not self._emit(staged, delta):
                    return
                delta = _Delta()
            else:
                delta.dropped += len(staged)
            self._tick(delta)
            self._put(("end", delta))
        except BaseException as exc:        # re-raised in the consumer
            self._tick(delta)
            self._put(("error", exc, delta))
        finally:
            if results is not None:
                results.close()

    def _request(self, index, name, width, height):
        """torchvision's pipeline for one file as a crop-and-resize (host/jpeg/transforms.py): the
        device does it where it can, Pillow where not; the train pipeline's flip is drawn
        here, after the crop's draws as torchvision draws them, and applied on the host."""
        if self.transform == "eval":
            return eval_request(width, height, self.eval_resize, self.size)
        request, self._flips[index] = train_request(
            width, height, train_seed(self.seed, self.epoch, name), self.size)
        return request

    def _transformed(self, result):
        """The image of a transformed file as (3, H, W): already cropped and resized; the
        train pipeline's flip still to do."""
        image = torch.from_numpy(result.pixels)
        if self._flips.pop(result.index, False):
            image = image.flip(1)
        return image.permute(2, 0, 1)

    def _emit(self, staged, delta):
        shape = staged[0][1].shape
        for result, image in staged[1:]:
            if image.shape != shape:
                first = staged[0][0]
                raise ValueError(
                    f"size=None keeps images as they are, and a batch needs one shape: "
                    f"{result.name} is {result.height}x{result.width}, {first.name} is "
                    f"{first.height}x{first.width}; give size= to resize them")
        slot, ok = self.pool.acquire(self.stop)
        if not ok:
            return False
        try:
            n = len(staged)
            images, labels = self.pool.buffers(slot, (self.batch_size,) + tuple(shape))
            for i, (_, image) in enumerate(staged):
                images[i].copy_(image)
            labels[:n].copy_(torch.tensor([self.samples[r.index][1] for r, _ in staged],
                                          dtype=torch.int64))
            batch = Batch(images[:n], labels[:n], [r.name for r, _ in staged],
                          [r.status for r, _ in staged])
            self._tick(delta)
            if self._put(("batch", batch, slot, delta)):
                return True
        except BaseException:
            self.pool.release(slot)
            raise
        self.pool.release(slot)
        return False


# ---- one pass over the files (the iterator) -----------------------------------------------------

class BatchPass:
    """The iterator of one pass.  ``close()`` (or dropping it) stops and joins the thread."""

    def __init__(self, ds, service, samples, pool, held, keep):
        self._producer = _Producer(ds, service, samples, pool)
        self._ds = ds                   # the loader (and the service it owns) outlives its pass
        self._pool, self._held, self._keep = pool, held, keep
        self._service = service
        self.stats, self.errors = ds.stats, ds.errors
        self._bar = None
        if ds.progress:
            from tqdm import tqdm
            self._bar = tqdm(total=len(samples), unit="img", desc="decode", file=sys.stderr,
                             dynamic_ncols=True)
        self._closed = False
        _ACTIVE[service] = weakref.ref(self)
        self._producer.thread.start()

    @property
    def closed(self):
        return self._closed

    def __iter__(self):
        return self

    def __next__(self):
        if self._closed:
            raise StopIteration
        while len(self._held) > self._keep:     # the consumer has moved past these
            self._pool.release(self._held.popleft())
        start = time.perf_counter()
        message = self._get()
        self.stats["decode_wait_s"] += time.perf_counter() - start
        self._account(message[-1])
        if message[0] == "batch":
            _, batch, slot, delta = message
            if slot is not None:
                self._held.append(slot)
            self.stats["batches"] += 1
            self.stats["images"] += len(batch.names)
            self._progress(len(batch.names) + delta.error)
            return batch
        self._progress(message[-1].error + message[-1].dropped)
        self.close()
        if message[0] == "error":
            raise message[1]
        raise StopIteration

    def _get(self):
        producer = self._producer
        while True:
            try:
                return producer.queue.get(timeout=_POLL_S)
            except queue.Empty:
                if not producer.thread.is_alive() and producer.queue.empty():
                    self.close()
                    raise RuntimeError("the loader's thread ended without a result") from None

    def _account(self, delta):
        s = self.stats
        for key in ("ok", "fallback", "error", "dropped", "device_resized", "damaged"):
            s[key] += getattr(delta, key)
        s["device_cycles"] += delta.cycles
        s["host_cpu_s"] += delta.cpu
        self.errors += delta.errors

    def _progress(self, n):
        if self._bar is not None:
            s = self.stats
            self._bar.set_postfix({"ok": s["ok"], "fallback": s["fallback"],
                                   "error": s["error"]}, refresh=False)
            self._bar.update(n)

    def close(self):
        """Stop the thread, wait for it, and give back the buffers nobody was handed."""
        if self._closed:
            return
        self._closed = True
        producer = self._producer
        producer.stop.set()
        if producer.thread is not threading.current_thread():
            producer.thread.join()
        while True:                             # batches made but never handed over
            try:
                message = producer.queue.get_nowait()
            except queue.Empty:
                break
            if message[0] == "batch":
                self._pool.release(message[2])
        ref = _ACTIVE.get(self._service)
        if ref is not None and ref() in (self, None):
            del _ACTIVE[self._service]
        if self._bar is not None:
            self._bar.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:                       # pragma: no cover - interpreter shutdown
            pass


def live_pass(service):
    """The pass using ``service`` now, or None (one pass at a time per service)."""
    ref = _ACTIVE.get(service)
    return ref() if ref is not None else None
