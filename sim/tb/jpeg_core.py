"""cocotb testbench of the whole decoder core: JPEG files in, header + RGB + trailer out.

Parameters (``DLFORGE_TB_PARAMS``):
  files       list of JPEG paths to decode (else ``corpus``)
  corpus      quick | full | photos | heavy | crops | shipped | unsupported | malformed |
              mixed | fuzz
  limit       at most this many files
  modes       list of "fancy" / "fast": every file is decoded in each
  repeat      send every file this many times in a row (a balanced batch for several cores)
  check       compare with the golden model (status, size, pixels); default true
  libjpeg_c   also compare the model's pixels, wherever it decodes, with libjpeg-turbo 2.1.0's
              C decoder (jpeglib's build, islow): the golden model's fuzz test's reference
              (tests/test_jpeg_fuzz.py), so the core is checked against libjpeg directly
  ready_prob  probability the output is ready in a clock (random back-pressure)
  valid_prob  probability an input beat is offered in a clock
  out         folder for per-file results (results.json and <index>.npy), used by the CLI
  cores, input_bytes, tag_bits, max_width, max_height: the decoder's generator parameters
  chunk       beats per core and turn when several cores' files are interleaved
Metrics: per file pixels/clock and cycles/symbol from the core's own counters, and medians.
"""

import json
import os
import random
import statistics
from pathlib import Path

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, ReadOnly

from dlforge.rtl.jpeg.packets import input_beats, output_layout, parse_output, OutputKind
from dlforge.rtl.jpeg.status import JpegStatus as S
from dlforge.sim.corpus.pick import files_of
from dlforge.sim.tb.streams import start
from dlforge.sim.models.jpeg_model import JpegDecodeError, decode
from dlforge.sim.models.jpeg_parse import parse_headers

PARAMS = json.loads(os.environ.get("DLFORGE_TB_PARAMS", "{}"))


def _jobs():
    files = [f for f in files_of(PARAMS) for _ in range(int(PARAMS.get("repeat", 1)))]
    modes = PARAMS.get("modes", ["fancy"])
    return [(name, data, mode) for name, data in files for mode in modes]


def _expected(data, mode):
    limits = {k: PARAMS[k] for k in ("max_width", "max_height") if k in PARAMS}
    try:
        return S.OK, decode(data, mode, **limits).pixels
    except JpegDecodeError as exc:
        return exc.status, None


def _libjpeg_c(data, mode):
    """libjpeg-turbo's C decode of ``data`` (jpeglib's turbo 2.1.0 build, islow; ``mode``:
    fancy or fast upsampling), as the golden model's fuzz test runs it.  Not simplejpeg: its
    SIMD IDCT saturates where jidctint.c wraps, on damaged files (docs/architecture.md,
    "Reference for damaged files")."""
    import tempfile

    import jpeglib
    flags = [] if mode == "fancy" else ["-DO_FANCY_UPSAMPLING"]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "f.jpg"
        path.write_bytes(data)
        with jpeglib.version("turbo210"):
            im = jpeglib.read_spatial(str(path), out_color_space=jpeglib.Colorspace.JCS_RGB,
                                      dct_method=jpeglib.DCTMethod.JDCT_ISLOW, flags=flags)
            return np.array(im.spatial)


def _layout(data):
    try:
        return parse_headers(data).layout
    except JpegDecodeError:
        return "-"


@cocotb.test()
async def decode_files(dut):
    """Every file through the core back to back; each result matches the model."""
    await start(dut, sources=("i",), sinks=("o",))
    rng = random.Random(PARAMS.get("seed", 7))
    ready_prob = float(PARAMS.get("ready_prob", 1.0))
    valid_prob = float(PARAMS.get("valid_prob", 1.0))
    input_bytes = int(PARAMS.get("input_bytes", 1))
    tag_bits = int(PARAMS.get("tag_bits", 8))
    cores = int(PARAMS.get("cores", 1))
    check = PARAMS.get("check", True)
    libjpeg_c = bool(PARAMS.get("libjpeg_c", False))
    libjpeg_checked = 0
    jobs = _jobs()
    kind_shift = output_layout(tag_bits)["kind"].offset

    beats_out = []
    done = {"images": 0}

    # File n goes to core n mod cores; with several cores the beats of the cores' queues are
    # interleaved in chunks, as a link that keeps every core fed would send them.
    queues = [[] for _ in range(cores)]
    for n, (_, data, mode) in enumerate(jobs):
        queues[n % cores] += input_beats(data, tag=n % (1 << tag_bits), fast=mode == "fast",
                                         input_bytes=input_bytes, tag_bits=tag_bits,
                                         cores=cores, dest=n % cores)
    chunk = int(PARAMS.get("chunk", 16))
    stream_beats = []
    while any(queues):
        for q in queues:
            stream_beats += q[:chunk]
            del q[:chunk]

    async def feed():
        for beat in stream_beats:
            while valid_prob < 1 and rng.random() >= valid_prob:
                dut.i__valid.value = 0
                await FallingEdge(dut.clk)
            dut.i__valid.value = 1
            dut.i__payload.value = beat
            while True:
                await ReadOnly()
                taken = bool(dut.i__ready.value)
                await FallingEdge(dut.clk)
                if taken:
                    break
        dut.i__valid.value = 0

    feeder = cocotb.start_soon(feed())
    total_bytes = sum(len(data) for _, data, _ in jobs)
    total_pixels = 0
    for _, data, _ in jobs:
        try:
            h = parse_headers(data)
            total_pixels += h.width * h.height
        except JpegDecodeError:
            pass
    budget = 2000 * len(jobs) + 8 * total_bytes + 2 * total_pixels
    clocks = 0
    while done["images"] < len(jobs):
        await FallingEdge(dut.clk)
        take = ready_prob >= 1 or rng.random() < ready_prob
        dut.o__ready.value = int(take)
        await ReadOnly()
        if take and dut.o__valid.value:
            payload = dut.o__payload.value
            if not payload.is_resolvable:
                raise AssertionError(f"output beat {len(beats_out)} has undefined bits "
                                     f"(MSB first): {payload}")
            value = int(payload)
            beats_out.append(value)
            if (value >> kind_shift) & 3 == OutputKind.TRAILER:
                done["images"] += 1
        clocks += 1
        if clocks >= budget:
            finished = sorted(image.tag for image in parse_output(
                beats_out[:max(k for k, b in enumerate(beats_out)
                               if (b >> kind_shift) & 3 == OutputKind.TRAILER) + 1]
                if done["images"] else [], tag_bits))
            raise AssertionError(f"{done['images']} of {len(jobs)} files finished after "
                                 f"{clocks} clocks (tags {finished}): the core hangs")
    await FallingEdge(dut.clk)
    dut.o__ready.value = 0
    feeder.cancel()

    images = parse_output(beats_out, tag_bits)
    assert len(images) == len(jobs)
    if cores > 1:
        # Several cores finish in their own order; the tags put the results back in order
        # (a window of at most 2^tag_bits files in flight).
        assert len(jobs) <= 1 << tag_bits
        images.sort(key=lambda image: image.tag)
    rows, failures = [], []
    out_dir = Path(PARAMS["out"]) if PARAMS.get("out") else None
    for n, ((name, data, mode), image) in enumerate(zip(jobs, images)):
        assert image.tag == n % (1 << tag_bits), (name, image.tag)
        row = {"file": name, "mode": mode, "layout": _layout(data), "status": image.status.name,
               "width": image.width, "height": image.height, "cycles": image.cycles,
               "symbols": image.symbols}
        if image.ok:
            row["pixels_per_clock"] = image.width * image.height / image.cycles
            row["cycles_per_symbol"] = image.cycles / max(image.symbols, 1)
        if check:
            status, pixels = _expected(data, mode)
            row["bit_exact"] = bool(status == image.status and (
                pixels is None or (image.pixels.shape == pixels.shape
                                   and (image.pixels == pixels).all())))
            if not row["bit_exact"]:
                failures.append(f"{name} ({mode}): core {image.status.name} "
                                f"{image.pixels.shape}, model {status.name} "
                                f"{None if pixels is None else pixels.shape}")
            if libjpeg_c and pixels is not None:
                # the fuzz test's rule: a file the model decodes, libjpeg's C code decodes to
                # the same pixels (an error there is a difference too)
                try:
                    want = _libjpeg_c(data, mode)
                    same = want.shape == pixels.shape and bool((want == pixels).all())
                except Exception as exc:            # jpeglib raises on libjpeg's errors
                    same, want = False, exc
                row["libjpeg_c_equal"] = same
                libjpeg_checked += 1
                if not same:
                    failures.append(f"{name} ({mode}): model {pixels.shape}, libjpeg-turbo's "
                                    f"C decoder {getattr(want, 'shape', want)!r}")
        if out_dir is not None and image.ok:
            np.save(out_dir / f"{n}.npy", image.pixels)
        rows.append(row)
    if out_dir is not None:
        (out_dir / "results.json").write_text(json.dumps(rows, indent=1))
    rates = {}
    for row in rows:
        if "pixels_per_clock" in row:
            rates.setdefault(row["layout"], []).append(row["pixels_per_clock"])
    pixels = sum(row["width"] * row["height"] for row in rows if row["status"] == "OK")
    Path("metrics.json").write_text(json.dumps({
        "files": len(rows),
        "clocks": clocks,
        "aggregate_pixels_per_clock": pixels / clocks,
        "ok": sum(row["status"] == "OK" for row in rows),
        "libjpeg_c_checked": libjpeg_checked,
        "pixels_per_clock_median": {k: statistics.median(v) for k, v in rates.items()},
        "pixels_per_clock_min": {k: min(v) for k, v in rates.items()},
        "per_file": rows,
    }, indent=1))
    assert not failures, "; ".join(failures[:10]) + f" ({len(failures)} files differ)"
