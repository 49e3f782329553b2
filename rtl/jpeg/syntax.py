"""JPEG syntax (ITU T.81 Annex B) as this project reads it, written once: the marker codes,
which frame types and luma sampling factors the decoder takes, and the one walk over a file's
marker segments.

The gateware's marker parser compares the same codes, the golden model's parser and the
host's pre-check and work estimate walk the segments with :func:`walk_segments`, and the
corpus and the tests build files from :class:`Marker`.  It lives with the gateware because
``rtl`` may import nothing else of the project, while the host, the models and the corpus may
import ``rtl``.  (``sim/corpus/jpeg_markers.py`` is the one deliberate exception: an
independent reading of the bytes to check all of these.)
"""

from enum import IntEnum

from .status import JpegDecodeError, JpegStatus as S

__all__ = ["Marker", "is_sof", "is_rst", "has_length", "FRAME_TYPE_STATUS", "LUMA_LAYOUTS",
           "walk_segments", "segment_body", "segment_bytes"]


class Marker(IntEnum):
    """A marker's code: the byte after its FF (T.81 Table B.1), e.g. ``Marker.SOI == 0xD8``."""

    TEM = 0x01                  # temporary, arithmetic coding (no length)
    SOF0 = 0xC0                 # baseline DCT
    SOF1 = 0xC1                 # extended sequential DCT, Huffman
    SOF2 = 0xC2                 # progressive DCT, Huffman
    SOF3 = 0xC3                 # lossless, Huffman
    DHT = 0xC4                  # Huffman tables
    SOF5 = 0xC5                 # differential (hierarchical) sequential, Huffman
    SOF6 = 0xC6                 # differential progressive, Huffman
    SOF7 = 0xC7                 # differential lossless, Huffman
    JPG = 0xC8                  # reserved for JPEG extensions
    SOF9 = 0xC9                 # extended sequential DCT, arithmetic
    SOF10 = 0xCA                # progressive DCT, arithmetic
    SOF11 = 0xCB                # lossless, arithmetic
    DAC = 0xCC                  # arithmetic coding conditioning
    SOF13 = 0xCD                # differential sequential, arithmetic
    SOF14 = 0xCE                # differential progressive, arithmetic
    SOF15 = 0xCF                # differential lossless, arithmetic
    RST0 = 0xD0                 # restart markers RST0..RST7 (no length)
    RST1 = 0xD1
    RST2 = 0xD2
    RST3 = 0xD3
    RST4 = 0xD4
    RST5 = 0xD5
    RST6 = 0xD6
    RST7 = 0xD7
    SOI = 0xD8                  # start of image (no length)
    EOI = 0xD9                  # end of image (no length)
    SOS = 0xDA                  # start of scan: entropy-coded data follows its segment
    DQT = 0xDB                  # quantisation tables
    DNL = 0xDC                  # number of lines (the height, after the first scan)
    DRI = 0xDD                  # restart interval
    DHP = 0xDE                  # hierarchical progression
    EXP = 0xDF                  # expand reference components (hierarchical)
    APP0 = 0xE0                 # JFIF
    APP1 = 0xE1                 # EXIF, XMP
    APP2 = 0xE2                 # ICC profile
    APP3 = 0xE3
    APP4 = 0xE4
    APP5 = 0xE5
    APP6 = 0xE6
    APP7 = 0xE7
    APP8 = 0xE8
    APP9 = 0xE9
    APP10 = 0xEA
    APP11 = 0xEB
    APP12 = 0xEC
    APP13 = 0xED
    APP14 = 0xEE                # Adobe (its transform flag tells RGB from YCbCr)
    APP15 = 0xEF
    COM = 0xFE                  # comment

    @property
    def bytes(self):
        """The marker as a file holds it: FF, then the code."""
        return bytes((0xFF, self))


def is_sof(code):
    """A start-of-frame marker SOF0..SOF15: FF C0..FF CF but DHT, JPG and DAC."""
    return Marker.SOF0 <= code <= Marker.SOF15 and code not in _NOT_SOF


def is_rst(code):
    """A restart marker RST0..RST7."""
    return Marker.RST0 <= code <= Marker.RST7


def has_length(code):
    """False for the markers that stand alone, without a length or a body: SOI, EOI, RSTn,
    TEM."""
    return not (code in _STANDALONE or is_rst(code))


_NOT_SOF = frozenset({Marker.DHT, Marker.JPG, Marker.DAC})
_STANDALONE = frozenset({Marker.SOI, Marker.EOI, Marker.TEM})

#: The status of every frame marker FF C0..FF CF other than DHT (C4) and DAC (CC) that is not
#: baseline/extended sequential (SOF0, SOF1): what libjpeg refuses, as the hardware names it.
FRAME_TYPE_STATUS = {
    Marker.SOF2: S.UNSUPPORTED_PROGRESSIVE, Marker.SOF3: S.UNSUPPORTED_LOSSLESS,
    Marker.SOF5: S.UNSUPPORTED_HIERARCHICAL, Marker.SOF6: S.UNSUPPORTED_HIERARCHICAL,
    Marker.SOF7: S.UNSUPPORTED_HIERARCHICAL, Marker.JPG: S.UNSUPPORTED_EXTENSION,
    Marker.SOF9: S.UNSUPPORTED_ARITHMETIC, Marker.SOF10: S.UNSUPPORTED_ARITHMETIC,
    Marker.SOF11: S.UNSUPPORTED_ARITHMETIC, Marker.SOF13: S.UNSUPPORTED_ARITHMETIC,
    Marker.SOF14: S.UNSUPPORTED_ARITHMETIC, Marker.SOF15: S.UNSUPPORTED_ARITHMETIC,
}

#: The luma (h, v) sampling factors of a three-component frame that the decoder takes (its
#: chroma always 1x1), and the chroma layout each makes.
LUMA_LAYOUTS = {(1, 1): "444", (2, 1): "422", (1, 2): "440", (2, 2): "420"}

_SOI, _SOS = Marker.SOI.value, Marker.SOS.value       # (plain ints: read for every segment)
#: per code: 1 for a marker with a length (FF, a fill byte, is none), read for every segment
_LENGTH_FOLLOWS = bytes(int(has_length(code) and code != 0xFF) for code in range(256))
_NEVER = bytes(256)                     # (no fast path where stop markers must be looked for)


def walk_segments(data, pos=None, stop=(), skip=(), extraneous=None):
    """Yield ``(marker, offset, length)`` for each marker of a JPEG file, in file order.

    ``offset`` is the index of the FF just before the code (FF fill bytes before a marker
    are skipped); ``length`` is the segment's length field, its body's length plus 2 (the
    segment ends at ``offset + 2 + length``), checked to be at least 2 and to fit in the
    data, or 0 for a marker without one (:func:`has_length`), which has no length to read.

    From the start (``pos`` None) the data must begin with SOI, which is not yielded; from
    ``pos`` (after a scan's data) the walk starts there.  A marker in ``stop`` is yielded as
    soon as its code is read, with length 0, and ends the walk; SOS ends it after its
    segment, as entropy-coded data follows.  The segments of the codes in ``skip`` (never
    SOS; a marker without a length is always yielded) are checked and stepped over without
    being yielded: a caller that reads few segments (the host's per-file checks) saves the
    others their round trip.

    Raises :class:`JpegDecodeError` where the segment structure breaks, with the status the
    decoder gives: NO_SOI, TRUNCATED (the data ends before a marker, inside one, before its
    length or inside its segment), UNEXPECTED_MARKER (a byte other than FF where a marker
    should be), BAD_MARKER_LENGTH (a length below 2).  What a marker means where it stands
    is the caller's to judge.

    With a list ``extraneous``, bytes where a marker should be are skipped as libjpeg skips
    them (``next_marker`` in jdmarker.c, which warns "N extraneous bytes before marker"):
    bytes other than FF, and FF 00 pairs, up to the next FF that begins a marker.  Each such
    run is appended as ``(start, end, count, marker)``: the bytes ``data[start:end]`` that a
    decoder may drop, libjpeg's count of them, and the marker they stand before.
    """
    if _SOS in skip:
        raise ValueError("SOS cannot be skipped: entropy-coded data follows it")
    n = len(data)
    if pos is None:
        if n < 2 or data[0] != 0xFF or data[1] != _SOI:
            raise JpegDecodeError(S.NO_SOI, 0, "the file does not start with an SOI marker "
                                               "(FF D8)")
        pos, ends = 2, "the data ends before the scan"
    else:
        ends = "the data ends before EOI"
    fast = _NEVER if stop or extraneous is not None else _LENGTH_FOLLOWS
    while True:
        # Fast path, the common segment: FF, a code with a length, a length that fits.
        if pos + 4 <= n and data[pos] == 0xFF:
            marker = data[pos + 1]
            if fast[marker]:
                length = data[pos + 2] << 8 | data[pos + 3]
                if length >= 2 and pos + 2 + length <= n:
                    if marker not in skip:
                        yield marker, pos, length
                        if marker == _SOS:
                            return
                    pos += 2 + length
                    continue
        # Everything else, checked in the decoder's order.
        if pos >= n:
            raise JpegDecodeError(S.TRUNCATED, pos, ends)
        if data[pos] != 0xFF or extraneous is not None and _stuffed(data, pos):
            if extraneous is None:
                raise JpegDecodeError(S.UNEXPECTED_MARKER, pos,
                                      f"expected a marker, found byte {data[pos]:#04x}")
            pos = _skip_extraneous(data, pos, extraneous)
        while pos < n and data[pos] == 0xFF:
            pos += 1
        if pos >= n:
            raise JpegDecodeError(S.TRUNCATED, pos, "the data ends inside a marker")
        marker = data[pos]
        offset = pos - 1
        pos += 1
        if stop and marker in stop:
            yield marker, offset, 0
            return
        if not _LENGTH_FOLLOWS[marker]:
            yield marker, offset, 0
            continue
        if pos + 2 > n:
            raise JpegDecodeError(S.TRUNCATED, pos,
                                  f"the length of segment FF {marker:02X} is missing")
        length = data[pos] << 8 | data[pos + 1]
        if length < 2:
            raise JpegDecodeError(S.BAD_MARKER_LENGTH, pos,
                                  f"segment FF {marker:02X} has length {length}")
        if pos + length > n:
            # Indistinguishable from a file cut inside the segment, the common case.
            raise JpegDecodeError(S.TRUNCATED, pos, f"segment FF {marker:02X} of length "
                                                    f"{length} runs past the end of the data")
        if marker not in skip:
            yield marker, offset, length
            if marker == _SOS:
                return
        pos += length


def _stuffed(data, pos):
    """Whether the FF run at ``pos`` ends in 00: a stuffed zero, data rather than a marker."""
    n = len(data)
    while pos < n and data[pos] == 0xFF:
        pos += 1
    return pos < n and data[pos] == 0


def _skip_extraneous(data, pos, found):
    """Skip what libjpeg's ``next_marker`` discards from ``pos`` (bytes other than FF, FF 00
    pairs), append ``(start, end, count, marker)`` to ``found`` and return ``end``: the FF
    run of the marker that follows."""
    n, start, count = len(data), pos, 0
    while True:
        while pos < n and data[pos] != 0xFF:
            pos += 1
            count += 1
        end = pos
        while pos < n and data[pos] == 0xFF:
            pos += 1
        if pos >= n:
            raise JpegDecodeError(S.TRUNCATED, pos, "the data ends before the next marker")
        if data[pos]:
            found.append((start, end, count, data[pos]))
            return end
        count += 2                                      # FF 00: libjpeg counts two
        pos += 1


def segment_body(data, offset, length):
    """The body of the segment :func:`walk_segments` gave as ``(offset, length)``: the bytes
    after its length field."""
    return data[offset + 4:offset + 2 + length]


def segment_bytes(marker, body):
    """A whole segment as a file holds it: FF, the code, the length field, ``body``."""
    return bytes((0xFF, marker)) + (len(body) + 2).to_bytes(2, "big") + bytes(body)
