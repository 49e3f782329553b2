"""Golden model of the hardware JPEG decoder: baseline files in, RGB888 out, bit-exact to
libjpeg-turbo's default decode (islow IDCT; fancy or fast upsampling), or a status code.

Everything outside the hardware's scope raises :class:`JpegDecodeError` with the
:class:`~dlforge.rtl.jpeg.status.JpegStatus` the hardware reports for it.
"""

from dataclasses import dataclass

import numpy as np

from dlforge.rtl.jpeg.status import JpegStatus as S

from .idct_model import idct_islow
from .jpeg_color import ycc_to_rgb
from .jpeg_entropy import decode_scan
from .jpeg_parse import (DEFAULT_MAX_HEIGHT, DEFAULT_MAX_WIDTH, JpegDecodeError,
                         parse_headers)
from .jpeg_upsample import upsample

__all__ = ["decode", "decode_coefficients", "check_trailer", "JpegDecodeError", "Decoded"]


@dataclass
class Decoded:
    pixels: np.ndarray        # (height, width, 3) uint8
    headers: object
    end: int                  # offset just past EOI


def decode_coefficients(data, max_width=DEFAULT_MAX_WIDTH, max_height=DEFAULT_MAX_HEIGHT):
    """Headers, quantised coefficient blocks per component, and the offset past EOI."""
    data = bytes(data)
    headers = parse_headers(data, max_width, max_height)
    blocks, end = decode_scan(data, headers)
    return headers, blocks, check_trailer(data, end)


def check_trailer(data, pos):
    """After the one scan only EOI may follow (tables or APPn before it are harmless)."""
    while True:
        if pos >= len(data):
            raise JpegDecodeError(S.TRUNCATED, pos, "the data ends without an EOI marker")
        if data[pos] != 0xFF:
            raise JpegDecodeError(S.UNEXPECTED_MARKER, pos, "bytes after the scan that are not "
                                                            "a marker")
        while pos < len(data) and data[pos] == 0xFF:
            pos += 1
        if pos >= len(data):
            raise JpegDecodeError(S.TRUNCATED, pos, "the data ends inside a marker")
        marker = data[pos]
        if marker == 0xD9:
            return pos + 1
        if marker == 0xDA:
            raise JpegDecodeError(S.UNSUPPORTED_MULTISCAN, pos - 1, "a second scan")
        if marker == 0xDC:
            raise JpegDecodeError(S.UNSUPPORTED_DNL, pos - 1, "DNL marker after the scan")
        if 0xD0 <= marker <= 0xD7 or marker in (0xD8, 0x01):
            raise JpegDecodeError(S.UNEXPECTED_MARKER, pos - 1, f"marker FF {marker:02X} after "
                                                                "the scan")
        if pos + 3 > len(data):
            raise JpegDecodeError(S.TRUNCATED, pos, "the data ends inside a segment")
        length = int.from_bytes(data[pos + 1:pos + 3], "big")
        if length < 2:
            raise JpegDecodeError(S.BAD_MARKER_LENGTH, pos + 1, f"segment length {length}")
        if pos + 1 + length > len(data):
            # As before the scan: a file cut inside a segment.
            raise JpegDecodeError(S.TRUNCATED, pos + 1, f"segment of length {length} runs "
                                                        "past the end of the data")
        pos += 1 + length


def decode(data, upsampling="fancy", max_width=DEFAULT_MAX_WIDTH, max_height=DEFAULT_MAX_HEIGHT):
    """Decode one file; return :class:`Decoded` or raise :class:`JpegDecodeError`."""
    headers, blocks, end = decode_coefficients(data, max_width, max_height)
    width, height = headers.width, headers.height
    planes = []
    for c, coefs in zip(headers.components, blocks):
        samples = idct_islow(coefs, headers.quant[c.tq])          # (bv, bh, 8, 8)
        bv, bh = samples.shape[:2]
        plane = samples.transpose(0, 2, 1, 3).reshape(bv * 8, bh * 8)
        # The component's real size (T.81 A.1.1): ceil(X * h / hmax) by ceil(Y * v / vmax).
        cw = -(-width * c.h // headers.hmax)
        ch = -(-height * c.v // headers.vmax)
        planes.append(plane[:ch, :cw])
    if headers.colorspace == "gray":
        y = planes[0][:height, :width]
        return Decoded(np.repeat(y[..., None], 3, axis=-1).astype(np.uint8), headers, end)
    luma = headers.components[0]
    full = [planes[0][:height, :width]]
    for plane in planes[1:]:
        up = upsample(plane, luma.h, luma.v, upsampling)
        full.append(up[:height, :width])
    return Decoded(ycc_to_rgb(*full), headers, end)
