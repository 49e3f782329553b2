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

This module is the dataset: the files and their labels, the options, the shards and the
passes' lifetime (forks, pickling).  A pass itself (the thread, the buffer pool, the iterator)
is :mod:`dlforge.host.jpeg.batch_producer`, which also defines the batch types and the image
steps exported here (``Batch``, ``Skipped``, ``DecodeFailed``, ``resize_image``,
``train_seed``, ``train_generator``, ``RESIZES``).
"""

import math
import os
import weakref
from collections import deque
from pathlib import Path

import torch
from torch.utils.data import IterableDataset, get_worker_info

from dlforge.host.jpeg.batch_producer import (RESIZES, Batch, BatchPass, BufferPool,
                                              DecodeFailed, Skipped, live_pass, resize_image,
                                              train_generator, train_seed)
from dlforge.host.jpeg.decode_service import ON_DAMAGE, UPSAMPLING, DecoderService
from dlforge.host.jpeg.scaled_decode import SCALES
from dlforge.host.jpeg.transforms import TRANSFORMS

__all__ = ["JpegBatches", "Batch", "Skipped", "DecodeFailed", "loader", "resize_image",
           "train_generator", "train_seed", "scan_source", "JPEG_SUFFIXES", "LAYOUTS", "RESIZES"]

JPEG_SUFFIXES = (".jpg", ".jpeg")
LAYOUTS = ("NCHW", "NHWC")


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


# ---- the dataset ------------------------------------------------------------------------------

def _fresh_stats():
    return {"images": 0, "ok": 0, "fallback": 0, "error": 0, "dropped": 0, "batches": 0,
            "decode_wait_s": 0.0, "host_cpu_s": 0.0, "device_cycles": 0,
            "device_resized": 0, "damaged": 0}


class JpegBatches(IterableDataset):
    """Batches of decoded, resized JPEG files; see the module's docstring and docs/loader.md.

    Use it directly (``for batch in ds``), or in a ``DataLoader(ds, batch_size=None)``
    (it makes its own batches; with ``num_workers > 0`` each worker takes a share of the
    files and its own batches, and pinning is then the DataLoader's ``pin_memory``)."""

    def __init__(self, source, batch_size, size=224, layout="NCHW", device="sim", service=None,
                 upsample="fancy", resize="shorter-crop", drop_last=False, prefetch=2,
                 buffers=16, pin_memory=None, rank=None, world_size=None, shuffle=False,
                 seed=0, epoch=0, progress=False, skip_errors=True, transform=None,
                 eval_resize=None, scale=1, on_damage="pillow"):
        super().__init__()
        if on_damage not in ON_DAMAGE:
            raise ValueError(f"on_damage must be one of {', '.join(ON_DAMAGE)}, "
                             f"not {on_damage!r}")
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
        #: a damaged file: decoded as Pillow decodes it ("pillow"), or an error ("error")
        self.on_damage = on_damage
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
        other = live_pass(service)
        if other is not None and not other.closed:
            raise RuntimeError("this DecoderService is in use by another loader's pass; "
                               "finish or close() that pass first (one pass at a time per "
                               "service)")
        in_worker = get_worker_info() is not None
        if self._pool is None or in_worker:
            # In a DataLoader worker the batches go to another process: no reused buffers.
            self._pool = BufferPool(0 if in_worker else self.buffers,
                               self.pin_memory and not in_worker)
            self._held.clear()
        if self.size is not None:
            shape = (self.batch_size, 3, self.size, self.size) if self.layout == "NCHW" \
                else (self.batch_size, self.size, self.size, 3)
            self._pool.prepare(shape)
        self.stats, self.errors = _fresh_stats(), []
        it = BatchPass(self, service, self.shard(), self._pool, self._held, self.keep)
        self._pass = weakref.ref(it)
        return it

    def _open_service(self):
        if self._shared_service is not None:
            return self._shared_service
        if self._service is None:
            self._service = DecoderService(self.device, upsample=self.upsample,
                                           on_damage=self.on_damage)
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
