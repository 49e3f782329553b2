"""Ways to write a JPEG file: real encoders (Pillow's libjpeg-turbo; jpeglib's IJG libjpeg,
libjpeg-turbo and mozjpeg builds), and documented byte edits of real files where no encoder
writes a feature."""

import contextlib
import importlib.util
import io
import os
import struct
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

from dlforge.rtl.jpeg.syntax import Marker, is_rst, is_sof, segment_bytes
from dlforge.sim.corpus.jpeg_markers import segment_payload, segments
from dlforge.sim.corpus.photos import to_grey

__all__ = ["pillow_encode", "jpeglib_encode", "jpeglib_ycck", "have_jpeglib", "segment_at", "scan_span", "patch",
           "remove_markers", "merge_tables", "sof_field", "SOF_P", "SOF_Y", "SOF_X", "SOF_NF",
           "SOF_COMP"]


# ---------------------------------------------------------------------------------------
# Encoders


_PIL_SUBSAMPLING = {"4:4:4": 0, "4:2:2": 1, "4:2:0": 2}
#: jpeglib's samp_factor rows are (v, h) per component.
_JPEGLIB_SAMPLING = {"4:4:4": [[1, 1], [1, 1], [1, 1]], "4:2:2": [[1, 2], [1, 1], [1, 1]],
                     "4:4:0": [[2, 1], [1, 1], [1, 1]], "4:2:0": [[2, 2], [1, 1], [1, 1]]}


def pillow_encode(pixels, layout, **kw):
    """Pillow (its bundled libjpeg-turbo); layout "gray" or a Pillow chroma subsampling."""
    im = Image.fromarray(to_grey(pixels) if layout == "gray" else pixels)
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


def have_jpeglib():
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


def jpeglib_encode(pixels, layout, quality=85, version="turbo210", flags=(), scans=None,
             sampling=None):
    """jpeglib (a real libjpeg build, chosen by ``version``); scans as (components, ...)."""
    a = to_grey(pixels)[..., None] if layout == "gray" else pixels
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


def jpeglib_ycck(cmyk, quality=85, version="turbo210"):
    """A four-component file as libjpeg writes CMYK input by default: YCCK (Adobe APP14
    transform 2), from (H, W, 4) uint8 CMYK pixels."""
    with _jpeglib_version(version) as jpeglib, tempfile.TemporaryDirectory() as tmp:
        im = jpeglib.from_spatial(np.ascontiguousarray(cmyk),
                                  in_color_space=jpeglib.Colorspace.JCS_CMYK)
        path = os.path.join(tmp, "out.jpg")
        im.write_spatial(path, qt=quality)
        return Path(path).read_bytes()


# ---------------------------------------------------------------------------------------
# Byte surgery on real files


def segment_at(data, marker, nth=0):
    """(offset, length) of the nth segment with this marker."""
    hits = [(o, n) for m, o, n in segments(data) if m == marker]
    return hits[nth]


def scan_span(data, nth=0):
    """(start, end) of the nth scan's entropy-coded data (RST markers inside it included)."""
    segs = list(segments(data))
    sos = [i for i, s in enumerate(segs) if s[0] == Marker.SOS][nth]
    start = segs[sos][1] + 2 + segs[sos][2]
    for m, o, _ in segs[sos + 1:]:
        if not is_rst(m):
            return start, o
    raise AssertionError("unreachable: segments() ends at EOI")


def patch(data, offset, new):
    return data[:offset] + bytes(new) + data[offset + len(new):]


def remove_markers(data, markers):
    out, last = [], 0
    for m, o, n in segments(data):
        if m in markers:
            out.append(data[last:o])
            last = o + 2 + n
    return b"".join(out) + data[last:]


def merge_tables(data, marker):
    """All header segments of one kind (DQT or DHT) as a single segment where the first was."""
    first_scan = segment_at(data, Marker.SOS)[0]
    segs = [(o, n) for m, o, n in segments(data) if m == marker and o < first_scan]
    merged = segment_bytes(marker, b"".join(segment_payload(data, o, n) for o, n in segs))
    out, last = [], 0
    for i, (o, n) in enumerate(segs):
        out += [data[last:o], merged if i == 0 else b""]
        last = o + 2 + n
    return b"".join(out) + data[last:]


def sof_field(data, rel, value, fmt=">H"):
    """Overwrite a field of the SOF segment at ``rel`` bytes after its marker."""
    off = next(o for m, o, _ in segments(data) if is_sof(m))
    return patch(data, off + rel, struct.pack(fmt, value))


# SOF layout from the 0xFF: +0 FF, +1 code, +2 length, +4 P, +5 Y, +7 X, +9 Nf, +10 components
SOF_P, SOF_Y, SOF_X, SOF_NF, SOF_COMP = 4, 5, 7, 9, 10
