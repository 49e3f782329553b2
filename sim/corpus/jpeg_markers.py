"""An independent JPEG marker walker: what a file's bytes say (segments, tables, layout), read
without the golden model's parser, so that tests can check corpus files, and the model, against
it and against Pillow's reading of the same file.

Independent on purpose: it spells out its own marker codes and its own walk instead of using
:mod:`dlforge.rtl.jpeg.syntax` (the ``Marker`` codes and ``walk_segments`` that the gateware,
the golden model and the host share), so that a mistake there shows up as a disagreement here
rather than twice.  Keep it that way: do not make this module import that one."""

import struct

from dlforge.rtl.jpeg.idct_constants import ZIGZAG  # (the project's one table)

__all__ = ["JpegSyntaxError", "SOF_MARKERS", "STD_HUFFMAN_TABLES", "ZIGZAG", "segments",
           "segment_payload", "quant_tables", "huffman_tables", "describe"]


class JpegSyntaxError(ValueError):
    """The marker structure cannot be walked; ``offset`` is where it went wrong."""

    def __init__(self, message, offset):
        super().__init__(f"{message} (byte {offset})")
        self.offset = offset


#: Start-of-frame markers (C4 DHT, C8 JPG and CC DAC are not frames).
SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}

#: ITU T.81 Annex K.3 tables, keyed by (class 0=DC/1=AC, 0=luminance/1=chrominance):
#: (16 code-length counts, symbols).  Encoders that do not optimise write exactly these.
STD_HUFFMAN_TABLES = {
    key: (tuple(raw[:16]), tuple(raw[16:])) for key, raw in {
        (0, 0): bytes.fromhex("00010501010101010100000000000000000102030405060708090a0b"),
        (0, 1): bytes.fromhex("00030101010101010101010000000000000102030405060708090a0b"),
        (1, 0): bytes.fromhex(
            "0002010303020403050504040000017d01020300041105122131410613516107227114328191"
            "a1082342b1c11552d1f02433627282090a161718191a25262728292a3435363738393a434445"
            "464748494a535455565758595a636465666768696a737475767778797a838485868788898a92"
            "939495969798999aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4c5c6c7c8c9cad2d3d4"
            "d5d6d7d8d9dae1e2e3e4e5e6e7e8e9eaf1f2f3f4f5f6f7f8f9fa"),
        (1, 1): bytes.fromhex(
            "00020102040403040705040400010277000102031104052131061241510761711322328108"
            "144291a1b1c109233352f0156272d10a162434e125f11718191a262728292a35363738393a"
            "434445464748494a535455565758595a636465666768696a737475767778797a8283848586"
            "8788898a92939495969798999aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4c5c6c7"
            "c8c9cad2d3d4d5d6d7d8d9dae2e3e4e5e6e7e8e9eaf2f3f4f5f6f7f8f9fa"),
    }.items()
}


def segments(data):
    """Yield ``(marker, offset, length)`` for each marker from SOI up to and including EOI.

    ``marker`` is the code byte (0xD8 for SOI), ``offset`` the index of the 0xFF just before
    it (fill bytes skipped), ``length`` the segment's length field (payload plus the two
    length bytes; the segment ends at ``offset + 2 + length``) or 0 for markers without one
    (SOI, EOI, RSTn, TEM).  Entropy-coded data after SOS is skipped, stuffed 0xFF00 bytes
    included; RSTn markers inside it are yielded.  Raises :class:`JpegSyntaxError` where the
    structure breaks (no SOI, truncation, a length that is too small or runs past the end).
    """
    data = bytes(data)
    n = len(data)
    if n < 2 or data[0] != 0xFF or data[1] != 0xD8:
        raise JpegSyntaxError("no SOI marker at the start", 0)
    yield 0xD8, 0, 0
    pos, in_scan = 2, False
    while True:
        if in_scan:
            i = data.find(b"\xff", pos)
            while i >= 0 and i + 1 < n and data[i + 1] == 0x00:
                i = data.find(b"\xff", i + 2)
            if i < 0 or i + 1 >= n:
                raise JpegSyntaxError("entropy-coded data runs to the end of the file", pos)
            pos = i
        if pos >= n:
            raise JpegSyntaxError("file ends without an EOI marker", pos)
        if data[pos] != 0xFF:
            raise JpegSyntaxError(f"expected a marker, found byte 0x{data[pos]:02X}", pos)
        while pos + 1 < n and data[pos + 1] == 0xFF:
            pos += 1                                   # fill bytes before a marker
        if pos + 1 >= n:
            raise JpegSyntaxError("file ends inside a marker", pos)
        code = data[pos + 1]
        if code == 0xD9:
            yield code, pos, 0
            return
        if 0xD0 <= code <= 0xD7 or code == 0x01:       # RSTn, TEM: no length field
            yield code, pos, 0
            pos += 2
            continue
        if code in (0x00, 0xD8):
            raise JpegSyntaxError(f"marker 0xFF{code:02X} not allowed here", pos)
        if pos + 4 > n:
            raise JpegSyntaxError(f"file ends inside marker 0xFF{code:02X}'s length", pos)
        length = data[pos + 2] << 8 | data[pos + 3]
        if length < 2:
            raise JpegSyntaxError(f"marker 0xFF{code:02X} has length {length} < 2", pos)
        if pos + 2 + length > n:
            raise JpegSyntaxError(
                f"marker 0xFF{code:02X} segment (length {length}) runs past the end", pos)
        yield code, pos, length
        pos += 2 + length
        in_scan = code == 0xDA


def segment_payload(data, offset, length):
    return data[offset + 4:offset + 2 + length]


def _parse_dqt(p, offset):
    """[(tq, precision_bits, values in file (zigzag) order)] of one DQT payload."""
    tables, i = [], 0
    while i < len(p):
        pq, tq = p[i] >> 4, p[i] & 15
        if pq > 1:
            raise JpegSyntaxError(f"DQT precision code {pq}", offset)
        size = 64 * (pq + 1)
        if i + 1 + size > len(p):
            raise JpegSyntaxError("DQT table runs past its segment", offset)
        raw = p[i + 1:i + 1 + size]
        vals = struct.unpack(">64H", raw) if pq else tuple(raw)
        tables.append((tq, 16 if pq else 8, vals))
        i += 1 + size
    return tables


def _parse_dht(p, offset):
    """[(class, id, bits, vals)] of one DHT payload."""
    tables, i = [], 0
    while i < len(p):
        if i + 17 > len(p):
            raise JpegSyntaxError("DHT table header runs past its segment", offset)
        tc, th = p[i] >> 4, p[i] & 15
        bits = tuple(p[i + 1:i + 17])
        count = sum(bits)
        if i + 17 + count > len(p):
            raise JpegSyntaxError("DHT symbols run past their segment", offset)
        tables.append((tc, th, bits, tuple(p[i + 17:i + 17 + count])))
        i += 17 + count
    return tables


def quant_tables(data):
    """{table id: 64 values in natural order} as last defined before the first scan."""
    data = bytes(data)
    out = {}
    for marker, off, length in segments(data):
        if marker == 0xDA:
            break
        if marker == 0xDB:
            for tq, _, vals in _parse_dqt(segment_payload(data, off, length), off):
                nat = [0] * 64
                for k, v in enumerate(vals):
                    nat[ZIGZAG[k]] = v
                out[tq] = tuple(nat)
    return out


def huffman_tables(data):
    """{(class, id): (bits, vals)} of every DHT table in the file, later ones replacing earlier."""
    data = bytes(data)
    out = {}
    for marker, off, length in segments(data):
        if marker == 0xC4:
            for tc, th, bits, vals in _parse_dht(segment_payload(data, off, length), off):
                out[tc, th] = (bits, vals)
    return out


_LAYOUTS = {(1, 1): "4:4:4", (2, 1): "4:2:2", (1, 2): "4:4:0", (2, 2): "4:2:0"}


def describe(data):
    """What the bytes say: frame, tables, scans, restarts, markers (see module docstring).

    Keys: ``sof`` (marker code or None), ``precision``, ``width``, ``height``,
    ``components`` [(id, h, v, tq)], ``layout`` ("gray", "4:4:4", "4:2:2", "4:4:0",
    "4:2:0" or "other"), ``restart_interval`` (first DRI, 0 if none), ``dqt_segments``,
    ``dqt_tables_per_segment``, ``dqt_precisions`` (bits of each table in file order),
    ``dht_segments``, ``dht_tables_per_segment``, ``optimized_huffman`` (some DHT table is not
    one of Annex K's), ``scans``, ``scan_components`` [[ids] per scan], ``spectral``
    [(Ss, Se, Ah, Al) per scan], ``rst_markers``, ``dnl`` (its line count or None),
    ``app_markers`` (e.g. ["APP0"]), ``com_markers``, ``adobe_transform`` (or None),
    ``fill_bytes`` (0xFF bytes before markers), ``size`` (bytes).
    """
    data = bytes(data)
    f = dict(sof=None, precision=None, width=None, height=None, components=[], layout=None,
             restart_interval=0, dqt_segments=0, dqt_tables_per_segment=[], dqt_precisions=[],
             dht_segments=0, dht_tables_per_segment=[], optimized_huffman=False, scans=0,
             scan_components=[], spectral=[], rst_markers=0, dnl=None, app_markers=[],
             com_markers=0, adobe_transform=None, fill_bytes=0, size=len(data))
    std = set(STD_HUFFMAN_TABLES.values())
    prev_end = 0
    for marker, off, length in segments(data):
        i = off
        while i > prev_end and data[i - 1] == 0xFF:    # 0xFF fill bytes right before it
            i -= 1
        f["fill_bytes"] += off - i
        prev_end = off + 2 + length
        p = segment_payload(data, off, length)
        if marker in SOF_MARKERS:
            if f["sof"] is not None:
                raise JpegSyntaxError("second SOF marker", off)
            if len(p) < 6 or len(p) != 6 + 3 * p[5]:
                raise JpegSyntaxError("SOF length does not match its component count", off)
            f["sof"] = marker
            f["precision"], f["height"], f["width"] = p[0], p[1] << 8 | p[2], p[3] << 8 | p[4]
            f["components"] = [(p[i], p[i + 1] >> 4, p[i + 1] & 15, p[i + 2])
                               for i in range(6, len(p), 3)]
        elif marker == 0xDB:
            tables = _parse_dqt(p, off)
            f["dqt_segments"] += 1
            f["dqt_tables_per_segment"].append(len(tables))
            f["dqt_precisions"] += [bits for _, bits, _ in tables]
        elif marker == 0xC4:
            tables = _parse_dht(p, off)
            f["dht_segments"] += 1
            f["dht_tables_per_segment"].append(len(tables))
            if any((bits, vals) not in std for _, _, bits, vals in tables):
                f["optimized_huffman"] = True
        elif marker == 0xDD:
            if len(p) != 2:
                raise JpegSyntaxError("DRI length is not 4", off)
            if f["scans"] == 0 and f["restart_interval"] == 0:
                f["restart_interval"] = p[0] << 8 | p[1]
        elif marker == 0xDA:
            if not p or len(p) != 4 + 2 * p[0]:
                raise JpegSyntaxError("SOS length does not match its component count", off)
            f["scans"] += 1
            f["scan_components"].append([p[1 + 2 * i] for i in range(p[0])])
            ss, se, a = p[-3], p[-2], p[-1]
            f["spectral"].append((ss, se, a >> 4, a & 15))
        elif 0xD0 <= marker <= 0xD7:
            f["rst_markers"] += 1
        elif marker == 0xDC:
            if len(p) != 2:
                raise JpegSyntaxError("DNL length is not 4", off)
            f["dnl"] = p[0] << 8 | p[1]
        elif 0xE0 <= marker <= 0xEF:
            f["app_markers"].append(f"APP{marker - 0xE0}")
            if marker == 0xEE and p.startswith(b"Adobe") and len(p) >= 12:
                f["adobe_transform"] = p[11]
        elif marker == 0xFE:
            f["com_markers"] += 1
    comps = f["components"]
    if len(comps) == 1:
        f["layout"] = "gray"
    elif len(comps) == 3 and all(c[1:3] == (1, 1) for c in comps[1:]):
        f["layout"] = _LAYOUTS.get(comps[0][1:3], "other")
    elif comps:
        f["layout"] = "other"
    return f
