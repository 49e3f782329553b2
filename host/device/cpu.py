"""The CPU as a device: libjpeg-turbo and the golden models, so every API works on a machine
without hardware, and so a board's results have something independent to be compared with."""

from dlforge.host.device.base import Device, JpegReply
from dlforge.host.jpeg.scaled_decode import SCALES, scaled_decode
from dlforge.rtl.jpeg.status import JpegStatus

__all__ = ["CpuDevice"]


class CpuDevice(Device):
    """libjpeg-turbo (simplejpeg) and the golden models: every API on any machine."""
    name = "cpu"
    scales = SCALES

    def decode_jpegs(self, jobs):
        for key, data, fast, *rest in jobs:
            if data is None:
                yield JpegReply(key, JpegStatus.OK)
                continue
            scale = rest[2] if len(rest) > 2 else 1
            try:
                pixels = scaled_decode(data, scale, bool(fast))
            except ValueError as exc:
                yield JpegReply(key, JpegStatus.BAD_FRAME_HEADER, error=str(exc))
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
