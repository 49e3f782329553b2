"""``dlforge bench loader``: the host's CPU time per image on the device path, next to the CPU
time libjpeg-turbo needs to decode the same images, measured in one run on the same files.

DLBooster's point is that the host must not become the bottleneck: managing the FPGAs took
under one core.  Here the device path is everything this process does for an image handed to
a device — the header pre-check, framing and CRCs, the link's system calls and copies, the
reply parsing and the image array — and not the device's own work, which for ``sim`` runs in
the simulated board's separate process (that process's CPU time is the simulation, reported
apart as ``simulator``).  CPU times are ``time.process_time`` (user + system, every thread of
this process); both sides get the files' bytes already in memory.
"""

import gc
import os
import time
from pathlib import Path

__all__ = ["bench_loader", "bench_loader_both", "default_files", "HOST_BUDGET"]

#: The host's CPU per image on the device path may be at most this share of libjpeg-turbo's
#: decode of the same image (DLBooster: the host only moves finished batches).
HOST_BUDGET = 0.05


def default_files(folder="build/bench/loader"):
    """skimage's three JPEG files and a few photo-corpus encodes, written to ``folder``."""
    from ..gen.demo import demo_files
    return demo_files(folder, photos=3)


def _libjpeg_cpu(datas, repeat):
    import simplejpeg
    best = []
    for data in datas:
        times = []
        for _ in range(repeat):
            t = time.process_time()
            simplejpeg.decode_jpeg(data, colorspace="RGB", fastdct=False, fastupsample=False)
            times.append(time.process_time() - t)
        best.append(sorted(times)[len(times) // 2])
    return best


def bench_loader(files=None, device="sim:dma", repeat=5, passes=8):
    """A dict of the figures (printed as JSON by the command).

    The default device is the simulated board behind its DMA link (``sim:dma``, built
    without the convolution engine, which decoding does not use): the host posts each file
    once and the engine places the pixels (:mod:`dlforge.host.link.dma`).  The files go as one
    stream of ``passes`` rounds, as a loader streams them."""
    from .decode_service import DecoderService
    paths = [Path(f) for f in (files or default_files())]
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise ValueError(f"no such file: {missing[0]}")
    datas = [p.read_bytes() for p in paths]
    libjpeg = _libjpeg_cpu(datas, repeat)
    options = {"conv": False} if str(device).startswith("sim") else {}
    with DecoderService(device, **options) as service:
        list(service.decode(datas[:1]))                      # connect and warm up
        # A board built in this process leaves the elaborated design's garbage behind; its
        # collection (some 25 ms) is not the device path's.
        gc.collect()
        counts_before = dict(service.counts)
        sleeps = getattr(getattr(service.device, "transport", None), "sleeps", 0)
        cpu, wall, times = time.process_time(), time.perf_counter(), os.times()
        statuses = [r.status for r in service.decode(datas * passes)]
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        after = os.times()
        user, system = after.user - times.user, after.system - times.system
        info = service.device.info()
        link = getattr(service.device, "link", None)
        sim = getattr(service.device, "owner", None)
    images = len(datas) * passes
    host = cpu / images
    lib = sum(libjpeg) / len(libjpeg)
    report = {
        "device": info.get("device"), "files": [p.name for p in paths], "passes": passes,
        "images": images, "ok": statuses.count("ok"), "fallback": statuses.count("fallback"),
        "error": statuses.count("error"),
        "megapixels": None,
        "host_cpu_s_per_image": round(host, 7),
        "libjpeg_cpu_s_per_image": round(lib, 7),
        "host_vs_libjpeg": round(host / lib, 4) if lib else None,
        "host_user_s": round(user, 3), "host_system_s": round(system, 3),
        "within_5_percent": host <= HOST_BUDGET * lib,
        "wall_s": round(wall, 3),
        "link": None if link is None else {
            "reliable": link.transport.reliable if link.transport else None,
            "bytes_in": link.bytes_in, "bytes_out": link.bytes_out,
            # the DMA link's: the host's sleeps (each wake-up costs CPU), and how often the
            # request ring was full / the arena had no room
            **({"sleeps": link.transport.sleeps - sleeps, "ring_full": link.ring_full,
                "arena_full": link.arena_full} if hasattr(link, "ring_full") else {})},
        "simulator": None if sim is None else sim.stats,
        "counts_before": counts_before,
    }
    import simplejpeg
    pixels = sum(h * w for h, w, *_ in (simplejpeg.decode_jpeg_header(d)[:2] for d in datas))
    report["megapixels"] = round(pixels * passes / 1e6, 3)
    return report


def bench_loader_both(files=None, repeat=5, passes=8):
    """The DMA link's report (the budget's), with the TCP link's beside it (``tcp``): the
    same board build, the same files.  ``ok``: the DMA link within :data:`HOST_BUDGET`."""
    report = bench_loader(files, "sim:dma", repeat, passes)
    tcp = bench_loader(files, "sim", repeat, passes)
    report["tcp"] = {k: tcp[k] for k in ("device", "images", "ok", "host_cpu_s_per_image",
                                         "libjpeg_cpu_s_per_image", "host_vs_libjpeg",
                                         "within_5_percent", "wall_s")}
    report["budget"] = HOST_BUDGET
    return report
