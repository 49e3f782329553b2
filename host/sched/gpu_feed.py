"""The overlapped data feed: uint8 batches to the device ahead of use, augmented there.

A training step should never wait for its batch.  :class:`GpuFeed` takes any iterable of
uint8 image batches (:class:`~dlforge.host.jpeg.loader.Batch` from ``JpegBatches``,
``(images, labels)`` pairs, or bare image tensors; NCHW or NHWC) and keeps ``ahead`` batches
in flight: each is copied from pinned host memory to the GPU on a *copy stream*
(``non_blocking``), then augmented on that stream (random resized crop and horizontal flip as
one ``affine_grid``/``grid_sample`` per batch, conversion to float and normalisation), and
handed over with an event the consumer's stream waits on, the output ``record_stream``-ed
for the consumer.  Host batches that are not pinned are staged through a small pool of
reusable pinned buffers (a buffer is rewritten only after the copy out of it finished).  A
pinned source batch is copied straight from its own memory, so it must stay unchanged
``ahead`` more batches (``JpegBatches`` keeps its buffers for ``keep`` batches, 13 by
default).

On CPU the same code runs without streams, events or pinning: the work is done when the
batch is fetched.  The crop is bilinear without antialiasing (torchvision's
``RandomResizedCrop`` antialiases tensors), drawn with the same box distribution.

    feed = GpuFeed(JpegBatches("train/", 64, device="sim"), "cuda",
                   augment=Augment(size=224))
    for images, labels in feed:          # float32 NCHW on the GPU, normalised
        ...
"""

import math
from collections import deque

import torch
import torch.nn.functional as F

from dlforge.host.sched.trace import Timeline

__all__ = ["GpuFeed", "Augment", "crop_boxes", "MEAN", "STD"]

MEAN = (0.485, 0.456, 0.406)            # ImageNet's
STD = (0.229, 0.224, 0.225)


def crop_boxes(n, height, width, generator, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3),
               tries=10):
    """``(top, left, h, w)`` per image, as torchvision's RandomResizedCrop draws them: an area
    fraction in ``scale`` and a log-uniform aspect ratio in ``ratio``, the first of ``tries``
    draws that fits, else the whole image cropped to the nearest allowed ratio."""
    area = height * width
    target = area * torch.empty(n, tries).uniform_(*scale, generator=generator)
    aspect = torch.exp(torch.empty(n, tries).uniform_(math.log(ratio[0]), math.log(ratio[1]),
                                                      generator=generator))
    w = torch.sqrt(target * aspect).round().long()
    h = torch.sqrt(target / aspect).round().long()
    fits = (w > 0) & (w <= width) & (h > 0) & (h <= height)
    first = torch.where(fits.any(1), fits.int().argmax(1), -1)
    # The fallback: the central crop at the closest allowed aspect ratio.
    in_ratio = width / height
    if in_ratio < ratio[0]:
        fw, fh = width, round(width / ratio[0])
    elif in_ratio > ratio[1]:
        fw, fh = round(height * ratio[1]), height
    else:
        fw, fh = width, height
    rows = torch.arange(n)
    pick = first.clamp(min=0)
    h = torch.where(first >= 0, h[rows, pick], fh)
    w = torch.where(first >= 0, w[rows, pick], fw)
    u = torch.rand(n, 2, generator=generator)
    top = torch.where(first >= 0, (u[:, 0] * (height - h + 1)).long(), (height - h) // 2)
    left = torch.where(first >= 0, (u[:, 1] * (width - w + 1)).long(), (width - w) // 2)
    return torch.stack([top, left, h, w], 1)


class Augment:
    """What runs on the device after the copy: an optional random resized crop to ``size``
    pixels, an optional horizontal flip (probability ``flip``), then float and
    ``(x / 255 - mean) / std``.  Random draws come from a seeded CPU generator, so a run
    is repeatable; they reach the device through pinned memory, so the host never waits for
    the stream."""

    def __init__(self, size=None, flip=0.5, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3),
                 mean=MEAN, std=STD, seed=0):
        self.size, self.flip, self.scale, self.ratio = size, flip, scale, ratio
        self.mean, self.std = mean, std
        self.generator = torch.Generator().manual_seed(seed)
        self._constants = {}            # device -> (mean, std) tensors, made once

    def theta(self, n, height, width, boxes=None, flips=None):
        """The affine maps (n, 2, 3) taking output to input coordinates (``align_corners``
        False: -1 and 1 are the outer pixel edges)."""
        if boxes is None:
            boxes = crop_boxes(n, height, width, self.generator, self.scale, self.ratio)
        if flips is None:
            flips = torch.rand(n, generator=self.generator) < self.flip
        top, left, h, w = boxes.double().unbind(1)
        theta = torch.zeros(n, 2, 3, dtype=torch.float64)
        theta[:, 0, 0] = torch.where(flips, -w / width, w / width)
        theta[:, 0, 2] = (2 * left + w) / width - 1
        theta[:, 1, 1] = h / height
        theta[:, 1, 2] = (2 * top + h) / height - 1
        return theta.float()

    def __call__(self, images):
        """uint8 NCHW on the device -> normalised float32 NCHW."""
        x = images.float()
        n, _, height, width = x.shape
        if self.size is not None:
            theta = _upload(self.theta(n, height, width), x.device)
            grid = F.affine_grid(theta, (n, x.shape[1], self.size, self.size),
                                 align_corners=False)
            x = F.grid_sample(x, grid, mode="bilinear", padding_mode="border",
                              align_corners=False)
        elif self.flip:
            flips = _upload(torch.rand(n, generator=self.generator) < self.flip, x.device)
            x = torch.where(flips.view(-1, 1, 1, 1), x.flip(-1), x)
        return self.normalise(x)

    def normalise(self, x):
        """float images in 0..255 -> ``(x / 255 - mean) / std``, in place."""
        if x.device not in self._constants:
            self._constants[x.device] = tuple(torch.tensor(v, device=x.device).view(1, -1, 1, 1)
                                              for v in (self.mean, self.std))
        mean, std = self._constants[x.device]
        return x.div_(255).sub_(mean).div_(std)


def _upload(t, device):
    """``t`` on ``device`` without the host waiting (pinned first when it goes to a GPU)."""
    if device.type == "cuda":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)


def _split(item):
    if isinstance(item, torch.Tensor):
        return item, None
    return item[0], item[1]


class GpuFeed:
    """Iterates ``(images, labels)`` on ``device`` over ``batches``; see the module docstring.

    While the consumer holds one batch, ``ahead`` more are being copied and augmented.
    ``layout`` is ``"NCHW"``, ``"NHWC"`` or ``"auto"`` (NHWC when the last dimension is 1 or
    3 and the second is not).  ``augment=None`` only converts and normalises.
    """

    def __init__(self, batches, device="cuda", ahead=1, augment=None, layout="auto",
                 timeline=None):
        if ahead < 1:
            raise ValueError(f"ahead must be at least 1, not {ahead}")
        self.batches, self.ahead = batches, ahead
        self.device = torch.device(device)
        self.augment = augment if augment is not None else Augment(flip=0.0)
        self.layout = layout
        self.timeline = timeline if timeline is not None else Timeline(enabled=False)
        self.is_cuda = self.device.type == "cuda"
        self.stream = torch.cuda.Stream(self.device) if self.is_cuda else None
        self.track = "copy stream" if self.is_cuda else "main thread"
        self._staging = deque()         # (pinned buffer, event of the copy out of it)

    def _nchw(self, images):
        layout = self.layout
        if layout == "auto":
            layout = "NHWC" if images.shape[-1] in (1, 3) and images.shape[1] not in (1, 3) \
                else "NCHW"
        return images.permute(0, 3, 1, 2) if layout == "NHWC" else images

    def _pinned(self, images):
        """A pinned host tensor holding ``images`` (staged unless pinned already)."""
        if images.is_pinned():
            return images, None
        for i, (buffer, copied) in enumerate(self._staging):
            if buffer.shape == images.shape and buffer.dtype == images.dtype \
                    and copied.query():
                del self._staging[i]
                break
        else:
            buffer = torch.empty(images.shape, dtype=images.dtype, pin_memory=True)
        buffer.copy_(images)
        return buffer, buffer

    def _start(self, item):
        """Issue the copy and the augmentation of one batch; what :meth:`_finish` needs."""
        images, labels = _split(item)
        tl = self.timeline
        if not self.is_cuda:
            with tl.span("copy batch", "copy", self.track):
                images = images.to(self.device)
                labels = None if labels is None else labels.to(self.device)
            with tl.span("augment", "augment", self.track):
                out = self._augment(self._nchw(images))
            return out, labels, None
        host, staged = self._pinned(images)
        host_labels = None if labels is None else (labels if labels.is_pinned()
                                                   else labels.pin_memory())
        with torch.cuda.stream(self.stream):
            with tl.span("copy batch", "copy", self.track, self.stream):
                images = host.to(self.device, non_blocking=True)
                labels = None if host_labels is None else host_labels.to(self.device,
                                                                          non_blocking=True)
            if staged is not None:
                copied = torch.cuda.Event()
                copied.record(self.stream)
                self._staging.append((staged, copied))
            with tl.span("augment", "augment", self.track, self.stream):
                out = self._augment(self._nchw(images))
            ready = torch.cuda.Event()
            ready.record(self.stream)
        return out, labels, ready

    def _augment(self, images):
        return self.augment(images)

    def _finish(self, started):
        out, labels, ready = started
        if ready is not None:
            consumer = torch.cuda.current_stream(self.device)
            consumer.wait_event(ready)
            out.record_stream(consumer)
            if labels is not None:
                labels.record_stream(consumer)
        return out, labels

    def __iter__(self):
        source = iter(self.batches)
        in_flight = deque()
        while True:
            while source is not None and len(in_flight) <= self.ahead:
                start = self.timeline.now()
                item = next(source, None)
                self.timeline.add("data wait", "data_wait", "host thread", start,
                                  self.timeline.now())
                if item is None:
                    source = None
                else:
                    in_flight.append(self._start(item))
            if not in_flight:
                return
            yield self._finish(in_flight.popleft())
