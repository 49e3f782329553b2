"""A deterministic corpus of real JPEG files for the JPEG decoder's golden model and RTL.

Every file is built at call time, from the photos scikit-image ships in its ``data`` folder
(the PNGs behind ``skimage.data.astronaut()`` and friends, and the real JPEG files
``rocket.jpg``, ``retina.jpg`` and ``hubble_deep_field.jpg``), by real encoders: Pillow
(libjpeg-turbo) and ``jpeglib`` (IJG libjpeg 6b-9f, libjpeg-turbo 2.1, mozjpeg builds).
Where no encoder writes a feature, the file is a documented, minimal edit of a real file
(``features["edit"]`` says which bytes changed).  Nothing here is random except the
seeded garbage in :func:`malformed_corpus`, so the same environment gives the same bytes.

* :func:`baseline_corpus` - SOF0/SOF1 8-bit Huffman files that libjpeg-turbo decodes:
  grey, 4:4:4, 4:2:2, 4:4:0, 4:2:0; odd sizes; restart intervals; optimised tables;
  16-bit quant tables; several tables per DQT/DHT segment; fill bytes; APPn/COM markers.
* :func:`photo_corpus` - whole photos at quality 75-90, the decoder's speed benchmark.
* :func:`unsupported_corpus` - valid JPEGs outside the baseline decoder's scope.
* :func:`malformed_corpus` - precise breakages of a real file.

:func:`segments` and :func:`describe` are an independent marker walker: ``features`` holds
what it reads from the bytes, not what the encoder was asked for, so a test can compare it
with Pillow's reading of the same file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.util
import io
import os
import struct
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

__all__ = [
    "CorpusFile", "JpegSyntaxError", "SOF_MARKERS", "STD_HUFFMAN_TABLES", "ZIGZAG",
    "baseline_corpus", "describe", "huffman_tables", "malformed_corpus", "mixed_corpus",
    "photo_corpus",
    "quant_tables", "segments", "shipped_jpegs", "unsupported_corpus", "write_corpus",
]


@dataclasses.dataclass(frozen=True)
class CorpusFile:
    """One JPEG file: a unique ``name``, its bytes, and what is known about it."""

    name: str
    data: bytes = dataclasses.field(repr=False)
    features: dict = dataclasses.field(default_factory=dict, hash=False)


# ---------------------------------------------------------------------------------------
# Marker walker


class JpegSyntaxError(ValueError):
    """The marker structure cannot be walked; ``offset`` is where it went wrong."""

    def __init__(self, message, offset):
        super().__init__(f"{message} (byte {offset})")
        self.offset = offset


#: Start-of-frame markers (C4 DHT, C8 JPG and CC DAC are not frames).
SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}

#: ZIGZAG[k] is the natural (row-major) index of the k-th coefficient in file order.
from dlforge.rtl.jpeg.idct_constants import ZIGZAG  # noqa: E402  (the project's one table)

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


def _payload(data, offset, length):
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
            for tq, _, vals in _parse_dqt(_payload(data, off, length), off):
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
            for tc, th, bits, vals in _parse_dht(_payload(data, off, length), off):
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
        p = _payload(data, off, length)
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


# ---------------------------------------------------------------------------------------
# Sources: scikit-image's photos, read from its data folder (no network, no pooch)

_COLOUR = ("astronaut", "coffee", "chelsea", "rocket", "ihc", "motorcycle", "color",
           "hubble", "retina")
_GREY = ("camera", "moon", "coins", "brick", "grass", "gravel", "page", "text", "cell",
         "microaneurysms")
_FILES = {
    "astronaut": "astronaut.png", "coffee": "coffee.png", "chelsea": "chelsea.png",
    "rocket": "rocket.jpg", "ihc": "ihc.png", "motorcycle": "motorcycle_left.png",
    "color": "color.png", "hubble": "hubble_deep_field.jpg", "retina": "retina.jpg",
    "camera": "camera.png", "moon": "moon.png", "coins": "coins.png", "brick": "brick.png",
    "grass": "grass.png", "gravel": "gravel.png", "page": "page.png", "text": "text.png",
    "cell": "cell.png", "microaneurysms": "microaneurysms.png",
}
#: JPEG files that scikit-image ships as they are (real encoders: rocket.jpg and retina.jpg
#: baseline with one DQT/DHT table per segment, hubble_deep_field.jpg from Photoshop with
#: two DQT tables in one segment and four DHT tables in one segment).
_SHIPPED_JPEGS = ("rocket.jpg", "retina.jpg", "hubble_deep_field.jpg")


@functools.lru_cache(maxsize=None)
def _data_dir():
    spec = importlib.util.find_spec("skimage")
    if spec is None or not spec.submodule_search_locations:
        return None
    d = Path(next(iter(spec.submodule_search_locations))) / "data"
    return d if d.is_dir() else None


def _data_file(filename):
    d = _data_dir()
    if d is None or not (d / filename).is_file():
        return None
    return (d / filename).read_bytes()


@functools.lru_cache(maxsize=None)
def _photo(name):
    """Pixels of a scikit-image photo (uint8, HxW or HxWx3, read-only) or None if absent."""
    raw = _data_file(_FILES[name])
    if raw is None:
        return None
    with Image.open(io.BytesIO(raw)) as im:
        a = np.asarray(im.convert("L" if name in _GREY else "RGB"))
    a = np.ascontiguousarray(a)
    a.flags.writeable = False
    return a


def _available(names):
    got = tuple(n for n in names if _photo(n) is not None)
    if not got:
        raise RuntimeError("scikit-image's data folder (skimage/data/*.png) was not found: "
                           "install scikit-image")
    return got


def _source(k, grey, names=None):
    """The k-th available photo of a kind (cycling), as (name, pixels)."""
    pool = _available(names or (_GREY if grey else _COLOUR[:6]))
    name = pool[k % len(pool)]
    return name, _photo(name)


def shipped_jpegs():
    """[(file name, bytes)] of the real JPEG files scikit-image ships (those installed)."""
    return [(fn, raw) for fn in _SHIPPED_JPEGS if (raw := _data_file(fn)) is not None]


def _crop(img, w, h, k=0):
    """A w x h crop, placed deterministically by k so small crops see different content."""
    H, W = img.shape[:2]
    w, h = min(w, W), min(h, H)
    y0 = (H - h) * ((k * 37 + 41) % 97) // 97
    x0 = (W - w) * ((k * 61 + 29) % 97) // 97
    return np.ascontiguousarray(img[y0:y0 + h, x0:x0 + w])


def _to_grey(a):
    return a if a.ndim == 2 else np.asarray(Image.fromarray(a).convert("L"))


# ---------------------------------------------------------------------------------------
# Encoders


_PIL_SUBSAMPLING = {"4:4:4": 0, "4:2:2": 1, "4:2:0": 2}
#: jpeglib's samp_factor rows are (v, h) per component.
_JPEGLIB_SAMPLING = {"4:4:4": [[1, 1], [1, 1], [1, 1]], "4:2:2": [[1, 2], [1, 1], [1, 1]],
                     "4:4:0": [[2, 1], [1, 1], [1, 1]], "4:2:0": [[2, 2], [1, 1], [1, 1]]}


def _pillow(pixels, layout, **kw):
    """Pillow (its bundled libjpeg-turbo); layout "gray" or a Pillow chroma subsampling."""
    im = Image.fromarray(_to_grey(pixels) if layout == "gray" else pixels)
    if layout != "gray":
        kw["subsampling"] = _PIL_SUBSAMPLING[layout]
    buf = io.BytesIO()
    with _quiet_stderr() if "qtables" in kw else contextlib.nullcontext():
        im.save(buf, "JPEG", **kw)
    return buf.getvalue()


@contextlib.contextmanager
def _quiet_stderr():
    """Hide libjpeg's stderr trace "Caution: quantization tables are too coarse for baseline
    JPEG", printed (not raised) whenever Pillow writes 16-bit tables on purpose."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no usable fd 2: nothing to hide
        saved = None
    if saved is None:
        yield
        return
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _have_jpeglib():
    return importlib.util.find_spec("jpeglib") is not None


@contextlib.contextmanager
def _jpeglib_version(version):
    import jpeglib
    old = jpeglib.version.get()
    jpeglib.version.set(version)
    try:
        yield jpeglib
    finally:
        jpeglib.version.set(old)


def _jpeglib(pixels, layout, quality=85, version="turbo210", flags=(), scans=None,
             sampling=None):
    """jpeglib (a real libjpeg build, chosen by ``version``); scans as (components, ...)."""
    a = _to_grey(pixels)[..., None] if layout == "gray" else pixels
    a = np.ascontiguousarray(a)
    with _jpeglib_version(version) as jpeglib, tempfile.TemporaryDirectory() as tmp:
        sc = None
        if scans is not None:
            sc = [jpeglib.Scan(components=np.array(c), dc_tbl_no=np.array([min(i, 1) for i in c]),
                               ac_tbl_no=np.array([min(i, 1) for i in c]),
                               Ss=0, Se=63, Ah=0, Al=0) for c in scans]
        im = jpeglib.from_spatial(a, scans=sc)
        if sampling is not None:
            im.samp_factor = np.array(sampling)
        elif layout != "gray":
            im.samp_factor = np.array(_JPEGLIB_SAMPLING[layout])
        path = os.path.join(tmp, "out.jpg")
        # jpeglib does not force baseline: below quality 25 its tables go 16-bit (SOF1).
        with _quiet_stderr() if quality < 25 else contextlib.nullcontext():
            im.write_spatial(path, qt=quality, flags=list(flags))
        return Path(path).read_bytes()


# ---------------------------------------------------------------------------------------
# Byte surgery on real files


def _seg(data, marker, nth=0):
    """(offset, length) of the nth segment with this marker."""
    hits = [(o, n) for m, o, n in segments(data) if m == marker]
    return hits[nth]


def _scan_span(data, nth=0):
    """(start, end) of the nth scan's entropy-coded data (RST markers inside it included)."""
    segs = list(segments(data))
    sos = [i for i, s in enumerate(segs) if s[0] == 0xDA][nth]
    start = segs[sos][1] + 2 + segs[sos][2]
    for m, o, _ in segs[sos + 1:]:
        if not 0xD0 <= m <= 0xD7:
            return start, o
    raise AssertionError("unreachable: segments() ends at EOI")


def _patch(data, offset, new):
    return data[:offset] + bytes(new) + data[offset + len(new):]


def _remove_markers(data, markers):
    out, last = [], 0
    for m, o, n in segments(data):
        if m in markers:
            out.append(data[last:o])
            last = o + 2 + n
    return b"".join(out) + data[last:]


def _merge_tables(data, marker):
    """All header segments of one kind (DQT or DHT) as a single segment where the first was."""
    segs = [(o, n) for m, o, n in segments(data) if m == marker and o < _seg(data, 0xDA)[0]]
    payload = b"".join(_payload(data, o, n) for o, n in segs)
    merged = bytes([0xFF, marker]) + struct.pack(">H", 2 + len(payload)) + payload
    out, last = [], 0
    for i, (o, n) in enumerate(segs):
        out += [data[last:o], merged if i == 0 else b""]
        last = o + 2 + n
    return b"".join(out) + data[last:]


def _sof_field(data, rel, value, fmt=">H"):
    """Overwrite a field of the SOF segment at ``rel`` bytes after its marker."""
    off = next(o for m, o, _ in segments(data) if m in SOF_MARKERS)
    return _patch(data, off + rel, struct.pack(fmt, value))


# SOF layout from the 0xFF: +0 FF, +1 code, +2 length, +4 P, +5 Y, +7 X, +9 Nf, +10 components
_SOF_P, _SOF_Y, _SOF_X, _SOF_NF, _SOF_COMP = 4, 5, 7, 9, 10


# ---------------------------------------------------------------------------------------
# The corpora


class _Builder:
    def __init__(self):
        self.files = []

    def add(self, name, data, **extra):
        if any(f.name == name for f in self.files):
            raise AssertionError(f"duplicate corpus name {name}")
        feats = {}
        try:
            feats.update(describe(data))
        except JpegSyntaxError as e:
            feats["syntax_error"] = str(e)
        feats.update(extra)
        self.files.append(CorpusFile(name, bytes(data), feats))
        return data


_SIZES = ((1, 1), (1, 2), (2, 1), (3, 5), (7, 9), (15, 17), (17, 15), (31, 33), (33, 31),
          (100, 75), (16, 16), (48, 40))
_FULL_SIZES = _SIZES + ((8, 8), (9, 7), (23, 1), (1, 23), (64, 64), (65, 63), (127, 129),
                        (200, 150), (255, 17), (17, 255))
_LAYOUT_ORDER = ("gray", "4:4:4", "4:2:2", "4:4:0", "4:2:0")
_QUICK_Q = (75, 80, 85, 90, 78, 88, 82, 86)


def _layout_file(b, layout, w, h, q, k, prefix="", **kw):
    """One photo crop in one layout: Pillow, or jpeglib (libjpeg-turbo 2.1) for 4:4:0."""
    name, img = _source(k, grey=layout == "gray")
    px = _crop(img, w, h, k)
    opt = kw.get("optimize", False)
    lay = layout.replace(":", "")
    fname = f"{prefix}{lay}-{w}x{h}-q{q}{'-opt' if opt else ''}-{name}"
    if layout == "4:4:0":                            # Pillow cannot write 4:4:0
        if set(kw) - {"optimize"}:
            raise ValueError(f"jpeglib files take no {sorted(set(kw) - {'optimize'})}")
        if not _have_jpeglib():
            return None
        data = _jpeglib(px, layout, q, flags=["+OPTIMIZE_CODING"] if opt else ())
        enc = "jpeglib turbo210"
    else:
        data = _pillow(px, layout, quality=q, **kw)
        enc = "pillow"
    return b.add(fname, data, encoder=enc, source=f"{name} crop {w}x{h}", quality=q,
                 requested_layout=layout)


def _sixteen_bit_tables(scale_luma, scale_chroma):
    """Annex K tables scaled so some values exceed 255 (SOF1 + 16-bit DQT), capped at 8191.

    libjpeg-turbo's encoder mishandles quant values above about 8191 (its reciprocal
    tables), so the corpus stays below that although T.81 allows up to 65535.
    """
    from dlforge.sim.idct_vectors import STD_LUMA_QUANT
    chroma = np.array([17, 18, 24, 47, 99, 99, 99, 99, 18, 21, 26, 66, 99, 99, 99, 99,
                       24, 26, 56, 99, 99, 99, 99, 99, 47, 66, 99, 99, 99, 99, 99, 99]
                      + [99] * 32)
    luma = np.clip(STD_LUMA_QUANT.reshape(64) * scale_luma, 1, 8191).astype(int)
    chroma = np.clip(chroma * scale_chroma, 1, 8191).astype(int)
    return [luma.tolist(), chroma.tolist()]


def baseline_corpus(size="quick"):
    """Baseline (SOF0) and extended-sequential (SOF1) 8-bit Huffman files that libjpeg-turbo
    decodes, one scan each, covering the layouts, sizes and header variants of a baseline
    decoder.  ``size="quick"`` is ~60 small files; ``"full"`` several hundred.
    """
    if size not in ("quick", "full"):
        raise ValueError("size is 'quick' or 'full'")
    full = size == "full"
    b = _Builder()
    jl = _have_jpeglib()

    # Layouts x sizes: quick gives each size two layouts; full gives every pair, twice.
    sizes = _FULL_SIZES if full else _SIZES
    k = 0
    for si, (w, h) in enumerate(sizes):
        layouts = _LAYOUT_ORDER if full else (_LAYOUT_ORDER[si % 5], _LAYOUT_ORDER[(si + 2) % 5])
        for rep in range(2 if full else 1):
            for layout in layouts:
                _layout_file(b, layout, w, h, _QUICK_Q[k % len(_QUICK_Q)], k,
                             prefix=f"r{rep}-" if full else "")
                k += 1

    # Qualities away from 75-90 (all-ones tables at 100, 255-clamped ones at 1).
    quals = ((1, 10, 25, 50, 60, 70, 75, 92, 95, 98, 100) if full else (10, 50, 100, 1))
    for i, q in enumerate(quals):
        for j, layout in enumerate(_LAYOUT_ORDER if full else (_LAYOUT_ORDER[(i + 1) % 5],)):
            _layout_file(b, layout, 64, 48, q, 100 + i * 5 + j, prefix="q-")
    if not full:
        _layout_file(b, "gray", 40, 24, 100, 120, prefix="q-")

    # Optimised Huffman tables, every layout.
    opt_sizes = ((33, 31), (17, 15), (100, 75), (7, 9), (48, 40), (1, 1))
    for j, layout in enumerate(_LAYOUT_ORDER):
        for w, h in (opt_sizes if full else opt_sizes[j % 3:j % 3 + 1]):
            _layout_file(b, layout, w, h, _QUICK_Q[j], 200 + j, optimize=True)

    # Restart intervals: Pillow's restart_marker_blocks (DRI in MCUs) and _rows (MCU rows).
    restarts = [("4:2:0", 100, 75, {"restart_marker_blocks": 1}),   # 34 RSTs, RST7 -> RST0 wrap
                ("4:4:4", 33, 31, {"restart_marker_blocks": 3}),    # last interval partial
                ("4:2:2", 100, 75, {"restart_marker_rows": 1}),
                ("gray", 31, 33, {"restart_marker_blocks": 2, "optimize": True}),
                ("4:2:0", 17, 15, {"restart_marker_blocks": 100})]  # DRI but no RST needed
    if full:
        restarts += [(lay, w, h, {key: n})
                     for lay in ("gray", "4:4:4", "4:2:2", "4:2:0")
                     for key, n in (("restart_marker_blocks", 1), ("restart_marker_blocks", 5),
                                    ("restart_marker_blocks", 7), ("restart_marker_rows", 2),
                                    ("restart_marker_rows", 3))
                     for w, h in ((65, 63), (15, 17))]
        restarts += [(lay, 100, 75, {"restart_marker_blocks": 4, "optimize": True})
                     for lay in ("4:4:4", "4:2:2", "4:2:0")]
    for i, (layout, w, h, kw) in enumerate(restarts):
        tag = "-".join(f"{key.split('_')[-1]}{v}" for key, v in kw.items()
                       if key.startswith("restart"))
        _layout_file(b, layout, w, h, _QUICK_Q[i % 8], 300 + i, prefix=f"rst-{tag}-",
                     **kw)

    # 16-bit quant tables (values > 255): libjpeg writes 16-bit DQT and SOF1.
    sixteen = [("4:2:0", (40, 1)), ("gray", (300, 1)), ("4:4:4", (1, 60))]
    if full:
        sixteen += [(lay, s) for lay in ("gray", "4:4:4", "4:2:2", "4:2:0")
                    for s in ((20, 20), (200, 3), (3, 200))]
    for i, (layout, (sl, sc)) in enumerate(sixteen):
        name, img = _source(400 + i, grey=layout == "gray")
        px = _crop(img, 48, 40, 400 + i)
        data = _pillow(px, layout, qtables=_sixteen_bit_tables(sl, sc))
        b.add(f"sof1-16bit-{layout.replace(':', '')}-x{sl}-x{sc}-{name}", data,
              encoder="pillow", source=f"{name} crop 48x40", quality=None,
              requested_layout=layout, qtable_scale=(sl, sc))

    # Header layouts that libjpeg does not write, by moving segments of real files.
    name, img = _source(500, grey=False)
    base = _pillow(_crop(img, 40, 24, 500), "4:2:0", quality=85)
    b.add(f"edit-dqt-one-segment-{name}", _merge_tables(base, 0xDB), encoder="pillow",
          source=f"{name} crop 40x24", quality=85,
          edit="the two DQT segments merged into one segment (T.81 B.2.4.1 allows n tables)")
    b.add(f"edit-dht-one-segment-{name}", _merge_tables(base, 0xC4), encoder="pillow",
          source=f"{name} crop 40x24", quality=85,
          edit="the four DHT segments merged into one segment (T.81 B.2.4.2)")
    mixed = _pillow(_crop(img, 40, 24, 501), "4:4:4", qtables=_sixteen_bit_tables(1, 60),
                    optimize=True)
    b.add(f"edit-dqt-dht-one-segment-8and16bit-{name}",
          _merge_tables(_merge_tables(mixed, 0xDB), 0xC4), encoder="pillow",
          source=f"{name} crop 40x24", quality=None,
          edit="SOF1 file: its 8-bit and 16-bit DQT tables in one segment, its four "
               "optimised DHT tables in one segment")
    segs = list(segments(base))
    fill = base
    for m, o, _ in reversed(segs):                 # 0xFF fill bytes before some markers
        if m in (0xC0, 0xC4, 0xDA, 0xD9):
            fill = fill[:o] + b"\xff" * (3 if m == 0xD9 else 1) + fill[o:]
    b.add(f"edit-fill-bytes-{name}", fill, encoder="pillow", source=f"{name} crop 40x24",
          quality=85, edit="0xFF fill bytes before SOF0, each DHT, SOS and (three) before EOI "
                           "(T.81 B.1.1.2)")
    b.add(f"edit-sof1-8bit-tables-{name}", _patch(base, _seg(base, 0xC0)[0], b"\xff\xc1"),
          encoder="pillow", source=f"{name} crop 40x24", quality=85,
          edit="SOF0 relabelled SOF1: extended sequential with 8-bit tables")
    order = base
    for marker in (0xDB, 0xC4):
        keep = b"".join(order[o:o + 2 + n] for m, o, n in segments(order) if m == marker)
        order = _remove_markers(order, {marker})
        sof = _seg(order, 0xC0)
        at = sof[0] + 2 + sof[1] if marker == 0xDB else sof[0]
        order = order[:at] + keep + order[at:]
    b.add(f"edit-tables-order-{name}", order, encoder="pillow", source=f"{name} crop 40x24",
          quality=85, edit="DHT segments moved before SOF, DQT segments after it")

    # Markers a decoder must skip: COM, EXIF (APP1), ICC (APP2), Adobe-less JFIF-less files.
    name, img = _source(510, grey=False)
    px = _crop(img, 24, 16, 510)
    exif = Image.Exif()
    exif[0x010F] = "dlforge corpus"                   # Make
    b.add(f"markers-com-exif-{name}", _pillow(px, "4:2:0", quality=85,
                                              comment=b"dlforge corpus file", exif=exif),
          encoder="pillow", source=f"{name} crop 24x16", quality=85)
    rocket = _data_file("rocket.jpg")
    if rocket is not None:
        with Image.open(io.BytesIO(rocket)) as im:
            icc = im.info.get("icc_profile")
        if icc:
            b.add(f"markers-icc-{name}", _pillow(px, "4:4:4", quality=80, icc_profile=icc),
                  encoder="pillow", source=f"{name} crop 24x16 + rocket.jpg's ICC profile",
                  quality=80)
    if jl:
        b.add(f"markers-no-jfif-{name}",
              _jpeglib(px, "4:2:2", 85, flags=["-WRITE_JFIF_HEADER"]),
              encoder="jpeglib turbo210", source=f"{name} crop 24x16", quality=85)

    # Other encoders (IJG libjpeg, older libjpeg-turbo) and grey with 2x2 sampling factors.
    if jl:
        versions = (("6b", "4:2:0"), ("9f", "4:2:2")) if not full else tuple(
            (v, lay) for v in ("6b", "7", "8d", "9f", "turbo120", "turbo210")
            for lay in _LAYOUT_ORDER)
        for i, (ver, layout) in enumerate(versions):
            name, img = _source(600 + i, grey=layout == "gray")
            q = _QUICK_Q[i % 8]
            b.add(f"libjpeg{ver}-{layout.replace(':', '')}-37x29-q{q}-{name}",
                  _jpeglib(_crop(img, 37, 29, 600 + i), layout, q, version=ver),
                  encoder=f"jpeglib {ver}", source=f"{name} crop 37x29", quality=q,
                  requested_layout=layout)
        name, img = _source(650, grey=True)
        b.add(f"gray-h2v2-35x19-{name}", _jpeglib(_crop(img, 35, 19, 650), "gray", 85,
                                                   sampling=[[2, 2]]),
              encoder="jpeglib turbo210", source=f"{name} crop 35x19", quality=85,
              note="one component with h=v=2: the MCU is still one 8x8 block (T.81 A.2.2)")

    # Synthetic extremes: flat (DC only), checkerboard (largest DC steps), noise (stuffing).
    rng = np.random.default_rng(1234)
    synth = [("flat", np.full((24, 40, 3), (90, 140, 200), np.uint8), "4:2:0", 85),
             ("checker", np.kron((np.indices((4, 5)).sum(0) % 2 * 255).astype(np.uint8),
                                 np.ones((8, 8), np.uint8)), "gray", 100),
             ("noise", rng.integers(0, 256, (32, 32, 3), dtype=np.uint8), "4:4:4", 100)]
    for what, px, layout, q in synth:
        b.add(f"synthetic-{what}-{layout.replace(':', '')}-q{q}", _pillow(px, layout, quality=q),
              encoder="pillow", source=f"synthetic {what}", quality=q, requested_layout=layout)

    if full:
        # Every photo, colour ones in two layouts; and the JPEGs scikit-image ships.
        for i, name in enumerate(_COLOUR + _GREY):
            img = _photo(name)
            if img is None:
                continue
            for j, layout in enumerate(("gray",) if name in _GREY else ("4:2:0", "4:4:4")):
                q = (75, 80, 85, 90)[(i + j) % 4]
                b.add(f"photo-{name}-{layout.replace(':', '')}-160x120-q{q}",
                      _pillow(_crop(img, 160, 120, 700 + i), layout, quality=q,
                              optimize=bool(i % 2)),
                      encoder="pillow", source=f"{name} crop 160x120", quality=q,
                      requested_layout=layout)
        for fn in _SHIPPED_JPEGS:
            raw = _data_file(fn)
            if raw is not None:
                b.add(f"skimage-{fn}", raw, encoder="as shipped in skimage/data",
                      source=fn, quality=None)
    return b.files


def _photo_quals(quality_range, step):
    lo, hi = quality_range
    if not 1 <= lo <= hi <= 100:
        raise ValueError("quality_range is (low, high) within 1..100")
    q = list(range(lo, hi + 1, step))
    return q if q[-1] == hi else q + [hi]


def photo_corpus(quality_range=(75, 90), step=5):
    """Whole real photos at qualities ``quality_range`` (every ``step``), 4:2:0 and 4:4:4,
    optimised Huffman tables on every other quality: the decoder's speed benchmark.

    Photos: astronaut 512x512, coffee 600x400, chelsea 451x300, rocket 640x427,
    ihc 512x512, motorcycle 741x500, hubble_deep_field 1000x872, retina 1411x1411
    (sizes are width x height; those scikit-image does not ship locally are left out).
    """
    b = _Builder()
    quals = _photo_quals(quality_range, step)
    for name in ("astronaut", "coffee", "chelsea", "rocket", "ihc", "motorcycle", "hubble",
                 "retina"):
        img = _photo(name)
        if img is None:
            continue
        for layout in ("4:2:0", "4:4:4"):
            for i, q in enumerate(quals):
                opt = i % 2 == 1
                b.add(f"{name}-{img.shape[1]}x{img.shape[0]}-{layout.replace(':', '')}"
                      f"-q{q}{'-opt' if opt else ''}",
                      _pillow(img, layout, quality=q, optimize=opt),
                      encoder="pillow", source=f"{name} full size", quality=q,
                      requested_layout=layout)
    if not b.files:
        _available(_COLOUR)                          # raises the helpful error
    return b.files


def unsupported_corpus():
    """Valid JPEG files that a baseline-only decoder must refuse, ``features["reason"]``:
    progressive, arithmetic, precision12, cmyk, two_components, multiscan, dnl.

    "lossless" (SOF3) is absent: no encoder here writes it (Pillow and simplejpeg write
    DCT files only; jpeglib bundles IJG 6b-9f, libjpeg-turbo <= 2.1 and mozjpeg, none with
    the lossless mode that libjpeg-turbo 3.0 added).
    """
    b = _Builder()
    jl = _have_jpeglib()
    name, img = _source(800, grey=False)
    px = _crop(img, 48, 40, 800)
    gname, gimg = _source(801, grey=True)
    gpx = _crop(gimg, 33, 31, 801)
    src = f"{name} crop 48x40"

    b.add(f"progressive-pillow-420-{name}", _pillow(px, "4:2:0", quality=85, progressive=True),
          reason="progressive", encoder="pillow", source=src)
    b.add(f"progressive-pillow-gray-{gname}", _pillow(gpx, "gray", quality=80, progressive=True),
          reason="progressive", encoder="pillow", source=f"{gname} crop 33x31")
    if jl:
        b.add(f"progressive-mozjpeg-420-{name}", _jpeglib(px, "4:2:0", 85, version="mozjpeg403"),
              reason="progressive", encoder="jpeglib mozjpeg403", source=src,
              note="mozjpeg's default: SOF2, two DQT tables in one segment")
        b.add(f"arithmetic-sequential-420-{name}", _jpeglib(px, "4:2:0", 85, flags=["+ARITH_CODE"]),
              reason="arithmetic", encoder="jpeglib turbo210", source=src)
        b.add(f"arithmetic-progressive-444-{name}",
              _jpeglib(px, "4:4:4", 85, flags=["+ARITH_CODE", "+PROGRESSIVE_MODE"]),
              reason="arithmetic", encoder="jpeglib turbo210", source=src)
        b.add(f"arithmetic-sequential-gray-{gname}", _jpeglib(gpx, "gray", 90, version="9f",
                                                              flags=["+ARITH_CODE"]),
              reason="arithmetic", encoder="jpeglib 9f", source=f"{gname} crop 33x31")

    # 12-bit: no encoder here writes it (all 8-bit builds), so relabel a real SOF1 file.
    sof1 = _pillow(px, "4:2:0", qtables=_sixteen_bit_tables(40, 1))
    b.add(f"precision12-edit-{name}", _sof_field(sof1, _SOF_P, 12, ">B"), reason="precision12",
          encoder="pillow", source=src,
          edit="SOF1 file (16-bit DQT) with P changed 8 -> 12: a syntactically valid 12-bit "
               "file (its coefficients fit 12-bit ranges), decoded samples would differ")

    with Image.fromarray(px) as rgb:
        cmyk = rgb.convert("CMYK")
    buf = io.BytesIO()
    cmyk.save(buf, "JPEG", quality=85)
    b.add(f"cmyk-pillow-{name}", buf.getvalue(), reason="cmyk", encoder="pillow", source=src,
          note="4 components, Adobe APP14 transform 0")

    if jl:
        # Non-interleaved sequential: one scan per component (jpeglib scan scripts with
        # Ss=0, Se=63 give SOF0 with several scans, libjpeg's validate_script).
        multi = _jpeglib(px, "4:2:0", 85, scans=[[0], [1], [2]])
        b.add(f"multiscan-3scans-420-{name}", multi, reason="multiscan",
              encoder="jpeglib turbo210", source=src)
        b.add(f"multiscan-y-then-cbcr-444-{name}",
              _jpeglib(px, "4:4:4", 80, version="9f", scans=[[0], [1, 2]]),
              reason="multiscan", encoder="jpeglib 9f", source=src)
        # Two components: drop Cr from the frame and its scan from the 3-scan file.
        segs = list(segments(multi))
        third = [o for m, o, _ in segs if m == 0xDA][2]
        eoi = segs[-1][1]
        two = multi[:third] + multi[eoi:]
        sof_off, sof_len = _seg(two, 0xC0)
        two = (two[:sof_off + 2] + struct.pack(">H", sof_len - 3) + two[sof_off + 4:sof_off + 9]
               + b"\x02" + two[sof_off + 10:sof_off + 16] + two[sof_off + 19:])
        two = _remove_markers(two, {0xE0})
        b.add(f"two-components-edit-{name}", two, reason="two_components",
              encoder="jpeglib turbo210", source=src,
              edit="3-scan non-interleaved file with Cr's frame entry, its scan and the "
                   "JFIF APP0 removed: Y and Cb, each fully coded")

    # DNL: height 0 in SOF, the real height in a DNL segment right after the scan.
    base = _pillow(px, "4:2:0", quality=85)
    h = describe(base)["height"]
    _, end = _scan_span(base)
    dnl = base[:end] + b"\xff\xdc\x00\x04" + struct.pack(">H", h) + base[end:]
    b.add(f"dnl-edit-{name}", _sof_field(dnl, _SOF_Y, 0), reason="dnl", encoder="pillow",
          source=src, edit=f"SOF height 0 and a DNL segment (NL={h}) after the scan data")
    return b.files


def malformed_corpus():
    """Real files broken in one precise way each, ``features["reason"]`` saying which.

    ``features["edit"]`` gives the exact change; ``features["base"]`` the file it was made
    from.  libjpeg is lenient with some of these (it substitutes the standard Huffman
    tables, pads truncated scans with zeros and resynchronises restarts with a warning):
    a strict decoder should still report each one.
    """
    b = _Builder()
    name, img = _source(900, grey=False)
    px = _crop(img, 64, 48, 900)
    base = _pillow(px, "4:2:0", quality=85)
    opt = _pillow(px, "4:2:0", quality=85, optimize=True)
    rst = _pillow(px, "4:2:0", quality=85, restart_marker_blocks=2)
    bname = f"pillow 4:2:0 q85 {name} crop 64x48"
    segs = list(segments(base))
    off = {m: [o for mm, o, _ in segs if mm == m] for m in {s[0] for s in segs}}
    s0, s1 = _scan_span(base)

    def add(tag, data, reason, edit, base_name=bname):
        b.add(f"{reason}-{tag}", data, reason=reason, edit=edit, base=base_name)

    # Truncations.
    add("after-soi", base[:2], "truncated", "only the SOI marker")
    add("mid-dqt", base[:off[0xDB][0] + 20], "truncated", "cut 20 bytes into the first DQT")
    add("mid-sof", base[:off[0xC0][0] + 8], "truncated", "cut 8 bytes into SOF0 (mid-header)")
    add("mid-dht", base[:off[0xC4][1] + 40], "truncated", "cut 40 bytes into the second DHT")
    add("before-sos", base[:off[0xDA][0]], "truncated", "cut right before SOS")
    add("mid-scan", base[:(s0 + s1) // 2], "truncated", "cut halfway through the scan data")
    add("missing-eoi", base[:-2], "truncated", "EOI removed, scan data complete")

    # Entropy-coded data.
    flips = [s0 + (s1 - s0) * k // 8 for k in (2, 4, 6)]
    flipped = base
    for p in flips:
        while flipped[p] == 0xFF or flipped[p - 1] == 0xFF or flipped[p] ^ 0x5A == 0xFF:
            p += 1
        flipped = _patch(flipped, p, [flipped[p] ^ 0x5A])
    add("flipped-bytes", flipped, "corrupt_scan",
        "three scan bytes (at 1/4, 1/2, 3/4) XOR 0x5A, no new 0xFF")
    early = s0 + (s1 - s0) // 4
    while base[early - 1] == 0xFF:
        early += 1
    add("early-eoi", base[:early] + b"\xff\xd9" + base[early:], "corrupt_scan",
        "0xFFD9 inserted a quarter into the scan data")
    add("unexpected-rst", base[:early] + b"\xff\xd0" + base[early:], "corrupt_scan",
        "0xFFD0 inserted a quarter into the scan of a file without DRI")
    rsegs = [o for m, o, _ in segments(rst) if 0xD0 <= m <= 0xD7]
    add("restart-out-of-order", _patch(rst, rsegs[1] + 1, [0xD5]), "corrupt_scan",
        "second RST marker RST1 changed to RST5", "pillow 4:2:0 q85 restart every 2 MCUs")
    add("restart-missing", rst[:rsegs[1]] + rst[rsegs[1] + 2:], "corrupt_scan",
        "second RST marker removed", "pillow 4:2:0 q85 restart every 2 MCUs")

    # Marker lengths.
    app0 = off[0xE0][0]
    add("length-0", _patch(base, off[0xDB][0] + 2, b"\x00\x00"), "bad_length",
        "first DQT length field 0")
    add("length-1", _patch(base, app0 + 2, b"\x00\x01"), "bad_length", "APP0 length field 1")
    add("length-past-end", _patch(base, app0 + 2, b"\xff\xff"), "bad_length",
        "APP0 length field 65535, past the end of the file")
    add("dqt-short", _patch(base, off[0xDB][0] + 2, b"\x00\x42"), "bad_length",
        "first DQT length 66 instead of 67: the table overruns its segment")
    sof_len = off[0xC0][0] + 2
    add("sof-long", _patch(base, sof_len, b"\x00\x14"), "bad_length",
        "SOF0 length 20 instead of 17 for 3 components")

    # Tables.
    add("missing-dht", _remove_markers(base, {0xC4}), "missing_dht",
        "all DHT segments removed (the data used the Annex K tables)")
    add("missing-dht-optimised", _remove_markers(opt, {0xC4}), "missing_dht",
        "all DHT segments removed from a file with optimised tables",
        f"{bname} optimize=True")
    add("missing-dqt", _remove_markers(base, {0xDB}), "missing_dqt", "all DQT segments removed")
    add("abbreviated", _pillow(px, "4:2:0", quality=85, streamtype=2), "missing_tables",
        "Pillow streamtype=2: an abbreviated image without any DQT or DHT", "encoder output")
    swapped = base
    for o in off[0xC4]:                            # Tc/Th 0x00<->0x01, 0x10<->0x11
        swapped = _patch(swapped, o + 4, [swapped[o + 4] ^ 0x01])
    add("huffman-swapped", swapped, "huffman_mismatch",
        "luminance and chrominance DHT table ids exchanged: codes do not match the data")
    add("huffman-swapped-optimised", _swap_ac(opt), "huffman_mismatch",
        "optimised file whose two AC tables exchanged ids", f"{bname} optimize=True")
    bad = _patch(base, off[0xC4][0] + 5, bytes([3, 1, 3, 1, 1, 1, 1, 1, 0]))
    add("oversubscribed", bad, "bad_huffman_table",
        "luma DC table counts 3,1,3,1,1,1,1,1: three 1-bit codes do not fit")
    sos = off[0xDA][0]
    add("undefined-huffman", _patch(base, sos + 6, b"\x33"), "undefined_table",
        "SOS gives Y DC/AC tables 3/3, never defined")
    add("undefined-quant", _patch(base, off[0xC0][0] + _SOF_COMP + 2, b"\x03"),
        "undefined_table", "SOF0 gives Y quant table 3, never defined")
    add("zero-quant-value", _patch(base, off[0xDB][0] + 5 + 10, b"\x00"), "bad_quant_table",
        "a luma quant value (zigzag 10) set to 0; T.81 requires 1..255")

    # Frame header.
    add("zero-width", _sof_field(base, _SOF_X, 0), "zero_width", "SOF0 X = 0")
    add("zero-height", _sof_field(base, _SOF_Y, 0), "zero_height", "SOF0 Y = 0, no DNL")
    add("65535x65535", _sof_field(_sof_field(base, _SOF_X, 65535), _SOF_Y, 65535), "oversize",
        "SOF0 X = Y = 65535 on a 64x48 file")
    add("precision9", _sof_field(base, _SOF_P, 9, ">B"), "bad_frame", "SOF0 P = 9")
    add("sampling-0", _patch(base, off[0xC0][0] + _SOF_COMP + 1, b"\x02"), "bad_frame",
        "Y sampling factors h=0, v=2")
    add("sampling-5", _patch(base, off[0xC0][0] + _SOF_COMP + 1, b"\x52"), "bad_frame",
        "Y sampling factors h=5, v=2 (1..4 allowed)")
    add("duplicate-sof", base[:sos] + base[off[0xC0][0]:off[0xC0][0] + 19] + base[sos:],
        "bad_frame", "a second copy of SOF0 right before SOS")
    add("sos-unknown-component", _patch(base, sos + 5, b"\x09"), "bad_scan",
        "SOS names component 9 (not in the frame) instead of 1")
    add("sos-spectral", _patch(base, sos + 2 + 10, b"\x05"), "bad_scan",
        "SOS Se = 5 in a sequential file (must be 63)")

    # Not JPEG at all, or not from the start.
    add("no-soi", base[2:], "no_soi", "SOI removed")
    add("empty", b"", "garbage", "zero bytes")
    rng = np.random.default_rng(20240611)
    add("random", rng.integers(0, 256, 512, dtype=np.uint8).tobytes(), "garbage",
        "512 seeded random bytes (numpy default_rng(20240611))")
    add("soi-then-random", b"\xff\xd8" + rng.integers(0, 256, 512, dtype=np.uint8).tobytes(),
        "garbage", "SOI followed by 512 seeded random bytes")
    return b.files


def _swap_ac(data):
    """Exchange the ids of the two AC Huffman tables (Tc/Th 0x10 <-> 0x11)."""
    for m, o, _ in segments(data):
        if m == 0xC4 and data[o + 4] in (0x10, 0x11):
            data = _patch(data, o + 4, [data[o + 4] ^ 0x01])
    return data


def mixed_corpus():
    """Quick-corpus files alternating with malformed and unsupported ones: each bad file is
    followed by a good one, which must still decode."""
    good = baseline_corpus("quick")
    bad = malformed_corpus() + unsupported_corpus()
    return [f for pair in zip(good, bad) for f in pair]


def write_corpus(files, directory):
    """Write each file as ``directory/<name>.jpg`` (for C decoders and RTL testbenches)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    for f in files:
        (d / f"{f.name}.jpg").write_bytes(f.data)
    return d
