"""A fast look at a JPEG file's headers on the host, before it goes to a device.

Files the decoder cores do not handle (progressive, arithmetic, 12-bit, CMYK, unusual
sampling, too large for the generator's limits) go straight to the CPU fallback instead of
costing a round trip; files that are not JPEG at all are refused here.  It walks the marker
segments up to the first SOS only (a few microseconds), so what needs the entropy-coded data
(a second scan, a bad Huffman code) is still found by the device, whose status decides.
"""

from dlforge.rtl.jpeg.limits import DEFAULT_MAX_HEIGHT, DEFAULT_MAX_WIDTH
from dlforge.rtl.jpeg.status import FRAME_TYPE_STATUS, JpegStatus as S

__all__ = ["precheck"]

_LUMA_FACTORS = {(1, 1), (2, 1), (1, 2), (2, 2)}
#: per marker: a segment that is only skipped (tables, most APPn, COM, ...): 1
_PLAIN = bytes(0 if m in (0xFF, 0xD9, 0x01, 0xDA, 0xE0, 0xEE) or 0xD0 <= m <= 0xD7
               or 0xC0 <= m <= 0xCF and m != 0xC4 or m in (0xDE, 0xDF) else 1
               for m in range(256))


def precheck(data, max_width=DEFAULT_MAX_WIDTH, max_height=DEFAULT_MAX_HEIGHT):
    """``(status, width, height)``: ``JpegStatus.OK`` when the device should take the file.

    The width and height are 0 when no SOF was reached.
    """
    n = len(data)
    if n < 2 or data[0] != 0xFF or data[1] != 0xD8:
        return S.NO_SOI, 0, 0
    pos = 2
    width = height = 0
    adobe_transform = None
    jfif = False
    ids = ()
    components = ()
    seen_sof = False
    while pos + 4 <= n:
        if data[pos] != 0xFF:
            return S.UNEXPECTED_MARKER, width, height
        marker = data[pos + 1]
        if _PLAIN[marker]:                      # (most segments: the walk's fast path)
            length = data[pos + 2] << 8 | data[pos + 3]
            if length < 2:
                return S.BAD_MARKER_LENGTH, width, height
            pos += 2 + length
            if pos > n:
                return S.TRUNCATED, width, height
            continue
        if marker == 0xFF:                       # fill byte
            pos += 1
            continue
        if marker == 0xD9 or 0xD0 <= marker <= 0xD7 or marker == 0x01:
            return S.UNEXPECTED_MARKER, width, height
        length = data[pos + 2] << 8 | data[pos + 3]
        if length < 2:
            return S.BAD_MARKER_LENGTH, width, height
        body = pos + 4
        end = pos + 2 + length
        if end > n:
            return S.TRUNCATED, width, height
        if marker == 0xDA:                       # SOS: the device takes it from here
            if not seen_sof:
                return S.UNEXPECTED_MARKER, width, height
            if len(components) == 3 and not jfif and (
                    adobe_transform == 0 or adobe_transform is None and ids == (82, 71, 66)):
                return S.UNSUPPORTED_COLORSPACE, width, height
            return S.OK, width, height
        if marker == 0xCC:
            return S.UNSUPPORTED_ARITHMETIC, width, height
        if marker in (0xDE, 0xDF):
            return S.UNSUPPORTED_HIERARCHICAL, width, height
        if marker == 0xC8:
            return S.UNSUPPORTED_EXTENSION, width, height
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            if marker not in (0xC0, 0xC1):
                return FRAME_TYPE_STATUS[marker], width, height
            if length < 8:
                return S.BAD_MARKER_LENGTH, width, height
            precision = data[body]
            height = data[body + 1] << 8 | data[body + 2]
            width = data[body + 3] << 8 | data[body + 4]
            count = data[body + 5]
            if length != 8 + 3 * count:
                return S.BAD_MARKER_LENGTH, width, height
            if precision != 8:
                return S.UNSUPPORTED_PRECISION, width, height
            if height == 0:
                return S.UNSUPPORTED_DNL, width, height
            if width == 0:
                return S.BAD_FRAME_HEADER, width, height
            if count not in (1, 3):
                return S.UNSUPPORTED_COMPONENTS, width, height
            # (plain loops: this runs for every file on the device path)
            ids, components = [], []
            for k in range(body + 6, body + 6 + 3 * count, 3):
                factors = data[k + 1]
                h, v = factors >> 4, factors & 15
                if not (1 <= h <= 4 and 1 <= v <= 4) or data[k + 2] > 3 or data[k] in ids:
                    return S.BAD_FRAME_HEADER, width, height
                ids.append(data[k])
                components.append((h, v))
            ids = tuple(ids)
            if count == 3 and (components[0] not in _LUMA_FACTORS
                               or components[1] != (1, 1) or components[2] != (1, 1)):
                return S.UNSUPPORTED_SAMPLING, width, height
            if width > max_width or height > max_height:
                return S.TOO_LARGE, width, height
            seen_sof = True
        elif marker == 0xE0 and length >= 16 and data[body:body + 5] == b"JFIF\0":
            jfif = True
        elif marker == 0xEE and length >= 14 and data[body:body + 5] == b"Adobe":
            adobe_transform = data[body + 11]
        pos = end
    return S.TRUNCATED, width, height
