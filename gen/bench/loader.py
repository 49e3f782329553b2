"""``dlforge bench loader``: the host's CPU time per image on the device path, next to the CPU
time libjpeg-turbo needs to decode the same images, measured in one run on the same files.

DLBooster's point is that the host must not become the bottleneck: managing the FPGAs took
under one core.  Here the device path is everything this process does for an image handed to
a device — the header pre-check, framing and CRCs, the link's system calls and copies, the
reply parsing and the image array — and not the device's own work, which for ``sim`` runs in
the simulated board's separate process (that process's CPU time is the simulation, reported
apart as ``simulator``).  CPU times are ``time.process_time`` (user + system, every thread of
this process); both sides get the files' bytes already in memory.  Both sides are medians:
libjpeg-turbo's of ``repeat`` decodes of each file, the device path's of ``batches`` streamed
batches (on this VM one batch's figure varies by half with the CPU time charged for the
host's few sleeps).  A batch's images are held until it ends, as a loader collates them (on
TCP each is a fresh array: that costs the host page faults), and then each is checked
bit-exactly against libjpeg-turbo; ``mismatches`` counts the ones that differ.  Checking each
image as it arrived, between the host's steps, measured the DMA path at 87–191 µs instead of
62–72 (the comparisons push the host's code and data out of the caches).
"""

import gc
import time
from pathlib import Path

from dlforge.host.jpeg.scaled_decode import scaled_decode

__all__ = ["bench_loader", "bench_loader_both", "default_files", "HOST_BUDGET"]

#: The host's CPU per image on the device path may be at most this share of libjpeg-turbo's
#: decode of the same image (DLBooster: the host only moves finished batches).
HOST_BUDGET = 0.05


def default_files(folder="build/bench/loader"):
    """skimage's three JPEG files and a few photo-corpus encodes, written to ``folder``."""
    from dlforge.gen.demo import demo_files
    return demo_files(folder, photos=3)


def _libjpeg_cpu(datas, repeat):
    best = []
    for data in datas:
        times = []
        for _ in range(repeat):
            t = time.process_time()
            scaled_decode(data, 1)
            times.append(time.process_time() - t)
        best.append(sorted(times)[len(times) // 2])
    return best


def _references(datas):
    return [scaled_decode(d, 1)
            for d in datas]


def _wrong(result, ref):
    """Whether a result is not ``ok`` and bit-exact to libjpeg-turbo's accurate decode."""
    import numpy as np
    return result.status != "ok" or result.pixels is None \
        or result.pixels.shape != ref.shape or not np.array_equal(result.pixels, ref)


def _mismatches(datas, results):
    """How many results (in order, ``len(datas)`` files a round) are wrong."""
    refs = _references(datas)
    return sum(_wrong(r, refs[k % len(datas)]) for k, r in enumerate(results))


def bench_loader(files=None, device="sim:dma", repeat=5, passes=8, batches=3):
    """A dict of the figures (printed as JSON by the command).

    The default device is the simulated board behind its DMA link (``sim:dma``, built
    without the convolution engine, which decoding does not use): the host posts each file
    once and the engine places the pixels (:mod:`dlforge.host.link.dma`).  The files go as one
    stream of ``passes`` rounds, as a loader streams them, ``batches`` times."""
    from dlforge.host.jpeg.decode_service import DecoderService
    paths = [Path(f) for f in (files or default_files())]
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise ValueError(f"no such file: {missing[0]}")
    datas = [p.read_bytes() for p in paths]
    libjpeg = _libjpeg_cpu(datas, repeat)
    images = len(datas) * passes
    options = {"conv": False} if str(device).startswith("sim") else {}
    with DecoderService(device, **options) as service:
        list(service.decode(datas[:1]))                      # connect and warm up
        # A board built in this process leaves the elaborated design's garbage behind; its
        # collection (some 25 ms) is not the device path's.
        gc.collect()
        counts_before = dict(service.counts)
        sleeps = getattr(getattr(service.device, "transport", None), "sleeps", 0)
        refs = _references(datas)
        cpus, statuses, mismatches = [], [], 0
        wall = 0.0
        for _ in range(batches):
            # the batch's images are held, as a loader collates them, and checked after
            cpu, start = time.process_time(), time.perf_counter()
            results = list(service.decode(datas * passes))
            cpus.append(time.process_time() - cpu)
            wall += time.perf_counter() - start
            statuses += [r.status for r in results]
            mismatches += sum(_wrong(r, refs[k % len(datas)]) for k, r in enumerate(results))
            del results
            gc.collect()                        # (the arena's slots come back)
        info = service.device.info()
        link = getattr(service.device, "link", None)
        sim = getattr(service.device, "owner", None)
    per_image = sorted(c / images for c in cpus)
    host = per_image[len(per_image) // 2]
    lib = sum(libjpeg) / len(libjpeg)
    report = {
        "device": info.get("device"), "files": [p.name for p in paths], "passes": passes,
        "batches": batches, "images": images * batches, "ok": statuses.count("ok"),
        "fallback": statuses.count("fallback"), "error": statuses.count("error"),
        "checked": "every image bit-exact against libjpeg-turbo (simplejpeg, accurate DCT)",
        "mismatches": mismatches,
        "megapixels": None,
        "host_cpu_s_per_image": round(host, 7),
        "host_cpu_s_per_image_batches": [round(c / images, 7) for c in cpus],
        "libjpeg_cpu_s_per_image": round(lib, 7),
        "host_vs_libjpeg": round(host / lib, 4) if lib else None,
        "within_5_percent": host <= HOST_BUDGET * lib and not mismatches,
        "wall_s": round(wall, 3),
        "link": None if link is None else {
            "reliable": link.transport.reliable if link.transport else None,
            "bytes_in": link.bytes_in, "bytes_out": link.bytes_out,
            # the DMA link's: the host's sleeps (each wake-up costs CPU), and how often the
            # request ring was full / the arena had no room
            **({"sleeps": link.transport.sleeps - sleeps, "ring_full": link.ring_full,
                "arena_full": link.arena_full} if link.frames_files else {})},
        "simulator": None if sim is None else sim.stats,
        "counts_before": counts_before,
    }
    import simplejpeg
    pixels = sum(h * w for h, w, *_ in (simplejpeg.decode_jpeg_header(d)[:2] for d in datas))
    report["megapixels"] = round(pixels * passes * batches / 1e6, 3)
    return report


def bench_loader_both(files=None, repeat=5, passes=8, batches=3):
    """The DMA link's report (the budget's), with the TCP link's beside it (``tcp``): the
    same board build, the same files.  ``ok``: the DMA link within :data:`HOST_BUDGET`."""
    report = bench_loader(files, "sim:dma", repeat, passes, batches)
    tcp = bench_loader(files, "sim", repeat, passes, batches)
    report["tcp"] = {k: tcp[k] for k in ("device", "images", "ok", "mismatches",
                                         "host_cpu_s_per_image", "host_cpu_s_per_image_batches",
                                         "libjpeg_cpu_s_per_image", "host_vs_libjpeg",
                                         "within_5_percent", "wall_s")}
    report["budget"] = HOST_BUDGET
    return report
