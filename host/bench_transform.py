"""``dlforge bench loader --transform eval|train``: the host's CPU per *training-ready* image on
the device path (decoded by the device, then torchvision's pipeline, host/transforms.py),
next to the CPU pipeline it replaces (Pillow's decode plus the same crop and resize), in
one run on the same files, every image checked equal to the CPU pipeline's.

The target (issue 18) is 5 %: DLBooster's host only moved finished batches.  Until the
device resamples, the host still runs the resize, so this measures how far the device path
is from it.  The files are ImageNet-size photos made from the photo corpus: 500x375, 4:2:0,
quality 90.  CPU times as in :mod:`dlforge.host.bench_loader` (medians; the device path's of
``batches`` streamed batches).
"""

import gc
import io
import time
from pathlib import Path

import numpy as np

from .bench_loader import HOST_BUDGET

__all__ = ["bench_transform", "imagenet_files"]


def imagenet_files(folder="build/bench/imagenet", count=6):
    """``count`` photos of the photo corpus as ImageNet-size files (500x375, 4:2:0, q90)."""
    from PIL import Image

    from ..sim import jpeg_corpus
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
    from .loader import train_generator
    from .transforms import eval_transform, train_transform
    if transform == "eval":
        return lambda pixels, name: eval_transform(pixels, 256 if size == 224
                                                   else round(size * 256 / 224), size)
    if transform == "train":
        return lambda pixels, name: train_transform(pixels, train_generator(seed, 0, name),
                                                    size)
    raise ValueError(f"transform must be eval or train, not {transform!r}")


def _pillow_decode(data):
    from PIL import Image
    with Image.open(io.BytesIO(data)) as image:
        return np.asarray(image.convert("RGB"))


def bench_transform(files=None, transform="eval", device="sim:dma", size=224, repeat=5,
                    passes=4, batches=3, seed=0):
    """A dict of the figures (printed as JSON by the command)."""
    from .decode_service import DecoderService
    paths = [Path(f) for f in (files or imagenet_files())]
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise ValueError(f"no such file: {missing[0]}")
    datas = [p.read_bytes() for p in paths]
    apply = _pipeline(transform, size, seed)
    images = len(datas) * passes
    names = [f"#{k}" for k in range(images)]          # (the service's names for bytes)
    # the CPU pipeline: Pillow's decode and the same transform, per file
    cpu = []
    for k, data in enumerate(datas):
        times = []
        for _ in range(repeat):
            t = time.process_time()
            apply(_pillow_decode(data), names[k])
            times.append(time.process_time() - t)
        cpu.append(sorted(times)[len(times) // 2])
    want = [apply(_pillow_decode(datas[k % len(datas)]), names[k]) for k in range(images)]
    options = {"conv": False} if str(device).startswith("sim") else {}
    with DecoderService(device, **options) as service:
        list(service.decode(datas[:1]))                  # connect and warm up
        gc.collect()
        cpus, walls, statuses, mismatches = [], [], [], 0
        for _ in range(batches):
            c, w = time.process_time(), time.perf_counter()
            out = [(r.status, apply(r.pixels, r.name)) for r in service.decode(datas * passes)]
            cpus.append(time.process_time() - c)
            walls.append(time.perf_counter() - w)
            statuses += [s for s, _ in out]
            mismatches += sum(s != "ok" or not np.array_equal(x, want[k])
                              for k, (s, x) in enumerate(out))
            del out
            gc.collect()
        info = service.device.info()
    per_image = sorted(c / images for c in cpus)
    host = per_image[len(per_image) // 2]
    pipeline = sum(cpu) / len(cpu)
    wall = sorted(walls)[len(walls) // 2]
    return {
        "device": info.get("device"), "transform": transform, "size": size,
        "files": [p.name for p in paths], "passes": passes, "batches": batches,
        "images": images * batches, "ok": statuses.count("ok"),
        "checked": f"every image equal to Pillow's decode through the same {transform} "
                   "transform (the CPU pipeline)",
        "mismatches": mismatches,
        "host_cpu_s_per_image": round(host, 7),
        "host_cpu_s_per_image_batches": [round(c / images, 7) for c in cpus],
        "cpu_pipeline_s_per_image": round(pipeline, 7),
        "host_vs_cpu_pipeline": round(host / pipeline, 4) if pipeline else None,
        "within_5_percent": host <= HOST_BUDGET * pipeline and not mismatches,
        "images_per_s": round(images / wall, 3) if wall else None,
        "resize_on": "host (no resampler gateware yet)",
    }
