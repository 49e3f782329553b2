"""The decoder service: JPEG bytes in, decoded images out, one verdict per file.

DLBooster's online preprocessing service.  Each file gets a result:

* ``ok`` — decoded by the device;
* ``fallback`` — the device does not handle it (progressive, CMYK, ...): libjpeg-turbo on the
  host decoded it.  The host's header pre-check sends such files to the CPU before they reach
  the device; what only the entropy-coded data shows (a second scan) is the device's verdict;
* ``error`` — malformed; the pre-check's or the device's status, or libjpeg's message, says
  why.  Nothing else is affected: the next file still decodes.

Results come back in submission order whatever the device's own order.
"""

from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from dlforge.rtl.jpeg.status import JpegStatus
from dlforge.host.device.base import Device, describe_status
from dlforge.host.device.open import open_device
from dlforge.host.jpeg.precheck import precheck
from dlforge.host.jpeg.scaled_decode import SCALES, scaled_decode, scaled_size

__all__ = ["DecodeResult", "DecoderService", "UPSAMPLING"]

UPSAMPLING = ("fancy", "fast")
_OK = JpegStatus.OK


@dataclass
class DecodeResult:
    """The service's verdict on one file (ok, fallback or error, and why), with its pixels:
    what a user of the service sees, whichever device decoded it."""

    index: int                         # position in the submitted sequence
    name: str                          # the file's path, or "#index" for bytes
    status: str                        # "ok" | "fallback" | "error"
    width: int = 0
    height: int = 0
    cycles: int = None                 # the device's own cycle count for the file
    error: str = None
    pixels: np.ndarray = field(default=None, repr=False)
    resized: str = None                # who cropped and resized it: "device", "host" or None

    def as_dict(self):
        return {"file": self.name, "status": self.status, "width": self.width,
                "height": self.height, "cycles": self.cycles, "error": self.error,
                "resized": self.resized}


class _Key(NamedTuple):
    """A file as the device sees it; printed as its name in the device's messages."""
    index: int
    name: str
    data: bytes

    def __str__(self):
        return self.name


class DecoderService:
    """Decode streams of JPEG files on one device (a device string or an open device)."""

    def __init__(self, device="sim", upsample="fancy", **device_options):
        if upsample not in UPSAMPLING:
            raise ValueError(f"upsampling must be one of {', '.join(UPSAMPLING)}, "
                             f"not {upsample!r}")
        self.fast = upsample == "fast"
        self._owned = not isinstance(device, Device)
        self.device = open_device(device, **device_options)
        self.counts = {"ok": 0, "fallback": 0, "error": 0}

    def close(self):
        if self._owned:
            self.device.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def decode(self, items, resize=None, scale=1):
        """Yield a :class:`DecodeResult` per item (bytes, a path, or (name, bytes)).

        ``resize``: a function (index, name, width, height) -> a
        :class:`~dlforge.host.jpeg.resize_request.Resize` or None, called once per file with its
        size from the header; the result then holds the resized pixels (the device's
        resampler, or Pillow's where the device cannot, or for the CPU fallback: the same
        pixels either way).  ``scale`` 2, 4 or 8: libjpeg-turbo's scaled decode (the
        resize then sees the scaled size): on the device's cores where they have the reduced
        IDCTs (``device.scales``), else on the host (``host/jpeg/scaled_decode.py``) as a
        ``fallback`` that says why."""
        if scale not in SCALES:
            raise ValueError(f"scale must be one of {SCALES} (1/scale), not {scale!r}")
        held = {}                           # index -> result decided on the host

        def jobs():
            device, fast = self.device, self.fast
            for index, item in enumerate(items):
                if type(item) is bytes:
                    name, data = f"#{index}", item
                else:
                    name, data = self._load(index, item)
                status, width, height = precheck(data, device.max_width, device.max_height)
                if status == _OK and scale == 1:          # (the device path: first)
                    if resize is None:
                        yield _Key(index, name, data), data, fast, (width, height)
                    else:
                        yield (_Key(index, name, data), data, fast, (width, height),
                               resize(index, name, width, height))
                elif status == JpegStatus.OK and scale > 1 and scale in self.device.scales:
                    width, height = scaled_size(width, height, scale)
                    yield (_Key(index, name, data), data, self.fast, (width, height),
                           None if resize is None else resize(index, name, width, height),
                           scale)
                elif status == JpegStatus.OK and scale > 1:
                    held[index] = self._fallback(
                        index, name, data, f"scale 1/{scale}: the device's cores were built "
                        "without the reduced IDCTs (libjpeg-turbo on the host)", None, resize,
                        scale)
                    yield _Key(index, name, None), None, self.fast
                elif status.unsupported:
                    held[index] = self._fallback(index, name, data, describe_status(status),
                                                 None, resize, scale)
                    yield _Key(index, name, None), None, self.fast
                else:
                    held[index] = DecodeResult(index, name, "error",
                                               error="host pre-check: "
                                               + describe_status(status))
                    yield _Key(index, name, None), None, self.fast

        for reply in self.device.decode_jpegs(jobs()):
            index, name, data = reply.key
            if data is None:                # decided on the host
                result = held.pop(index)
            elif reply.status == JpegStatus.OK:
                result = DecodeResult(index, name, "ok", reply.width, reply.height,
                                      reply.cycles, pixels=reply.pixels,
                                      resized=reply.resized)
            elif reply.status.unsupported:
                result = self._fallback(index, name, data, reply.error
                                        or describe_status(reply.status), reply.cycles, resize,
                                        scale)
            else:
                result = DecodeResult(index, name, "error", cycles=reply.cycles,
                                      error=reply.error or describe_status(reply.status))
            self.counts[result.status] += 1
            yield result

    @staticmethod
    def _load(index, item):
        if isinstance(item, (bytes, bytearray, memoryview)):
            return f"#{index}", bytes(item)
        if isinstance(item, tuple):
            return str(item[0]), bytes(item[1])
        path = Path(item)
        return str(path), path.read_bytes()

    def _fallback(self, index, name, data, why, cycles, resize=None, scale=1):
        try:
            pixels, error = scaled_decode(data, scale, self.fast), None
        except ValueError as exc:
            pixels, error = None, str(exc)
        if pixels is not None and resize is not None:
            request = resize(index, name, pixels.shape[1], pixels.shape[0])
            if request is not None:
                try:
                    request.check(pixels.shape[1], pixels.shape[0])
                    pixels = request.apply(pixels)
                except ValueError as exc:
                    pixels, error = None, f"BAD_RESIZE: {exc}"
        if pixels is None:
            return DecodeResult(index, name, "error", cycles=cycles,
                                error=f"{why}; {error}" if why else error)
        return DecodeResult(index, name, "fallback", pixels.shape[1], pixels.shape[0], cycles,
                            error=why, pixels=pixels,
                            resized="host" if resize is not None else None)
