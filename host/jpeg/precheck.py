"""A fast look at a JPEG file's headers on the host, before it goes to a device.

Files the decoder cores do not handle (progressive, arithmetic, 12-bit, CMYK, unusual
sampling, too large for the generator's limits) go straight to the CPU fallback instead of
costing a round trip; files that are not JPEG at all are refused here.  It walks the marker
segments up to the first SOS only (a few microseconds), so what needs the entropy-coded data
(a second scan, a bad Huffman code) is still found by the device, whose status decides.

Extraneous bytes before a header marker (junk between segments, an APP segment whose length
falls short of its contents) stop the walk; :func:`drop_extraneous_bytes` removes them as
libjpeg skips them, so that such a file can still go to the device with Pillow's pixels.
"""

from dlforge.rtl.jpeg.limits import DEFAULT_MAX_HEIGHT, DEFAULT_MAX_WIDTH
from dlforge.rtl.jpeg.status import JpegDecodeError, JpegStatus as S
from dlforge.rtl.jpeg.syntax import (FRAME_TYPE_STATUS, LUMA_LAYOUTS, Marker as M, has_length,
                                     walk_segments)

__all__ = ["precheck", "drop_extraneous_bytes"]

#: The segments the walk only checks: tables, most APPn, COM, DRI, ... (all but SOS, frame
#: markers, DAC, DHP, EXP, JFIF's APP0 and Adobe's APP14)
_PLAIN = frozenset(code for code in range(256)
                   if has_length(code) and code not in (M.SOS, M.APP0, M.APP14, M.DHP, M.EXP)
                   and not (M.SOF0 <= code <= M.SOF15 and code != M.DHT))
# The codes looked at, as plain ints (an enum attribute costs a lookup per comparison).
_SOS, _DAC, _JPG, _APP0, _APP14 = (M.SOS.value, M.DAC.value, M.JPG.value, M.APP0.value,
                                   M.APP14.value)
_HIERARCHICAL = (M.DHP.value, M.EXP.value)
_SEQUENTIAL = (M.SOF0.value, M.SOF1.value)
_FRAME_LOW, _FRAME_HIGH = M.SOF0.value, M.SOF15.value


def precheck(data, max_width=DEFAULT_MAX_WIDTH, max_height=DEFAULT_MAX_HEIGHT):
    """``(status, width, height)``: ``JpegStatus.OK`` when the device should take the file.

    The width and height are 0 when no SOF was reached.
    """
    width = height = 0
    adobe_transform = None
    jfif = False
    ids = ()
    components = ()
    seen_sof = False
    try:
        for marker, offset, length in walk_segments(data, skip=_PLAIN):
            if marker == _SOS:                       # the walk's last: let it end (cheaper
                continue                             # than a break, which must close it)
            if not length:                           # SOI, EOI, RSTn or TEM before the scan
                return S.UNEXPECTED_MARKER, width, height
            body = offset + 4
            if marker == _DAC:
                return S.UNSUPPORTED_ARITHMETIC, width, height
            if marker in _HIERARCHICAL:
                return S.UNSUPPORTED_HIERARCHICAL, width, height
            if marker == _JPG:
                return S.UNSUPPORTED_EXTENSION, width, height
            if _FRAME_LOW <= marker <= _FRAME_HIGH:  # a frame header (DHT is plain)
                if marker not in _SEQUENTIAL:
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
                if count == 3 and (components[0] not in LUMA_LAYOUTS
                                   or components[1] != (1, 1) or components[2] != (1, 1)):
                    return S.UNSUPPORTED_SAMPLING, width, height
                if width > max_width or height > max_height:
                    return S.TOO_LARGE, width, height
                seen_sof = True
            elif marker == _APP0 and length >= 16 and data[body:body + 5] == b"JFIF\0":
                jfif = True
            elif marker == _APP14 and length >= 14 and data[body:body + 5] == b"Adobe":
                adobe_transform = data[body + 11]
    except JpegDecodeError as error:                 # the segment structure breaks
        return error.status, width, height
    # SOS: the device takes it from here.
    if not seen_sof:
        return S.UNEXPECTED_MARKER, width, height
    if len(components) == 3 and not jfif and (
            adobe_transform == 0 or adobe_transform is None and ids == (82, 71, 66)):
        return S.UNSUPPORTED_COLORSPACE, width, height
    return S.OK, width, height


def drop_extraneous_bytes(data):
    """``(repaired, what)`` for a file with extraneous bytes before markers of its headers,
    or None: ``repaired`` is the file without them, which a decoder reads as libjpeg (and so
    Pillow) reads the damaged one, skipping them with a warning; ``what`` says what was
    dropped in libjpeg's words ("5 extraneous bytes before marker 0xDB").

    None where there are none before the scan, where the headers break in another way too,
    or where Pillow would not open the file at all: Pillow takes a file for a JPEG only when
    its SOI is followed by a marker (``FF D8 FF``), so junk right after SOI is refused, not
    repaired.
    """
    if len(data) < 3 or data[2] != 0xFF:
        return None
    found = []
    try:
        for _ in walk_segments(data, extraneous=found):
            pass
    except JpegDecodeError:
        return None
    if not found:
        return None
    parts, at = [], 0
    for start, end, _, _ in found:
        parts.append(data[at:start])
        at = end
    parts.append(data[at:])
    what = "; ".join(f"{count} extraneous bytes before marker 0x{marker:02X}"
                     for _, _, count, marker in found)
    return b"".join(parts), what
