"""Marker-level parsing of a JPEG file, as the hardware's marker parser does it.

Walks SOI, APPn/COM (skipped), DQT, DHT, SOF0/SOF1, DRI up to the one SOS, checks everything
the decoder relies on, and classifies anything else as unsupported or malformed with a
:class:`JpegStatus` and the byte offset where it was found.
"""

from dataclasses import dataclass, field

import numpy as np

from dlforge.rtl.jpeg.idct_constants import ZIGZAG
from dlforge.rtl.jpeg.limits import DEFAULT_MAX_HEIGHT, DEFAULT_MAX_WIDTH
from dlforge.rtl.jpeg.status import JpegDecodeError, JpegStatus as S
from dlforge.rtl.jpeg.syntax import (FRAME_TYPE_STATUS, LUMA_LAYOUTS, Marker, is_sof,
                                     segment_body, walk_segments)

# JpegDecodeError is defined with the statuses; parse_headers raises it, so it is exported here.
__all__ = ["JpegDecodeError", "Component", "HuffmanTable", "Headers", "parse_headers",
           "DEFAULT_MAX_WIDTH", "DEFAULT_MAX_HEIGHT"]


@dataclass
class Component:
    """One frame component as SOF and SOS give it: its sampling factors and the tables it
    uses, which the entropy decoder and the upsampler both need."""

    ident: int
    h: int
    v: int
    tq: int
    td: int = 0          # DC table of the scan
    ta: int = 0          # AC table of the scan


@dataclass
class HuffmanTable:
    """A canonical Huffman table: code lengths and symbols as DHT lists them."""
    counts: tuple        # BITS: number of codes of each length 1..16
    symbols: bytes       # HUFFVAL

    def codes(self):
        """(length, code, symbol) triples in canonical order (T.81 Annex C)."""
        out, code, k = [], 0, 0
        for length, count in enumerate(self.counts, start=1):
            for _ in range(count):
                out.append((length, code, self.symbols[k]))
                code += 1
                k += 1
            code <<= 1
        return out


@dataclass
class Headers:
    """Everything the headers of one file say, parsed with the same limits as the gateware's
    marker parser, so that the model refuses exactly what the core refuses."""

    width: int
    height: int
    sof: int
    components: list                      # in frame order
    quant: dict                           # table id -> (8, 8) int64, natural order
    dc_tables: dict                       # table id -> HuffmanTable
    ac_tables: dict
    restart_interval: int
    scan_start: int                       # offset of the first entropy-coded byte
    colorspace: str                       # "ycbcr" or "gray"
    segments: list = field(default_factory=list)   # (marker, offset, length) walked

    @property
    def hmax(self):
        return max(c.h for c in self.components)

    @property
    def vmax(self):
        return max(c.v for c in self.components)

    @property
    def layout(self):
        """The chroma layout by the first component's sampling factors: "gray", "444",
        "422", "440", "420", or "-" for another (what benches and tables group files by)."""
        if len(self.components) == 1:
            return "gray"
        first = self.components[0]
        return LUMA_LAYOUTS.get((first.h, first.v), "-")

    @property
    def mcu_grid(self):
        """(MCUs across, MCUs down): a lone component's MCU is one block (T.81 A.2.2)."""
        if len(self.components) == 1:
            return -(-self.width // 8), -(-self.height // 8)
        return -(-self.width // (8 * self.hmax)), -(-self.height // (8 * self.vmax))


def _fail(status, offset, detail):
    raise JpegDecodeError(status, offset, detail)


def parse_headers(data, max_width=DEFAULT_MAX_WIDTH, max_height=DEFAULT_MAX_HEIGHT):
    """Parse up to the first scan; return :class:`Headers` or raise :class:`JpegDecodeError`."""
    data = bytes(data)
    quant, dc_tables, ac_tables = {}, {}, {}
    frame = None
    restart_interval = 0
    jfif = adobe = False
    adobe_transform = None
    segments = []
    # The walk checks the segment structure (SOI, fill bytes, lengths) and ends with SOS.
    for marker, start, length in walk_segments(data):
        if not length:
            _fail(S.UNEXPECTED_MARKER, start, f"marker FF {marker:02X} before the scan")
        body = segment_body(data, start, length)
        segments.append((marker, start, length))
        if marker == Marker.DQT:
            _parse_dqt(body, start + 4, quant)
        elif marker == Marker.DHT:
            _parse_dht(body, start + 4, dc_tables, ac_tables)
        elif marker == Marker.DAC:
            _fail(S.UNSUPPORTED_ARITHMETIC, start, "DAC segment: arithmetic coding")
        elif marker in (Marker.DHP, Marker.EXP):
            _fail(S.UNSUPPORTED_HIERARCHICAL, start, "hierarchical-mode marker")
        elif marker == Marker.DRI:
            if len(body) != 2:
                _fail(S.BAD_MARKER_LENGTH, start + 2, f"DRI segment of length {length}")
            restart_interval = int.from_bytes(body, "big")
        elif marker == Marker.DNL:
            _fail(S.UNSUPPORTED_DNL, start, "DNL marker")
        elif is_sof(marker) or marker == Marker.JPG:
            if frame is not None:
                _fail(S.UNEXPECTED_MARKER, start, "a second frame header")
            kind = FRAME_TYPE_STATUS.get(marker)
            if kind is not None:
                _fail(kind, start, f"frame type SOF{marker - Marker.SOF0}")
            frame = _parse_sof(marker, body, start + 4, max_width, max_height)
        elif marker == Marker.APP0 and body[:5] == b"JFIF\0" and len(body) >= 14:
            # libjpeg reads a JFIF marker only with its 14 bytes (jdmarker.c APP0_DATA_LEN).
            jfif = True
        elif marker == Marker.APP14 and body[:5] == b"Adobe" and len(body) >= 12:
            adobe, adobe_transform = True, body[11]
        # APPn, COM, SOS (below) and anything else with a length: nothing to read here.
    # SOS, the walk's last segment.
    if frame is None:
        _fail(S.UNEXPECTED_MARKER, start, "a scan before the frame header")
    _parse_sos(body, start + 4, frame)
    width, height, sof, components = frame
    for c in components:
        if c.tq not in quant:
            _fail(S.MISSING_QUANT_TABLE, start, f"component {c.ident} uses undefined "
                                               f"quantisation table {c.tq}")
        if c.td not in dc_tables or c.ta not in ac_tables:
            _fail(S.MISSING_HUFFMAN_TABLE, start, f"component {c.ident} uses undefined "
                                                 f"Huffman tables DC{c.td}/AC{c.ta}")
    for c in components:
        # libjpeg builds the scan's DC tables before decoding and refuses symbols
        # above 15 (jdhuff.c jpeg_make_d_derived_tbl).
        if any(sym > 15 for sym in dc_tables[c.td].symbols):
            _fail(S.BAD_TABLE, start, f"DC table {c.td} has a symbol above 15")
    colorspace = "gray" if len(components) == 1 else _colorspace(
        components, jfif, adobe, adobe_transform, start)
    return Headers(width, height, sof, components, {c.tq: quant[c.tq] for c in components},
                   dict(dc_tables), dict(ac_tables), restart_interval, start + 2 + length,
                   colorspace, segments)


def _colorspace(components, jfif, adobe, transform, offset):
    """libjpeg's guess (jdapimin.c default_decompress_parms) for three components."""
    ids = tuple(c.ident for c in components)
    if jfif:
        return "ycbcr"
    if adobe:
        if transform == 0:
            _fail(S.UNSUPPORTED_COLORSPACE, offset, "Adobe marker with transform 0 (RGB data)")
        return "ycbcr"
    if ids == (82, 71, 66):
        _fail(S.UNSUPPORTED_COLORSPACE, offset, "component ids 'R', 'G', 'B' (RGB data)")
    return "ycbcr"


def _parse_dqt(body, offset, quant):
    k = 0
    if not body:
        _fail(S.BAD_TABLE, offset, "empty DQT segment")
    while k < len(body):
        pq, tq = body[k] >> 4, body[k] & 15
        size = 64 * (2 if pq else 1)
        if pq > 1 or tq > 3:
            _fail(S.BAD_TABLE, offset + k, f"DQT precision {pq}, table {tq}")
        if k + 1 + size > len(body):
            _fail(S.BAD_TABLE, offset + k, "DQT table runs past its segment")
        raw = body[k + 1:k + 1 + size]
        values = (np.frombuffer(raw, dtype=">u2") if pq else np.frombuffer(raw, dtype=np.uint8))
        table = np.zeros(64, dtype=np.int64)
        table[list(ZIGZAG)] = values
        quant[tq] = table.reshape(8, 8)
        k += 1 + size


def _parse_dht(body, offset, dc_tables, ac_tables):
    k = 0
    if not body:
        _fail(S.BAD_TABLE, offset, "empty DHT segment")
    while k < len(body):
        if k + 17 > len(body):
            _fail(S.BAD_TABLE, offset + k, "DHT table header runs past its segment")
        tc, th = body[k] >> 4, body[k] & 15
        if tc > 1 or th > 3:
            _fail(S.BAD_TABLE, offset + k, f"DHT class {tc}, table {th}")
        counts = tuple(body[k + 1:k + 17])
        total = sum(counts)
        if total > 256 or k + 17 + total > len(body):
            _fail(S.BAD_TABLE, offset + k, f"DHT table with {total} symbols")
        table = HuffmanTable(counts, bytes(body[k + 17:k + 17 + total]))
        # Canonical codes must fit their lengths, and no code may be all ones (jdhuff.c
        # jpeg_make_d_derived_tbl: "Bad Huffman table").
        code = 0
        for length, count in enumerate(counts, start=1):
            code += count
            if code >= (1 << length):
                _fail(S.BAD_TABLE, offset + k, "DHT code lengths overflow the code space")
            code <<= 1
        (ac_tables if tc else dc_tables)[th] = table
        k += 17 + total


def _parse_sof(marker, body, offset, max_width, max_height):
    if len(body) < 6:
        _fail(S.BAD_FRAME_HEADER, offset, "SOF segment too short")
    precision = body[0]
    height = int.from_bytes(body[1:3], "big")
    width = int.from_bytes(body[3:5], "big")
    count = body[5]
    if len(body) != 6 + 3 * count:
        _fail(S.BAD_FRAME_HEADER, offset, f"SOF length does not match its {count} components")
    if precision != 8:
        _fail(S.UNSUPPORTED_PRECISION, offset, f"{precision}-bit samples")
    if height == 0:
        _fail(S.UNSUPPORTED_DNL, offset, "height 0: defined by a DNL marker")
    if width == 0:
        _fail(S.BAD_FRAME_HEADER, offset, "width 0")
    if count not in (1, 3):
        _fail(S.UNSUPPORTED_COMPONENTS, offset, f"{count} components")
    components = []
    for i in range(count):
        ident, hv, tq = body[6 + 3 * i:9 + 3 * i]
        h, v = hv >> 4, hv & 15
        if not (1 <= h <= 4 and 1 <= v <= 4) or tq > 3:
            _fail(S.BAD_FRAME_HEADER, offset, f"component {ident}: factors {h}x{v}, table {tq}")
        if any(c.ident == ident for c in components):
            _fail(S.BAD_FRAME_HEADER, offset, f"component id {ident} twice")
        components.append(Component(ident, h, v, tq))
    if count == 1:
        components[0].h = components[0].v = 1     # a lone component's factors do not matter
    elif (any((c.h, c.v) != (1, 1) for c in components[1:])
          or (components[0].h, components[0].v) not in LUMA_LAYOUTS):
        _fail(S.UNSUPPORTED_SAMPLING, offset, "sampling "
              + ", ".join(f"{c.h}x{c.v}" for c in components))
    if width > max_width or height > max_height:
        _fail(S.TOO_LARGE, offset, f"{width}x{height} exceeds the {max_width}x{max_height} limit")
    return width, height, marker, components


def _parse_sos(body, offset, frame):
    components = frame[3]
    if not body or len(body) != 1 + 2 * body[0] + 3:
        _fail(S.BAD_SCAN_HEADER, offset, "SOS length does not match its component count")
    count = body[0]
    if count != len(components):
        _fail(S.UNSUPPORTED_MULTISCAN, offset,
              f"a scan of {count} of the frame's {len(components)} components")
    for i in range(count):
        ident, tables = body[1 + 2 * i:3 + 2 * i]
        if ident != components[i].ident:
            _fail(S.BAD_SCAN_HEADER, offset, f"scan component {ident} is not frame component "
                                             f"{components[i].ident}")
        components[i].td, components[i].ta = tables >> 4, tables & 15
        if components[i].td > 3 or components[i].ta > 3:
            _fail(S.BAD_SCAN_HEADER, offset, f"Huffman table selectors {tables:#04x}")
    ss, se, a = body[1 + 2 * count:]
    if (ss, se, a) != (0, 63, 0):
        _fail(S.BAD_SCAN_HEADER, offset, f"spectral selection {ss}..{se}, approximation {a:#04x} "
                                         "in a sequential scan")
