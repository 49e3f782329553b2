"""Decode -> infer (DLBooster's online inference): JPEG files through the device's decoder
cores and resampler, the pixels quantised to the network's int8 input, then the network on
the engine, with the stages overlapped across images.

The stream goes in batches of ``batch`` images.  The decoder service keeps up to the board's
window of files in flight (three a core), so while the engine runs batch k through every
layer, the cores decode and resize the files of batch k+1 on the same device: their reply
frames arrive between the engine's and wait in the host's queue.  Only the first batch's
decode is exposed (the pipeline's fill), and whatever of a later one the engine's time does
not cover.

What each image goes through, and who does it:

* decode (device cores; a file they do not take, e.g. progressive, on the host as the
  decoder service's fallback, said per file);
* resize: a square input takes torchvision's eval rule, ``Resize(resize)`` then
  ``CenterCrop(size)`` (``resize`` defaults to the input's size: the shorter side to it, the
  centre kept), a non-square one both sides stretched to the input's; on the device's
  resampler (Pillow's bilinear, bit-exact), on the host where the resampler cannot;
* channels: RGB for a 3-channel input, Pillow's luma (``convert("L")``) for a 1-channel one;
* input quantisation (host): ``pixel / 255`` (torchvision's ``ToTensor``) quantised with the
  network's input scale, as one 256-entry table.  Mean/std normalisation is not applied: a
  model that wants it includes it in its first layer's weights.

Time (the rule of :mod:`~dlforge.host.conv.network_run`, extended by the decode stage):
each batch's network run counts as there; the decode stage adds the device clocks that pass
while the host waits for a batch's pixels (the device's CYCLES register read around the wait,
less what two back-to-back reads show by themselves: the engine is idle then; on the
simulated board the host's own work in that interval also ticks, at simulation speed, a
small over-count) and the host's own work in that stage (reading
files, header checks, resize requests, quantising pixels) converted at the clock, in full.

Checked in the same run (:func:`check_images`): every image's int8 input against
libjpeg-turbo and Pillow on the host, and the logits against the golden network model.
"""

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dlforge.host.conv.network_run import prepare, run_program
from dlforge.host.conv.program import quantize_input
from dlforge.host.conv.run import engine_config
from dlforge.host.device.cpu import CpuDevice
from dlforge.host.device.open import open_device
from dlforge.host.jpeg.decode_service import DecoderService
from dlforge.host.jpeg.resize_request import Resize
from dlforge.host.jpeg.transforms import eval_request
from dlforge.rtl.link.protocol import Register
from dlforge.sim.models.network_model import run_network

__all__ = ["ImageRun", "jpeg_files", "image_request", "input_table", "image_input",
           "image_pixels", "infer_images", "reference_images", "check_images"]

_SUFFIXES = (".jpg", ".jpeg", ".jpe", ".jfif")


def jpeg_files(folder):
    """The JPEG files directly in ``folder``, sorted by name (an empty one is an error)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a directory")
    files = sorted(p for p in folder.iterdir()
                   if p.is_file() and p.suffix.lower() in _SUFFIXES)
    if not files:
        raise ValueError(f"no JPEG files ({', '.join(_SUFFIXES)}) in {folder}")
    return files


def image_request(input_shape, resize=None):
    """The decoder service's resize function for a network input (C, H, W): see the
    module's docstring."""
    _, h, w = input_shape
    if resize is not None and h != w:
        raise ValueError(f"resize applies to a square input (centre crop), not {h}x{w}")
    if resize is not None and resize < h:
        raise ValueError(f"resize {resize} is smaller than the input's {h}x{w}")

    def request(index, name, width, height):
        if h == w:
            return eval_request(width, height, resize or h, h)
        return Resize((0, 0, width, height), (w, h))
    return request


def input_table(scale):
    """int8 input of each pixel value: ``quantize_input(pixel / 255)``, as a table."""
    return quantize_input(np.arange(256, dtype=np.float32) / np.float32(255), scale)


def image_pixels(pixels, channels):
    """(H, W, 3) uint8 decoded pixels -> the (C, H, W) uint8 image the network sees: RGB,
    or Pillow's luma (``convert("L")``, ITU-R 601-2 in 16-bit fixed point) for one channel."""
    if channels == 3:
        return pixels.transpose(2, 0, 1)
    rgb = pixels.astype(np.uint32)
    luma = (rgb[..., 0] * 19595 + rgb[..., 1] * 38470 + rgb[..., 2] * 7471 + 0x8000) >> 16
    return luma.astype(np.uint8)[None]


def image_input(pixels, channels, table):
    """(H, W, 3) uint8 pixels -> (C, H, W) int8 network input (see the module docstring)."""
    return table[image_pixels(pixels, channels)]


@dataclass
class ImageRun:
    """The outcome of a stream: int8 outputs of the images that decoded (``ok`` in file
    order), every file's verdict, the int8 inputs (for the checks) and the report."""
    outputs: np.ndarray
    ok: np.ndarray                              # bool per file
    files: list                                 # {"file", "status", "error", "resized"}
    inputs: np.ndarray = field(repr=False, default=None)
    report: dict = field(default_factory=dict)


def _cycles(board):
    return None if isinstance(board, CpuDevice) else board.read_regs(Register.CYCLES)[0]


def _read_cost(board):
    """Device clocks between two back-to-back reads of CYCLES (the least of three): what a
    pair of reads around a wait adds to it by itself, taken off each wait."""
    if isinstance(board, CpuDevice):
        return 0
    costs = []
    for _ in range(3):
        first = _cycles(board)
        costs.append((_cycles(board) - first) & 0xFFFFFFFF)
    return min(costs)


def infer_images(program, files, device="sim", *, resize=None, batch=4, clocks_mhz=(),
                 prepared=None, upsample="fancy", config=None):
    """Stream ``files`` (paths, or (name, bytes)) through ``device`` into ``program``."""
    channels = program.input_shape[0]
    if channels not in (1, 3):
        raise ValueError(f"images feed a 1- or 3-channel input, not {channels} channels")
    if batch < 1:
        raise ValueError(f"batch must be at least 1, not {batch}")
    files = list(files)
    request = image_request(program.input_shape, resize)
    table = input_table(program.input_scale)
    owned = isinstance(device, str)
    sim = owned and device.split(":")[0] == "sim"
    if config is not None and not sim:
        raise ValueError("config chooses the engine of the simulated board (device sim)")
    board = open_device(device, conv=config or True) if sim else open_device(device)
    try:
        cpu = isinstance(board, CpuDevice)
        if not cpu and not getattr(board, "cores", 0):
            raise ValueError(f"{board.name} has no JPEG decoder cores")
        if not cpu and prepared is None:
            prepared = prepare(program, engine_config(board))
        return _stream(program, files, board, cpu, request, table, batch, clocks_mhz,
                       prepared, upsample)
    finally:
        if owned:
            board.close()


def _stream(program, files, board, cpu, request, table, batch, clocks_mhz, prepared,
            upsample):
    service = DecoderService(board, upsample)
    results = service.decode(files, resize=request)
    verdicts, inputs, outputs, runs = [], [], [], []
    stage = {"decode_wait_cycles": 0, "decode_host_s": 0.0, "core_cycles": 0,
             "exposed_per_batch": [],
             "resized": {"device": 0, "host": 0}}
    read_cost = _read_cost(board)
    start = time.perf_counter()
    done = False
    while not done:
        c0 = _cycles(board)                 # (register reads: outside the host's time)
        t0, w0 = time.perf_counter(), getattr(board, "decode_wait_s", 0.0)
        xs = []
        while len(xs) < batch:
            result = next(results, None)
            if result is None:
                done = True
                break
            verdicts.append({"file": result.name, "status": result.status,
                             "error": result.error, "resized": result.resized})
            if result.pixels is None:
                continue
            stage["core_cycles"] += result.cycles or 0
            if result.resized:
                stage["resized"][result.resized] += 1
            xs.append(image_input(result.pixels, program.input_shape[0], table))
        stage["decode_host_s"] += (time.perf_counter() - t0
                                   - (getattr(board, "decode_wait_s", 0.0) - w0))
        if c0 is not None:
            exposed = max(((_cycles(board) - c0) & 0xFFFFFFFF) - read_cost, 0)
            stage["decode_wait_cycles"] += exposed
            if xs:
                stage["exposed_per_batch"].append(exposed)
        if not xs:
            continue
        x = np.stack(xs)
        y, run = run_program(program, x, board, "pipelined", clocks_mhz, prepared=prepared)
        inputs.append(x)
        outputs.append(y)
        runs.append(run)
    wall = time.perf_counter() - start
    ok = np.array([v["status"] != "error" for v in verdicts], bool)
    c, h, w = program.input_shape
    x = np.concatenate(inputs) if inputs else np.zeros((0, c, h, w), np.int8)
    y = np.concatenate(outputs) if outputs else None
    report = _report(board, cpu, runs, stage, verdicts, len(x), wall, clocks_mhz, prepared)
    return ImageRun(y, ok, verdicts, x, report)


def _report(board, cpu, runs, stage, verdicts, images, wall, clocks_mhz, prepared):
    report = {"device": board.name, "files": len(verdicts), "images": images,
              "failed": [v for v in verdicts if v["status"] == "error"],
              "fallback": sum(v["status"] == "fallback" for v in verdicts),
              "batches": len(runs), "wall_s": round(wall, 3),
              "decode": {"core_cycles": stage["core_cycles"],
                         "exposed_device_cycles": stage["decode_wait_cycles"],
                         "exposed_per_batch": stage["exposed_per_batch"],
                         "host_s": round(stage["decode_host_s"], 6),
                         "resized": stage["resized"]},
              "at_clock": []}
    if cpu or not runs:
        return report
    macs = sum(r["macs"] for r in runs)
    macs_per_clock = prepared[2].macs_per_clock
    device = sum(r["device_cycles"] for r in runs) + stage["decode_wait_cycles"]
    report.update(macs=macs, network_device_cycles=sum(r["device_cycles"] for r in runs),
                  network_host_s=round(sum(r["host_s"] for r in runs), 6),
                  device_utilization=round(macs / macs_per_clock / device, 4))
    for i, mhz in enumerate(clocks_mhz):
        hz = mhz * 1e6
        total = (sum(r["at_clock"][i]["end_to_end_cycles"] for r in runs)
                 + stage["decode_wait_cycles"] + stage["decode_host_s"] * hz)
        report["at_clock"].append({
            "clock_mhz": mhz, "end_to_end_cycles": round(total),
            "cycles_per_image": round(total / images),
            "utilization": round(macs / macs_per_clock / total, 4),
            "images_per_second": round(images * hz / total, 2)})
    return report


def reference_images(program, files, resize=None, upsample="fancy"):
    """The (N, C, H, W) uint8 images of the files that decode, made on the host alone
    (libjpeg-turbo and Pillow, through the cpu device), and the seconds it took per image
    (the CPU doing the device's work)."""
    request = image_request(program.input_shape, resize)
    t0 = time.perf_counter()
    with DecoderService("cpu", upsample) as service:
        xs = [image_pixels(r.pixels, program.input_shape[0])
              for r in service.decode(files, resize=request) if r.pixels is not None]
    seconds = time.perf_counter() - t0
    c, h, w = program.input_shape
    return (np.stack(xs) if xs else np.zeros((0, c, h, w), np.uint8)), seconds / max(len(xs), 1)


def check_images(program, files, run, resize=None, upsample="fancy"):
    """What the stream's results were checked against (a dict for the report): its inputs
    against the host's decode, its outputs against the golden network model."""
    images, per_image = reference_images(program, files, resize, upsample)
    ref = input_table(program.input_scale)[images]
    inputs_exact = ref.shape == run.inputs.shape and bool(np.array_equal(ref, run.inputs))
    golden = run_network(program, run.inputs) if len(run.inputs) else None
    outputs_exact = golden is None or bool(np.array_equal(golden, run.outputs))
    return {"checked": "every image's int8 input against libjpeg-turbo + Pillow on the host, "
                       "every output against the golden network model, in this run",
            "inputs_bit_exact": inputs_exact, "outputs_bit_exact": outputs_exact,
            "bit_exact": inputs_exact and outputs_exact,
            "cpu_decode_resize_ms_per_image": round(per_image * 1e3, 3)}
