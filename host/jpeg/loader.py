"""The PyTorch loader: JPEG files in, batches of uint8 tensors out (DLBooster's batches).

:class:`JpegBatches` is an ``IterableDataset`` that decodes a folder (or a list) of JPEG files
with a :class:`~dlforge.host.jpeg.decode_service.DecoderService`, resizes them on the host CPU with
torch, and yields :class:`Batch` objects whose images live in a pool of preallocated (pinned
when CUDA is there) batch buffers.  A background thread keeps ``prefetch`` batches ready.

    for batch in JpegBatches("train/", 64, device="sim", shuffle=True):
        x = batch.images.cuda(non_blocking=True)      # (64, 3, 224, 224) uint8
        y = batch.labels.cuda(non_blocking=True)

A batch's tensors are views into a pool buffer: they stay valid while the consumer takes the
next :attr:`JpegBatches.keep` batches (``buffers - prefetch - 1``, 13 by default); a consumer
that keeps them longer must ``.clone()`` them.  See docs/loader.md.
"""

import math
import os
import queue
import sys
import threading
import time
import weakref
from collections import deque
from hashlib import blake2b
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import IterableDataset, get_worker_info

from dlforge.host.jpeg.decode_service import UPSAMPLING, DecoderService
from dlforge.host.jpeg.scaled_decode import SCALES
from dlforge.host.jpeg.transforms import TRANSFORMS, eval_request, train_request

__all__ = ["JpegBatches", "Batch", "Skipped", "DecodeFailed", "loader", "resize_image",
           "train_generator", "train_seed", "scan_source", "JPEG_SUFFIXES", "LAYOUTS", "RESIZES"]

JPEG_SUFFIXES = (".jpg", ".jpeg")
LAYOUTS = ("NCHW", "NHWC")
RESIZES = ("shorter-crop", "stretch")

_POLL_S = 0.05                  # how often blocked threads look at the stop flag
_ACTIVE = weakref.WeakKeyDictionary()      # DecoderService -> the live pass using it


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


# ---- the files -------------------------------------------------------------------------------

def _is_jpeg(name):
    return name.lower().endswith(JPEG_SUFFIXES)


def _jpegs_under(folder):
    found = []
    for top, dirs, files in os.walk(folder, followlinks=True):
        dirs.sort()
        found += [os.path.join(top, f) for f in files if _is_jpeg(f)]
    return sorted(found)


def scan_source(source):
    """``(classes, samples)`` for a folder or a list; samples are ``(path, label)``.

    A folder: each immediate subfolder is a class (sorted by name, label = index; its JPEG
    files are found recursively); JPEG files directly in the folder get label -1.  A list:
    paths (label -1) or ``(path, label)`` pairs, taken as given (no suffix filter)."""
    if isinstance(source, (str, os.PathLike)):
        root = Path(source)
        if not root.is_dir():
            raise NotADirectoryError(f"loader source {str(root)!r} is not a folder; give a "
                                     "folder or a list of files")
        entries = sorted(os.scandir(root), key=lambda e: e.name)
        classes = [e.name for e in entries if e.is_dir()]
        samples = [(e.path, -1) for e in entries if e.is_file() and _is_jpeg(e.name)]
        for label, name in enumerate(classes):
            samples += [(path, label) for path in _jpegs_under(root / name)]
        if not samples:
            raise FileNotFoundError(f"no JPEG files (*.jpg, *.jpeg) under {root}")
        return classes, samples
    if isinstance(source, (bytes, bytearray)):
        raise TypeError("loader source must be a folder or a list of files, not bytes")
    samples = []
    for item in source:
        if isinstance(item, (str, os.PathLike)):
            samples.append((os.fspath(item), -1))
        else:
            path, label = item
            samples.append((os.fspath(path), int(label)))
    return [], samples


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
                 "device_resized")

    def __init__(self):
        self.ok = self.fallback = self.error = self.dropped = self.cycles = 0
        self.device_resized = 0
        self.cpu = 0.0
        self.errors = []

    def files(self):
        return self.ok + self.fallback + self.error


class _Pool:
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

class _Pass:
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
        for key in ("ok", "fallback", "error", "dropped", "device_resized"):
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


# ---- the dataset ------------------------------------------------------------------------------

def _fresh_stats():
    return {"images": 0, "ok": 0, "fallback": 0, "error": 0, "dropped": 0, "batches": 0,
            "decode_wait_s": 0.0, "host_cpu_s": 0.0, "device_cycles": 0,
            "device_resized": 0}


class JpegBatches(IterableDataset):
    """Batches of decoded, resized JPEG files; see the module's docstring and docs/loader.md.

    Use it directly (``for batch in ds``), or in a ``DataLoader(ds, batch_size=None)``
    (it makes its own batches; with ``num_workers > 0`` each worker takes a share of the
    files and its own batches, and pinning is then the DataLoader's ``pin_memory``)."""

    def __init__(self, source, batch_size, size=224, layout="NCHW", device="sim", service=None,
                 upsample="fancy", resize="shorter-crop", drop_last=False, prefetch=2,
                 buffers=16, pin_memory=None, rank=None, world_size=None, shuffle=False,
                 seed=0, epoch=0, progress=False, skip_errors=True, transform=None,
                 eval_resize=None, scale=1):
        super().__init__()
        if scale not in SCALES:
            raise ValueError(f"scale must be one of {SCALES} (a decode at 1/scale, "
                             f"libjpeg-turbo's DCT-domain downscale), not {scale!r}")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, not {batch_size!r}")
        if size is not None and (not isinstance(size, int) or size < 1):
            raise ValueError(f"size must be a positive int or None, not {size!r}")
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, not {layout!r}")
        if resize not in RESIZES:
            raise ValueError(f"resize must be one of {', '.join(RESIZES)}, not {resize!r}")
        if transform is not None:
            if transform not in TRANSFORMS:
                raise ValueError(f"transform must be one of {', '.join(TRANSFORMS)} or None, "
                                 f"not {transform!r}")
            if size is None:
                raise ValueError(f"transform={transform!r} needs size= (the crop's side)")
        if eval_resize is None:
            eval_resize = 256 if size == 224 else int(round((size or 224) * 256 / 224))
        if upsample not in UPSAMPLING:
            raise ValueError(f"upsample must be one of {', '.join(UPSAMPLING)}, "
                             f"not {upsample!r}")
        if not isinstance(prefetch, int) or prefetch < 1:
            raise ValueError(f"prefetch must be a positive int, not {prefetch!r}")
        if not isinstance(buffers, int) or buffers < prefetch + 2:
            raise ValueError(f"buffers must be at least prefetch + 2 = {prefetch + 2} (the "
                             f"prefetched batches, the one in use and one more), "
                             f"not {buffers!r}")
        if pin_memory is None:
            pin_memory = torch.cuda.is_available()
        if pin_memory and not (torch.cuda.is_available() or torch.accelerator.is_available()):
            raise ValueError("pin_memory=True needs a CUDA device (torch.cuda.is_available() "
                             "is False)")
        if service is not None and not isinstance(service, DecoderService):
            raise TypeError("service must be an open DecoderService")
        self.classes, self.samples = scan_source(source)
        self.class_to_idx = {name: i for i, name in enumerate(self.classes)}
        self.files = [path for path, _ in self.samples]
        self.labels = [label for _, label in self.samples]
        self.batch_size, self.size, self.layout, self.resize = batch_size, size, layout, resize
        #: torchvision's pipeline instead of ``resize``: ``eval`` (``Resize(eval_resize)``,
        #: ``CenterCrop(size)``) or ``train`` (``RandomResizedCrop(size)`` and the flip,
        #: each file's draws from :func:`train_generator`), bit-exact to torchvision on Pillow
        self.transform, self.eval_resize = transform, int(eval_resize)
        #: decode at 1/scale (2, 4, 8) first, as ``Image.draft`` does; the transform or
        #: resize then works on the scaled image (host/jpeg/scaled_decode.py: on the host)
        self.scale = scale
        self.device, self.upsample = device, upsample
        self.drop_last, self.prefetch, self.buffers = bool(drop_last), prefetch, buffers
        self.keep = buffers - prefetch - 1
        self.pin_memory = bool(pin_memory)
        self._rank, self._world_size = rank, world_size
        self.shuffle, self.seed, self.epoch = bool(shuffle), int(seed), int(epoch)
        self.progress, self.skip_errors = bool(progress), bool(skip_errors)
        self.stats, self.errors = _fresh_stats(), []
        self._shared_service = service
        self._service = None                    # the one this loader opened (and closes)
        self._pool = None
        self._held = deque()                    # slots handed to the consumer, oldest first
        self._pass = None                       # weakref to the live pass
        self._pid = os.getpid()
        self._inherited = []                    # a forked parent's buffers and service

    # -- sharding --

    @property
    def rank(self):
        if self._rank is not None:
            return self._rank
        return torch.distributed.get_rank() if _distributed() else 0

    @property
    def world_size(self):
        if self._world_size is not None:
            return self._world_size
        return torch.distributed.get_world_size() if _distributed() else 1

    def set_epoch(self, epoch):
        """The epoch the shuffle is seeded with (``seed + epoch``), as DistributedSampler."""
        self.epoch = int(epoch)

    def shard(self):
        """The ``(path, label)`` pairs this rank (and DataLoader worker) reads this epoch."""
        rank, world = self.rank, self.world_size
        if not 0 <= rank < world:
            raise ValueError(f"rank {rank} is not in 0..{world - 1} (world_size {world})")
        samples = self.samples
        if self.shuffle:
            g = torch.Generator()
            g.manual_seed(self.seed + self.epoch)
            samples = [samples[i] for i in torch.randperm(len(samples), generator=g).tolist()]
        samples = samples[rank::world]
        worker = get_worker_info()
        if worker is not None:
            samples = samples[worker.id::worker.num_workers]
        return samples

    def __len__(self):
        n = len(self.shard())
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)

    # -- iteration --

    def __iter__(self):
        """A new pass over this rank's shard (a live earlier pass of this loader is stopped)."""
        self._after_fork()
        old = self._pass() if self._pass is not None else None
        if old is not None:
            old.close()
        service = self._open_service()
        other = _ACTIVE.get(service)
        other = other() if other is not None else None
        if other is not None and not other.closed:
            raise RuntimeError("this DecoderService is in use by another loader's pass; "
                               "finish or close() that pass first (one pass at a time per "
                               "service)")
        in_worker = get_worker_info() is not None
        if self._pool is None or in_worker:
            # In a DataLoader worker the batches go to another process: no reused buffers.
            self._pool = _Pool(0 if in_worker else self.buffers,
                               self.pin_memory and not in_worker)
            self._held.clear()
        if self.size is not None:
            shape = (self.batch_size, 3, self.size, self.size) if self.layout == "NCHW" \
                else (self.batch_size, self.size, self.size, 3)
            self._pool.prepare(shape)
        self.stats, self.errors = _fresh_stats(), []
        it = _Pass(self, service, self.shard(), self._pool, self._held, self.keep)
        self._pass = weakref.ref(it)
        return it

    def _open_service(self):
        if self._shared_service is not None:
            return self._shared_service
        if self._service is None:
            self._service = DecoderService(self.device, upsample=self.upsample)
        return self._service

    def _after_fork(self):
        """In a forked child (a DataLoader worker) nothing of the parent's pass is usable."""
        if os.getpid() != self._pid:
            self._inherited.append((self._pool, self._service))   # never freed or closed here
            self._pool, self._service, self._pass = None, None, None
            self._held = deque()
            self._pid = os.getpid()

    def close(self):
        """Stop a live pass and close the decoder service this loader opened."""
        it = self._pass() if self._pass is not None else None
        if it is not None:
            it.close()
        if self._service is not None and os.getpid() == self._pid:
            self._service.close()
        self._service = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:                       # pragma: no cover - interpreter shutdown
            pass

    def __getstate__(self):
        state = self.__dict__.copy()
        state.update(_service=None, _pool=None, _pass=None, _held=deque(), _inherited=[])
        return state

    def __repr__(self):
        return (f"JpegBatches({len(self.samples)} files, {len(self.classes)} classes, "
                f"batch_size={self.batch_size}, size={self.size}, layout={self.layout}, "
                f"rank {self.rank}/{self.world_size})")


def _distributed():
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def loader(source, batch_size, **kw):
    """``JpegBatches(source, batch_size, **kw)``."""
    return JpegBatches(source, batch_size, **kw)
