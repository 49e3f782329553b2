"""The decoder service: JPEG bytes in, decoded images out, one verdict per file.

DLBooster's online preprocessing service.  The pixels of every file are Pillow's
(``Image.open(f).convert("RGB")``, torchvision's ``pil_loader``), whoever decodes it.  Each
file gets a result:

* ``ok`` — decoded by the device;
* ``fallback`` — the device does not handle it (progressive, CMYK, ...), or found it damaged:
  the host decoded it (:mod:`dlforge.host.jpeg.host_decode`: libjpeg-turbo, Pillow for what
  libjpeg-turbo decodes only with a warning and for CMYK colour).  The host's header pre-check
  sends such files to the CPU before they reach the device; what only the entropy-coded data
  shows (a second scan, a corrupt scan) is the device's verdict;
* ``error`` — Pillow refuses it too (or, with ``on_damage="error"``, it is damaged); the
  pre-check's or the device's status, and libjpeg's and Pillow's messages, say why.  Nothing
  else is affected: the next file still decodes.

A result's ``damage`` says what was wrong and tolerated ("corrupt data tolerated: 5 extraneous
bytes before marker 0xDB"): on an ``ok`` result, bytes the host dropped before the device
decoded the file as libjpeg reads it; on a ``fallback``, what libjpeg-turbo warned of before
Pillow decoded it.

Results come back in submission order whatever the device's own order.
"""

from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from dlforge.rtl.jpeg.status import JpegStatus
from dlforge.host.device.base import Device, describe_status
from dlforge.host.device.open import open_device
from dlforge.host.jpeg.host_decode import ON_DAMAGE, DamagedFile, host_decode
from dlforge.host.jpeg.precheck import drop_extraneous_bytes, precheck
from dlforge.host.jpeg.scaled_decode import SCALES, scaled_size

__all__ = ["DecodeResult", "DecoderService", "UPSAMPLING", "ON_DAMAGE"]

UPSAMPLING = ("fancy", "fast")
_OK = JpegStatus.OK
#: pre-check verdicts whose colour conversion is Pillow's (four components; RGB-coded files)
_PILLOW_COLOUR = (JpegStatus.UNSUPPORTED_COMPONENTS, JpegStatus.UNSUPPORTED_COLORSPACE)


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
    damage: str = None                 # what was wrong with the file and tolerated

    def as_dict(self):
        """The verdict without the pixels, e.g. for JSON."""
        return {"file": self.name, "status": self.status, "width": self.width,
                "height": self.height, "cycles": self.cycles, "error": self.error,
                "damage": self.damage, "resized": self.resized}


class _Key(NamedTuple):
    """A file as the device sees it; printed as its name in the device's messages.  ``data``
    is the file as given (None: decided on the host), ``damage`` what the host dropped from
    the bytes the device got."""
    index: int
    name: str
    data: bytes
    damage: str = None

    def __str__(self):
        return self.name


class DecoderService:
    """Decode streams of JPEG files on one device (a device string or an open device).

    ``on_damage``: ``"pillow"`` decodes a damaged file as Pillow does (and says what was
    tolerated), ``"error"`` refuses it; ``counts`` has the verdicts and the damaged files."""

    def __init__(self, device="sim", upsample="fancy", on_damage="pillow", **device_options):
        if upsample not in UPSAMPLING:
            raise ValueError(f"upsampling must be one of {', '.join(UPSAMPLING)}, "
                             f"not {upsample!r}")
        if on_damage not in ON_DAMAGE:
            raise ValueError(f"on_damage must be one of {', '.join(ON_DAMAGE)}, "
                             f"not {on_damage!r}")
        self.fast = upsample == "fast"
        self.on_damage = on_damage
        self._owned = not isinstance(device, Device)
        self.device = open_device(device, **device_options)
        self.counts = {"ok": 0, "fallback": 0, "error": 0, "damaged": 0}

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
                sent, damage = data, None
                if status.malformed:                      # bytes libjpeg would skip?
                    status, width, height, sent, damage = self._repair(data, status, width,
                                                                      height)
                    if damage is not None and self.on_damage == "error":
                        damage = damage.replace(" tolerated", "", 1)
                        held[index] = DecodeResult(
                            index, name, "error", damage=damage,
                            error=f"damaged (on_damage='error'): {damage}")
                        yield _Key(index, name, None), None, fast
                        continue
                key = _Key(index, name, data, damage)
                if status == _OK and scale == 1:          # (the device path: first)
                    if resize is None:
                        yield key, sent, fast, (width, height)
                    else:
                        yield key, sent, fast, (width, height), resize(index, name, width,
                                                                       height)
                    continue
                if status == _OK and scale in device.scales:
                    width, height = scaled_size(width, height, scale)
                    yield (key, sent, fast, (width, height),
                           None if resize is None else resize(index, name, width, height),
                           scale)
                    continue
                if status == _OK:
                    why = (f"scale 1/{scale}: the device's cores were built without the "
                           "reduced IDCTs (libjpeg-turbo on the host)")
                elif status.unsupported:
                    why = describe_status(status)
                else:
                    why = "host pre-check: " + describe_status(status)
                held[index] = self._fallback(index, name, data, why, None, resize, scale,
                                             status in _PILLOW_COLOUR)
                yield _Key(index, name, None), None, fast

        for reply in self.device.decode_jpegs(jobs()):
            index, name, data, damage = reply.key
            if data is None:                # decided on the host
                result = held.pop(index)
            elif reply.status == JpegStatus.OK:
                result = DecodeResult(index, name, "ok", reply.width, reply.height,
                                      reply.cycles, pixels=reply.pixels,
                                      resized=reply.resized, damage=damage)
            elif reply.status.refused:
                result = DecodeResult(index, name, "error", cycles=reply.cycles,
                                      error=reply.error or describe_status(reply.status))
            else:                           # unsupported, or damaged: the host decodes it
                result = self._fallback(index, name, data, reply.error
                                        or describe_status(reply.status), reply.cycles, resize,
                                        scale)
            self.counts[result.status] += 1
            self.counts["damaged"] += result.damage is not None
            yield result

    @staticmethod
    def _load(index, item):
        if isinstance(item, (bytes, bytearray, memoryview)):
            return f"#{index}", bytes(item)
        if isinstance(item, tuple):
            return str(item[0]), bytes(item[1])
        path = Path(item)
        return str(path), path.read_bytes()

    def _repair(self, data, status, width, height):
        """``(status, width, height, bytes for the device, damage)`` of a file the pre-check
        found malformed: where it is only extraneous bytes before header markers, the file
        without them (which the device decodes as libjpeg reads the damaged one) and what was
        dropped; else the pre-check's verdict and no damage."""
        repaired = drop_extraneous_bytes(data)
        if repaired is not None:
            fixed, what = repaired
            fixed_status, fixed_width, fixed_height = precheck(fixed, self.device.max_width,
                                                               self.device.max_height)
            if not fixed_status.malformed:
                return (fixed_status, fixed_width, fixed_height, fixed,
                        f"corrupt data tolerated: {what}")
        return status, width, height, data, None

    def _fallback(self, index, name, data, why, cycles, resize=None, scale=1,
                  pillow_colour=False):
        """The host's decode of a file (:func:`~dlforge.host.jpeg.host_decode.host_decode`),
        resized as asked: a ``fallback`` result with ``why`` the device did not decode it,
        or an ``error`` with that and the host's reasons."""
        damage = None
        try:
            pixels, damage = host_decode(data, scale, self.fast, self.on_damage,
                                         pillow_colour)
            error = None
        except DamagedFile as exc:
            pixels, error, damage = None, str(exc), exc.damage
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
            if why and not error.startswith(why):     # (the cpu device's why is libjpeg's)
                error = f"{why}; {error}"
            return DecodeResult(index, name, "error", cycles=cycles, damage=damage,
                                error=error)
        return DecodeResult(index, name, "fallback", pixels.shape[1], pixels.shape[0], cycles,
                            error=why, pixels=pixels, damage=damage,
                            resized="host" if resize is not None else None)
