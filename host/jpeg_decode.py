"""Decode JPEG files on a device: the simulated decoder core, or libjpeg-turbo on the CPU.

Every file gets a result: ``ok`` (decoded by the device), ``fallback`` (the device does not
handle the file, e.g. progressive; libjpeg-turbo decoded it), or ``error`` (malformed: the
device's status, or libjpeg's message, says why).  Unsupported files go to the CPU after the
device has reported them, so the device's own verdict is what decides.
"""

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..rtl.jpeg.status import JpegStatus

__all__ = ["DecodeResult", "decode_files", "DEVICES", "UPSAMPLING"]

DEVICES = ("sim", "cpu")
UPSAMPLING = ("fancy", "fast")


@dataclass
class DecodeResult:
    file: str
    status: str                       # "ok" | "fallback" | "error"
    width: int = 0
    height: int = 0
    cycles: int = None                # the core's own count (device sim), else None
    error: str = None
    pixels: np.ndarray = field(default=None, repr=False)

    def as_dict(self):
        return {"file": self.file, "status": self.status, "width": self.width,
                "height": self.height, "cycles": self.cycles, "error": self.error}


def _cpu_decode(path, upsample):
    import simplejpeg
    data = Path(path).read_bytes()
    try:
        pixels = simplejpeg.decode_jpeg(data, colorspace="RGB", fastdct=False,
                                        fastupsample=upsample == "fast")
    except (ValueError, RuntimeError) as exc:
        return None, f"libjpeg-turbo: {exc}"
    return pixels, None


def _describe(status):
    kind = "unsupported" if status.unsupported else "malformed"
    return f"{status.name} (0x{int(status):02X}, {kind})"


def decode_files(paths, device="sim", upsample="fancy", *, max_width=4096, max_height=65535,
                 sim=None):
    """Decode ``paths``; return one :class:`DecodeResult` per file, in order."""
    if device not in DEVICES:
        raise ValueError(f"device must be one of {', '.join(DEVICES)}, not {device!r}")
    if upsample not in UPSAMPLING:
        raise ValueError(f"upsampling must be one of {', '.join(UPSAMPLING)}, not {upsample!r}")
    paths = [str(Path(p).resolve()) for p in paths]
    for p in paths:
        if not Path(p).is_file():
            raise ValueError(f"no such file: {p}")
    empty = [p for p in paths if Path(p).stat().st_size == 0]
    if device == "sim" and empty:
        # A packet needs at least one byte; the host answers for empty files itself.
        full = [p for p in paths if p not in empty]
        done = dict(zip(full, _sim_decode(full, upsample, max_width, max_height, sim)
                        if full else []))
        return [done.get(p) or DecodeResult(p, "error", error=_describe(JpegStatus.NO_SOI)
                                            + ": empty file") for p in paths]
    if device == "cpu":
        results = []
        for p in paths:
            pixels, error = _cpu_decode(p, upsample)
            if pixels is None:
                results.append(DecodeResult(p, "error", error=error))
            else:
                results.append(DecodeResult(p, "ok", pixels.shape[1], pixels.shape[0],
                                            pixels=pixels))
        return results
    return _sim_decode(paths, upsample, max_width, max_height, sim)


def _sim_decode(paths, upsample, max_width, max_height, sim):
    import json
    from ..gen.blocks import get_block
    from ..sim.runner import default_simulator, run_cocotb
    block = get_block("jpeg")
    params = block.full_params({"max_width": max_width, "max_height": max_height})
    component = block.build(**params)
    with tempfile.TemporaryDirectory(prefix="dlforge-decode-") as out:
        tb = {"files": paths, "modes": [upsample], "check": False, "out": out}
        run = run_cocotb(component, name=block.module_name(params), test_module=block.testbench,
                         params=tb, sim=sim or default_simulator(), testcase="decode_files",
                         quiet=True)
        rows_file = Path(out) / "results.json"
        if not rows_file.exists():
            raise RuntimeError(f"the simulated decoder core did not finish: see "
                               f"{run.test_dir}/sim.log")
        rows = json.loads(rows_file.read_text())
        results = []
        for n, (path, row) in enumerate(zip(paths, rows)):
            status = JpegStatus[row["status"]]
            if status == JpegStatus.OK:
                pixels = np.load(Path(out) / f"{n}.npy")
                results.append(DecodeResult(path, "ok", row["width"], row["height"],
                                            row["cycles"], pixels=pixels))
            elif status.unsupported:
                pixels, error = _cpu_decode(path, upsample)
                if pixels is None:
                    results.append(DecodeResult(path, "error", cycles=row["cycles"],
                                                error=f"{_describe(status)}; {error}"))
                else:
                    results.append(DecodeResult(path, "fallback", pixels.shape[1],
                                                pixels.shape[0], row["cycles"],
                                                error=_describe(status), pixels=pixels))
            else:
                results.append(DecodeResult(path, "error", cycles=row["cycles"],
                                            error=_describe(status)))
    return results
