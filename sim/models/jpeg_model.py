"""Golden model of the hardware JPEG decoder: baseline files in, RGB888 out, bit-exact to
libjpeg-turbo's default decode (islow IDCT; fancy or fast upsampling), or a status code.

``scale`` 2, 4 or 8 is libjpeg-turbo's scaled decode (``scale_denom``: Pillow's
``Image.draft``, simplejpeg's ``min_width``/``min_height``): the image comes out
ceil(size / scale), each component through a reduced IDCT (:mod:`.idct_reduced_model`).
How libjpeg-turbo scales chroma (jdmaster.c, ``jpeg_calc_output_dimensions``): a subsampled
component gets a *larger* IDCT than luma, doubled while the doubling still divides evenly,
so that at 1/2, 1/4 and 1/8 the chroma of a 4:2:0 file is decoded straight at the output's
size (a 4x4 luma IDCT and an 8x8 chroma IDCT at 1/2) and no upsampling is left; where the
doubling does not divide (4:2:2's vertical) the component is upsampled as usual at the
scaled size.  At 1/8 libjpeg-turbo turns fancy upsampling off (jdsample.c: ``do_fancy``
needs a scaled size above 1), so any upsampling left there replicates.

Everything outside the hardware's scope raises :class:`JpegDecodeError` with the
:class:`~dlforge.rtl.jpeg.status.JpegStatus` the hardware reports for it.
"""

from dataclasses import dataclass

import numpy as np

from dlforge.rtl.jpeg.status import JpegStatus as S
from dlforge.rtl.jpeg.syntax import Marker, walk_segments

from dlforge.sim.models.idct_model import idct_islow
from dlforge.sim.models.idct_reduced_model import idct_reduced
from dlforge.sim.models.jpeg_color import ycc_to_rgb
from dlforge.sim.models.jpeg_entropy import decode_scan
from dlforge.sim.models.jpeg_parse import (DEFAULT_MAX_HEIGHT, DEFAULT_MAX_WIDTH, JpegDecodeError,
                                           parse_headers)
from dlforge.sim.models.jpeg_upsample import upsample

__all__ = ["decode", "decode_coefficients", "check_trailer", "component_sizes", "SCALES",
           "JpegDecodeError", "Decoded"]

#: The scale denominators of :func:`decode` (libjpeg-turbo's M/8 with M = 8, 4, 2, 1).
SCALES = (1, 2, 4, 8)


def component_sizes(headers, scale):
    """Each component's IDCT size at ``scale`` (jdmaster.c's loop: a subsampled component's
    block doubles while the doubling divides the luma block evenly both ways)."""
    smallest = 8 // scale
    sizes = []
    for c in headers.components:
        size = smallest
        while size < 8 and (headers.hmax * smallest) % (c.h * size * 2) == 0 \
                and (headers.vmax * smallest) % (c.v * size * 2) == 0:
            size *= 2
        sizes.append(size)
    return sizes


@dataclass
class Decoded:
    """The model's result for one file: its pixels, the headers they came from, and where the
    file ended (so a test can compare a core's trailer and output size with the model's)."""

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
    """After the one scan only EOI may follow (tables or APPn before it are harmless); the
    offset just past EOI."""
    for marker, offset, length in walk_segments(data, pos, _TRAILER_ENDS):
        if marker == Marker.EOI:
            return offset + 2
        if marker == Marker.SOS:
            raise JpegDecodeError(S.UNSUPPORTED_MULTISCAN, offset, "a second scan")
        if marker == Marker.DNL:
            raise JpegDecodeError(S.UNSUPPORTED_DNL, offset, "DNL marker after the scan")
        if not length:
            raise JpegDecodeError(S.UNEXPECTED_MARKER, offset, f"marker FF {marker:02X} after "
                                                               "the scan")
        # Any other segment is skipped.


#: The markers that end the walk after the scan, judged before any length is read.
_TRAILER_ENDS = frozenset({Marker.EOI, Marker.SOS, Marker.DNL})


def decode(data, upsampling="fancy", max_width=DEFAULT_MAX_WIDTH, max_height=DEFAULT_MAX_HEIGHT,
           scale=1):
    """Decode one file; return :class:`Decoded` or raise :class:`JpegDecodeError`.  ``scale``:
    1, or 2, 4, 8 for libjpeg-turbo's scaled decode (the module's docstring)."""
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES} (1/scale of the size), not {scale!r}")
    headers, blocks, end = decode_coefficients(data, max_width, max_height)
    smallest = 8 // scale
    width = -(-headers.width * smallest // 8)
    height = -(-headers.height * smallest // 8)
    sizes = component_sizes(headers, scale)
    planes = []
    for c, coefs, size in zip(headers.components, blocks, sizes):
        quant = headers.quant[c.tq]
        samples = idct_islow(coefs, quant) if size == 8 else idct_reduced(coefs, quant, size)
        bv, bh = samples.shape[:2]
        plane = samples.transpose(0, 2, 1, 3).reshape(bv * size, bh * size)
        # The component's real size (T.81 A.1.1, scaled: jdmaster.c's downsampled_width):
        # ceil(X * h * size / (hmax * 8)) by ceil(Y * v * size / (vmax * 8)).
        cw = -(-headers.width * c.h * size // (headers.hmax * 8))
        ch = -(-headers.height * c.v * size // (headers.vmax * 8))
        planes.append(plane[:ch, :cw])
    if headers.colorspace == "gray":
        y = planes[0][:height, :width]
        return Decoded(np.repeat(y[..., None], 3, axis=-1).astype(np.uint8), headers, end)
    # (what is left to upsample: the luma's samples per chroma sample at these IDCT sizes)
    mode = upsampling if smallest > 1 else "fast"
    full = [planes[0][:height, :width]]
    for c, plane, size in zip(headers.components[1:], planes[1:], sizes[1:]):
        factor_h = headers.hmax * smallest // (c.h * size)
        factor_v = headers.vmax * smallest // (c.v * size)
        up = upsample(plane, factor_h, factor_v, mode)
        full.append(up[:height, :width])
    return Decoded(ycc_to_rgb(*full), headers, end)
