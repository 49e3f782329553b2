"""The device interface: what every device (a board, the CPU) offers the host.

Device strings open in :mod:`dlforge.host.device.open`."""

from dataclasses import dataclass, field

import numpy as np

from dlforge.rtl.jpeg.limits import DEFAULT_MAX_HEIGHT, DEFAULT_MAX_WIDTH
from dlforge.rtl.jpeg.status import JpegStatus

__all__ = ["Device", "JpegReply", "describe_status"]


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


def describe_status(status):
    """A device's verdict in words, the same wherever it is reported: name, code, and kind."""
    kind = "unsupported" if status.unsupported else \
        "refused" if status.refused else "malformed"
    return f"{status.name} (0x{int(status):02X}, {kind})"


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
        resize[, scale]]]), ``resize`` a :class:`~dlforge.host.jpeg.resize_request.Resize` (or
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
