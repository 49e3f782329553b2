"""``dlforge bench loader --transform eval|train``: the host's CPU per *training-ready* image on
the device path (torchvision's pipeline, host/jpeg/transforms.py, as crop-and-resize requests the
device's resamplers do; the train flip on the host), next to the CPU pipeline it replaces
(Pillow's decode plus the same crop and resize), in one run on the same files, every image
checked equal to the CPU pipeline's.

The target (issue 18) is 5 %: DLBooster's host only moved finished batches.  A device
without resamplers (or a request beyond them) leaves the resize to the host, which the
figures then include; ``resized_on_device`` counts the images the device finished.  The
files are ImageNet-size photos made from the photo corpus: 500x375, 4:2:0,
quality 90.  CPU times as in :mod:`dlforge.gen.bench.loader` (medians; the device path's of
``batches`` streamed batches).
"""

import gc
import io
import math
import time
from pathlib import Path

import numpy as np

from dlforge.gen.bench.loader import HOST_BUDGET

__all__ = ["bench_transform", "imagenet_files"]


def imagenet_files(folder="build/bench/imagenet", count=6):
    """``count`` photos of the photo corpus as ImageNet-size files (500x375, 4:2:0, q90)."""
    from PIL import Image

    from dlforge.sim.corpus import jpeg_corpus
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    corpus = jpeg_corpus.photo_corpus()
    paths = []
    for f in corpus[::max(1, len(corpus) // count)][:count]:
        with Image.open(io.BytesIO(f.data)) as image:
            small = image.convert("RGB").resize((500, 375), Image.Resampling.LANCZOS)
        buf = io.BytesIO()
        small.save(buf, "JPEG", quality=90, subsampling=2)
        paths.append(folder / f"{f.name}-500x375.jpg")
        paths[-1].write_bytes(buf.getvalue())
    return paths


def _pipeline(transform, size, seed):
    """The CPU pipeline: (pixels, name, epoch) -> the training-ready image."""
    from dlforge.host.jpeg.loader import train_generator
    from dlforge.host.jpeg.transforms import eval_transform, train_transform
    if transform == "eval":
        return lambda pixels, name, epoch: eval_transform(
            pixels, 256 if size == 224 else round(size * 256 / 224), size)
    if transform == "train":
        return lambda pixels, name, epoch: train_transform(
            pixels, train_generator(seed, epoch, name), size)
    raise ValueError(f"transform must be eval or train, not {transform!r}")


def _pillow_decode(data):
    from PIL import Image
    with Image.open(io.BytesIO(data)) as image:
        return np.asarray(image.convert("RGB"))


def bench_transform(files=None, transform="eval", device="sim:dma", size=224, repeat=5,
                    passes=4, batches=3, seed=0, warmup=50):
    """A dict of the figures (printed as JSON by the command).  Each batch is an epoch of
    its own (the train pipeline draws new crops).  The host keeps its resize tables per
    size (a few hundred per axis in a training run); ``warmup`` epochs of requests are made
    first (on the host only, the device has nothing to add), as a run's first epochs would,
    and for ``train`` the tables of every crop side the files can draw (a run's first
    epoch over ImageNet draws them all: making one costs some 100-300 us, a few per batch
    here without it); the JSON counts the tables made and kept during the measured
    batches."""
    from dlforge.host.jpeg.decode_service import DecoderService
    from dlforge.host.jpeg.loader import train_seed
    from dlforge.host.jpeg.resize_request import make_tables, table_cache
    from dlforge.host.jpeg.transforms import eval_request, train_request
    paths = [Path(f) for f in (files or imagenet_files())]
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise ValueError(f"no such file: {missing[0]}")
    datas = [p.read_bytes() for p in paths]
    apply = _pipeline(transform, size, seed)
    images = len(datas) * passes
    names = [f"#{k}" for k in range(images)]          # (the service's names for bytes)
    eval_resize = 256 if size == 224 else round(size * 256 / 224)
    # the CPU pipeline: Pillow's decode and the same transform, per file
    cpu = []
    for k, data in enumerate(datas):
        times = []
        for _ in range(repeat):
            t = time.process_time()
            apply(_pillow_decode(data), names[k], 0)
            times.append(time.process_time() - t)
        cpu.append(sorted(times)[len(times) // 2])
    decoded = [_pillow_decode(d) for d in datas]
    flips = {}
    epoch = [0]

    def request(index, name, width, height):
        if transform == "eval":
            return eval_request(width, height, eval_resize, size)
        r, flips[index] = train_request(width, height, train_seed(seed, epoch[0], name), size)
        return r

    def ready(result):
        # (the flip as a view: the loader's copy into its batch buffer reads it flipped)
        pixels = result.pixels
        if flips.pop(result.index, False):
            pixels = pixels[:, ::-1]
        return pixels

    options = {"conv": False} if str(device).startswith("sim") else {}
    sizes = [decoded[k % len(datas)].shape[1::-1] for k in range(images)]
    for e in range(warmup):
        epoch[0] = -1 - e
        for k, (width, height) in enumerate(sizes):
            try:
                request(k, names[k], width, height).request(7, (1024, 1024))
            except ValueError:
                pass                                    # (one the device cannot take)
    if transform == "train":
        # RandomResizedCrop's sides: round(sqrt(area * scale * aspect^+-1)), at least
        # sqrt(0.08 * 3/4 * area), at most the image's
        for width, height in set(sizes):
            least = max(1, math.isqrt(width * height * 6 // 100) - 1)
            make_tables(range(least, max(width, height) + 1), size, 7)
    with DecoderService(device, **options) as service:
        list(service.decode(datas[:1]))                  # connect and warm up
        flips.clear()
        gc.collect()
        cpus, walls, statuses, mismatches, on_device = [], [], [], 0, 0
        tables = table_cache()
        for b in range(batches):
            epoch[0] = b
            want = [apply(decoded[k % len(datas)], names[k], b) for k in range(images)]
            gc.collect()
            c, w = time.process_time(), time.perf_counter()
            out = [(r.status, ready(r), r.resized)
                   for r in service.decode(datas * passes, resize=request)]
            cpus.append(time.process_time() - c)
            walls.append(time.perf_counter() - w)
            statuses += [s for s, _, _ in out]
            on_device += sum(by == "device" for _, _, by in out)
            mismatches += sum(s != "ok" or not np.array_equal(x, want[k])
                              for k, (s, x, _) in enumerate(out))
            del out, want
        after = table_cache()
        info = service.device.info()
    per_image = sorted(c / images for c in cpus)
    host = per_image[len(per_image) // 2]
    pipeline = sum(cpu) / len(cpu)
    wall = sorted(walls)[len(walls) // 2]
    return {
        "device": info.get("device"), "transform": transform, "size": size,
        "files": [p.name for p in paths], "passes": passes, "batches": batches,
        "warmup_epochs": warmup,
        "images": images * batches, "ok": statuses.count("ok"),
        "checked": f"every image equal to Pillow's decode through the same {transform} "
                   "transform (the CPU pipeline), each batch an epoch of its own draws",
        "mismatches": mismatches,
        "resized_on_device": on_device,
        "tables_made_in_batches": after.misses - tables.misses,
        "tables_kept_in_batches": after.hits - tables.hits,
        "host_cpu_s_per_image": round(host, 7),
        "host_cpu_s_per_image_batches": [round(c / images, 7) for c in cpus],
        "cpu_pipeline_s_per_image": round(pipeline, 7),
        "host_vs_cpu_pipeline": round(host / pipeline, 4) if pipeline else None,
        "within_5_percent": host <= HOST_BUDGET * pipeline and not mismatches,
        "images_per_s": round(images / wall, 3) if wall else None,
    }
