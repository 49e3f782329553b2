"""Devices as the host sees them: a board behind a transport, or the CPU.

Every device string the commands take (the brief's flow 4) opens here:

* ``sim`` — start a private simulated board (the accelerator top in Verilator) and talk to
  it over a local socket; it stops when the device is closed.  The default everywhere.
* ``sim:dma`` — the same board behind shared memory and a DMA engine model: the host
  neither frames files nor copies images (:mod:`dlforge.host.link.dma`).
* ``tcp:HOST:PORT`` — a simulated board started by hand (``dlforge sim-board``).
* ``dma:PATH`` — one started by hand with ``dlforge sim-board --link dma``.
* ``serial:PORT[@BAUD]`` — a UART-linked board, or a simulated board behind a pty.
* ``xdma:PATH`` — the XDMA driver's ``PATH_h2c_0`` / ``PATH_c2h_0`` character devices.
* ``cpu`` — no hardware: libjpeg-turbo and the convolution golden model.

A device decodes JPEG files with :meth:`Device.decode_jpegs`, results in submission order.
"""

from dataclasses import dataclass, field

import numpy as np

from ..rtl.jpeg.limits import DEFAULT_MAX_HEIGHT, DEFAULT_MAX_WIDTH
from ..rtl.jpeg.status import JpegStatus
from .scaled_decode import SCALES, scaled_decode

__all__ = ["Device", "CpuDevice", "JpegReply", "open_device", "DEVICE_HELP"]

DEVICE_HELP = ("sim (a private simulated board, default), sim:dma (the same over shared "
               "memory and DMA), tcp:HOST:PORT, serial:PORT[@BAUD], xdma:PATH, dma:PATH, or cpu")


@dataclass
class JpegReply:
    """What a device said about one file."""
    key: object
    status: JpegStatus
    width: int = 0
    height: int = 0
    cycles: int = None                 # the core's own count (boards only)
    error: str = None                  # why it failed, when status is not OK
    pixels: np.ndarray = field(default=None, repr=False)   # (height, width, 3) uint8
    resized: str = None                # a resize asked for was done by "device" or "host"


class Device:
    """The operations every device offers."""
    name = "device"
    max_width = DEFAULT_MAX_WIDTH
    max_height = DEFAULT_MAX_HEIGHT

    #: the denominators of the scaled decodes it does itself (libjpeg-turbo's DCT-domain
    #: downscale: ``scale`` in a job)
    scales = (1,)

    def decode_jpegs(self, jobs):
        """``jobs``: iterable of (key, bytes, fast_upsampling[, (width, height) if known[,
        resize[, scale]]]), ``resize`` a :class:`~dlforge.host.resize_request.Resize` (or
        None) whose pixels the reply then holds, ``scale`` one of ``scales`` (the size is
        then the scaled one, and the resize applies to the scaled image).  Yields a :class:`JpegReply` per job, in order;
        consumes ``jobs`` lazily (a bounded number ahead).  A job whose bytes are None is a
        placeholder (the host decided it): its reply keeps its place."""
        raise NotImplementedError

    def info(self):
        return {"device": self.name}

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class CpuDevice(Device):
    """libjpeg-turbo (simplejpeg) and the golden models: every API on any machine."""
    name = "cpu"
    scales = SCALES

    def decode_jpegs(self, jobs):
        import simplejpeg
        for key, data, fast, *rest in jobs:
            if data is None:
                yield JpegReply(key, JpegStatus.OK)
                continue
            scale = rest[2] if len(rest) > 2 else 1
            try:
                if scale > 1:
                    pixels = scaled_decode(data, scale, bool(fast))
                else:
                    pixels = simplejpeg.decode_jpeg(bytes(data), colorspace="RGB",
                                                    fastdct=False, fastupsample=bool(fast))
            except (ValueError, RuntimeError) as exc:
                yield JpegReply(key, JpegStatus.BAD_FRAME_HEADER, error=f"libjpeg-turbo: {exc}")
                continue
            resize = rest[1] if len(rest) > 1 else None
            if resize is not None:
                try:
                    resize.check(pixels.shape[1], pixels.shape[0])
                except ValueError as exc:
                    yield JpegReply(key, JpegStatus.BAD_RESIZE, error=f"BAD_RESIZE: {exc}")
                    continue
                pixels = resize.apply(pixels)
            yield JpegReply(key, JpegStatus.OK, pixels.shape[1], pixels.shape[0],
                            pixels=pixels, resized="host" if resize is not None else None)


def open_device(spec="sim", **options):
    """A :class:`Device` for a device string (see the module's docstring)."""
    if isinstance(spec, Device):
        return spec
    spec = str(spec)
    if spec == "cpu":
        return CpuDevice()
    from .board import Board
    from .link.device_string import open_transport
    if spec == "sim" or spec.startswith("sim:"):
        return Board.simulated(spec, **options)
    transport = open_transport(spec, timeout=options.pop("connect_timeout", 10.0))
    return Board(transport, **options)
