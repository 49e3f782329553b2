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
* :func:`heavy_corpus` - ImageNet-size photos (0.2-0.3 MP) at quality 90, written by libjpeg.
* :func:`unsupported_corpus` - valid JPEGs outside the baseline decoder's scope.
* :func:`malformed_corpus` - precise breakages of a real file.
* :func:`damaged_corpus` - the damage real datasets hold, with Pillow's verdict on each.

:func:`~dlforge.sim.corpus.jpeg_markers.segments` and :func:`~dlforge.sim.corpus.jpeg_markers.describe` are an independent marker walker: ``features`` holds
what it reads from the bytes, not what the encoder was asked for, so a test can compare it
with Pillow's reading of the same file.
"""

from __future__ import annotations

import dataclasses
import io
import struct
from pathlib import Path

import numpy as np
from PIL import Image

from dlforge.rtl.jpeg.syntax import Marker, is_rst, segment_bytes
from dlforge.sim.corpus.jpeg_making import (SOF_COMP, SOF_P, SOF_X, SOF_Y, have_jpeglib,
                                            jpeglib_encode, jpeglib_ycck, merge_tables, patch,
                                            pillow_encode, remove_markers, scan_span,
                                            segment_at, sof_field)
from dlforge.sim.corpus.jpeg_markers import JpegSyntaxError, describe, segments
from dlforge.sim.corpus.photos import (COLOUR_PHOTOS, GREY_PHOTOS, SHIPPED_JPEGS,
                                       available_photos, crop, data_file, photo, photo_source)

__all__ = ["CorpusFile", "baseline_corpus", "photo_corpus", "heavy_corpus", "HEAVY_MEGAPIXELS",
           "unsupported_corpus", "malformed_corpus", "damaged_corpus", "mixed_corpus",
           "write_corpus"]


@dataclasses.dataclass(frozen=True)
class CorpusFile:
    """One JPEG file: a unique ``name``, its bytes, and what is known about it."""

    name: str
    data: bytes = dataclasses.field(repr=False)
    features: dict = dataclasses.field(default_factory=dict, hash=False)


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
    name, img = photo_source(k, grey=layout == "gray")
    px = crop(img, w, h, k)
    opt = kw.get("optimize", False)
    lay = layout.replace(":", "")
    fname = f"{prefix}{lay}-{w}x{h}-q{q}{'-opt' if opt else ''}-{name}"
    if layout == "4:4:0":                            # Pillow cannot write 4:4:0
        if set(kw) - {"optimize"}:
            raise ValueError(f"jpeglib files take no {sorted(set(kw) - {'optimize'})}")
        if not have_jpeglib():
            return None
        data = jpeglib_encode(px, layout, q, flags=["+OPTIMIZE_CODING"] if opt else ())
        enc = "jpeglib turbo210"
    else:
        data = pillow_encode(px, layout, quality=q, **kw)
        enc = "pillow"
    return b.add(fname, data, encoder=enc, source=f"{name} crop {w}x{h}", quality=q,
                 requested_layout=layout)


def _sixteen_bit_tables(scale_luma, scale_chroma):
    """Annex K tables scaled so some values exceed 255 (SOF1 + 16-bit DQT), capped at 8191.

    libjpeg-turbo's encoder mishandles quant values above about 8191 (its reciprocal
    tables), so the corpus stays below that although T.81 allows up to 65535.
    """
    from dlforge.sim.corpus.idct_vectors import STD_LUMA_QUANT
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
    jl = have_jpeglib()

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
        name, img = photo_source(400 + i, grey=layout == "gray")
        px = crop(img, 48, 40, 400 + i)
        data = pillow_encode(px, layout, qtables=_sixteen_bit_tables(sl, sc))
        b.add(f"sof1-16bit-{layout.replace(':', '')}-x{sl}-x{sc}-{name}", data,
              encoder="pillow", source=f"{name} crop 48x40", quality=None,
              requested_layout=layout, qtable_scale=(sl, sc))

    # Header layouts that libjpeg does not write, by moving segments of real files.
    name, img = photo_source(500, grey=False)
    base = pillow_encode(crop(img, 40, 24, 500), "4:2:0", quality=85)
    b.add(f"edit-dqt-one-segment-{name}", merge_tables(base, Marker.DQT), encoder="pillow",
          source=f"{name} crop 40x24", quality=85,
          edit="the two DQT segments merged into one segment (T.81 B.2.4.1 allows n tables)")
    b.add(f"edit-dht-one-segment-{name}", merge_tables(base, Marker.DHT), encoder="pillow",
          source=f"{name} crop 40x24", quality=85,
          edit="the four DHT segments merged into one segment (T.81 B.2.4.2)")
    mixed = pillow_encode(crop(img, 40, 24, 501), "4:4:4", qtables=_sixteen_bit_tables(1, 60),
                    optimize=True)
    b.add(f"edit-dqt-dht-one-segment-8and16bit-{name}",
          merge_tables(merge_tables(mixed, Marker.DQT), Marker.DHT), encoder="pillow",
          source=f"{name} crop 40x24", quality=None,
          edit="SOF1 file: its 8-bit and 16-bit DQT tables in one segment, its four "
               "optimised DHT tables in one segment")
    segs = list(segments(base))
    fill = base
    for m, o, _ in reversed(segs):                 # 0xFF fill bytes before some markers
        if m in (Marker.SOF0, Marker.DHT, Marker.SOS, Marker.EOI):
            fill = fill[:o] + b"\xff" * (3 if m == Marker.EOI else 1) + fill[o:]
    b.add(f"edit-fill-bytes-{name}", fill, encoder="pillow", source=f"{name} crop 40x24",
          quality=85, edit="0xFF fill bytes before SOF0, each DHT, SOS and (three) before EOI "
                           "(T.81 B.1.1.2)")
    sof0 = segment_at(base, Marker.SOF0)[0]
    b.add(f"edit-sof1-8bit-tables-{name}", patch(base, sof0, Marker.SOF1.bytes),
          encoder="pillow", source=f"{name} crop 40x24", quality=85,
          edit="SOF0 relabelled SOF1: extended sequential with 8-bit tables")
    order = base
    for marker in (Marker.DQT, Marker.DHT):
        keep = b"".join(order[o:o + 2 + n] for m, o, n in segments(order) if m == marker)
        order = remove_markers(order, {marker})
        sof = segment_at(order, Marker.SOF0)
        at = sof[0] + 2 + sof[1] if marker == Marker.DQT else sof[0]
        order = order[:at] + keep + order[at:]
    b.add(f"edit-tables-order-{name}", order, encoder="pillow", source=f"{name} crop 40x24",
          quality=85, edit="DHT segments moved before SOF, DQT segments after it")

    # Markers a decoder must skip: COM, EXIF (APP1), ICC (APP2), Adobe-less JFIF-less files.
    name, img = photo_source(510, grey=False)
    px = crop(img, 24, 16, 510)
    exif = Image.Exif()
    exif[0x010F] = "dlforge corpus"                   # Make
    b.add(f"markers-com-exif-{name}", pillow_encode(px, "4:2:0", quality=85,
                                              comment=b"dlforge corpus file", exif=exif),
          encoder="pillow", source=f"{name} crop 24x16", quality=85)
    rocket = data_file("rocket.jpg")
    if rocket is not None:
        with Image.open(io.BytesIO(rocket)) as im:
            icc = im.info.get("icc_profile")
        if icc:
            b.add(f"markers-icc-{name}", pillow_encode(px, "4:4:4", quality=80, icc_profile=icc),
                  encoder="pillow", source=f"{name} crop 24x16 + rocket.jpg's ICC profile",
                  quality=80)
    if jl:
        b.add(f"markers-no-jfif-{name}",
              jpeglib_encode(px, "4:2:2", 85, flags=["-WRITE_JFIF_HEADER"]),
              encoder="jpeglib turbo210", source=f"{name} crop 24x16", quality=85)

    # Other encoders (IJG libjpeg, older libjpeg-turbo) and grey with 2x2 sampling factors.
    if jl:
        versions = (("6b", "4:2:0"), ("9f", "4:2:2")) if not full else tuple(
            (v, lay) for v in ("6b", "7", "8d", "9f", "turbo120", "turbo210")
            for lay in _LAYOUT_ORDER)
        for i, (ver, layout) in enumerate(versions):
            name, img = photo_source(600 + i, grey=layout == "gray")
            q = _QUICK_Q[i % 8]
            b.add(f"libjpeg{ver}-{layout.replace(':', '')}-37x29-q{q}-{name}",
                  jpeglib_encode(crop(img, 37, 29, 600 + i), layout, q, version=ver),
                  encoder=f"jpeglib {ver}", source=f"{name} crop 37x29", quality=q,
                  requested_layout=layout)
        name, img = photo_source(650, grey=True)
        b.add(f"gray-h2v2-35x19-{name}", jpeglib_encode(crop(img, 35, 19, 650), "gray", 85,
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
        b.add(f"synthetic-{what}-{layout.replace(':', '')}-q{q}", pillow_encode(px, layout, quality=q),
              encoder="pillow", source=f"synthetic {what}", quality=q, requested_layout=layout)

    if full:
        # Every photo, colour ones in two layouts; and the JPEGs scikit-image ships.
        for i, name in enumerate(COLOUR_PHOTOS + GREY_PHOTOS):
            img = photo(name)
            if img is None:
                continue
            for j, layout in enumerate(("gray",) if name in GREY_PHOTOS else ("4:2:0", "4:4:4")):
                q = (75, 80, 85, 90)[(i + j) % 4]
                b.add(f"photo-{name}-{layout.replace(':', '')}-160x120-q{q}",
                      pillow_encode(crop(img, 160, 120, 700 + i), layout, quality=q,
                              optimize=bool(i % 2)),
                      encoder="pillow", source=f"{name} crop 160x120", quality=q,
                      requested_layout=layout)
        for fn in SHIPPED_JPEGS:
            raw = data_file(fn)
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
        img = photo(name)
        if img is None:
            continue
        for layout in ("4:2:0", "4:4:4"):
            for i, q in enumerate(quals):
                opt = i % 2 == 1
                b.add(f"{name}-{img.shape[1]}x{img.shape[0]}-{layout.replace(':', '')}"
                      f"-q{q}{'-opt' if opt else ''}",
                      pillow_encode(img, layout, quality=q, optimize=opt),
                      encoder="pillow", source=f"{name} full size", quality=q,
                      requested_layout=layout)
    if not b.files:
        available_photos(COLOUR_PHOTOS)                          # raises the helpful error
    return b.files


#: The heavy corpus's range of megapixels a file: ImageNet-size photos.
HEAVY_MEGAPIXELS = (0.2, 0.3)


def heavy_corpus(quality=90):
    """Photos of 0.2-0.3 megapixels at ``quality`` (90), as libjpeg writes them (cjpeg's defaults:
    IJG tables scaled to the quality, standard Huffman tables), 4:2:0 and 4:4:4: dense,
    ImageNet-size files, heavier per pixel than :func:`photo_corpus`'s whole photos.

    The photos of :func:`photo_corpus`; one within the range is kept whole (astronaut,
    coffee, rocket, ihc), a larger one reduced with Pillow's Lanczos filter to 0.25 MP, its
    aspect kept (motorcycle 609x411, hubble_deep_field 535x467, retina 500x500): reduced as
    a camera's photo is for the web, so every pixel holds detail.  chelsea (0.14 MP) is left
    out: an enlarged photo would be light.  Encoded by libjpeg-turbo 2.1 through ``jpeglib``.
    """
    if not have_jpeglib():
        raise RuntimeError("the heavy corpus is written by libjpeg through jpeglib: "
                           "pip install jpeglib")
    low, high = HEAVY_MEGAPIXELS
    b = _Builder()
    for name in ("astronaut", "coffee", "chelsea", "rocket", "ihc", "motorcycle", "hubble",
                 "retina"):
        img = photo(name)
        if img is None or img.shape[0] * img.shape[1] < low * 1e6:
            continue
        source = f"{name} full size"
        if img.shape[0] * img.shape[1] > high * 1e6:
            s = (0.25e6 / (img.shape[0] * img.shape[1])) ** 0.5
            size = (round(img.shape[1] * s), round(img.shape[0] * s))
            img = np.asarray(Image.fromarray(img).resize(size, Image.Resampling.LANCZOS))
            source = f"{name} reduced to {size[0]}x{size[1]} (Lanczos)"
        for layout in ("4:2:0", "4:4:4"):
            b.add(f"heavy-{name}-{img.shape[1]}x{img.shape[0]}-{layout.replace(':', '')}"
                  f"-q{quality}",
                  jpeglib_encode(img, layout, quality), encoder="jpeglib turbo210",
                  source=source, quality=quality, requested_layout=layout)
    if not b.files:
        available_photos(COLOUR_PHOTOS)                          # raises the helpful error
    return b.files


def unsupported_corpus():
    """Valid JPEG files that a baseline-only decoder must refuse, ``features["reason"]``:
    progressive, arithmetic, precision12, cmyk, two_components, multiscan, dnl.

    "lossless" (SOF3) is absent: no encoder here writes it (Pillow and simplejpeg write
    DCT files only; jpeglib bundles IJG 6b-9f, libjpeg-turbo <= 2.1 and mozjpeg, none with
    the lossless mode that libjpeg-turbo 3.0 added).
    """
    b = _Builder()
    jl = have_jpeglib()
    name, img = photo_source(800, grey=False)
    px = crop(img, 48, 40, 800)
    gname, gimg = photo_source(801, grey=True)
    gpx = crop(gimg, 33, 31, 801)
    src = f"{name} crop 48x40"

    b.add(f"progressive-pillow-420-{name}", pillow_encode(px, "4:2:0", quality=85, progressive=True),
          reason="progressive", encoder="pillow", source=src)
    b.add(f"progressive-pillow-gray-{gname}", pillow_encode(gpx, "gray", quality=80, progressive=True),
          reason="progressive", encoder="pillow", source=f"{gname} crop 33x31")
    if jl:
        b.add(f"progressive-mozjpeg-420-{name}", jpeglib_encode(px, "4:2:0", 85, version="mozjpeg403"),
              reason="progressive", encoder="jpeglib mozjpeg403", source=src,
              note="mozjpeg's default: SOF2, two DQT tables in one segment")
        b.add(f"arithmetic-sequential-420-{name}", jpeglib_encode(px, "4:2:0", 85, flags=["+ARITH_CODE"]),
              reason="arithmetic", encoder="jpeglib turbo210", source=src)
        b.add(f"arithmetic-progressive-444-{name}",
              jpeglib_encode(px, "4:4:4", 85, flags=["+ARITH_CODE", "+PROGRESSIVE_MODE"]),
              reason="arithmetic", encoder="jpeglib turbo210", source=src)
        b.add(f"arithmetic-sequential-gray-{gname}", jpeglib_encode(gpx, "gray", 90, version="9f",
                                                              flags=["+ARITH_CODE"]),
              reason="arithmetic", encoder="jpeglib 9f", source=f"{gname} crop 33x31")

    # 12-bit: no encoder here writes it (all 8-bit builds), so relabel a real SOF1 file.
    sof1 = pillow_encode(px, "4:2:0", qtables=_sixteen_bit_tables(40, 1))
    b.add(f"precision12-edit-{name}", sof_field(sof1, SOF_P, 12, ">B"), reason="precision12",
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
        multi = jpeglib_encode(px, "4:2:0", 85, scans=[[0], [1], [2]])
        b.add(f"multiscan-3scans-420-{name}", multi, reason="multiscan",
              encoder="jpeglib turbo210", source=src)
        b.add(f"multiscan-y-then-cbcr-444-{name}",
              jpeglib_encode(px, "4:4:4", 80, version="9f", scans=[[0], [1, 2]]),
              reason="multiscan", encoder="jpeglib 9f", source=src)
        # Two components: drop Cr from the frame and its scan from the 3-scan file.
        segs = list(segments(multi))
        third = [o for m, o, _ in segs if m == Marker.SOS][2]
        eoi = segs[-1][1]
        two = multi[:third] + multi[eoi:]
        sof_off, sof_len = segment_at(two, Marker.SOF0)
        two = (two[:sof_off + 2] + struct.pack(">H", sof_len - 3) + two[sof_off + 4:sof_off + 9]
               + b"\x02" + two[sof_off + 10:sof_off + 16] + two[sof_off + 19:])
        two = remove_markers(two, {Marker.APP0})
        b.add(f"two-components-edit-{name}", two, reason="two_components",
              encoder="jpeglib turbo210", source=src,
              edit="3-scan non-interleaved file with Cr's frame entry, its scan and the "
                   "JFIF APP0 removed: Y and Cb, each fully coded")

    # DNL: height 0 in SOF, the real height in a DNL segment right after the scan.
    base = pillow_encode(px, "4:2:0", quality=85)
    h = describe(base)["height"]
    _, end = scan_span(base)
    dnl = base[:end] + segment_bytes(Marker.DNL, struct.pack(">H", h)) + base[end:]
    b.add(f"dnl-edit-{name}", sof_field(dnl, SOF_Y, 0), reason="dnl", encoder="pillow",
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
    name, img = photo_source(900, grey=False)
    px = crop(img, 64, 48, 900)
    base = pillow_encode(px, "4:2:0", quality=85)
    opt = pillow_encode(px, "4:2:0", quality=85, optimize=True)
    rst = pillow_encode(px, "4:2:0", quality=85, restart_marker_blocks=2)
    bname = f"pillow 4:2:0 q85 {name} crop 64x48"
    segs = list(segments(base))
    off = {m: [o for mm, o, _ in segs if mm == m] for m in {s[0] for s in segs}}
    s0, s1 = scan_span(base)

    def add(tag, data, reason, edit, base_name=bname):
        b.add(f"{reason}-{tag}", data, reason=reason, edit=edit, base=base_name)

    # Truncations.
    add("after-soi", base[:2], "truncated", "only the SOI marker")
    add("mid-dqt", base[:off[Marker.DQT][0] + 20], "truncated", "cut 20 bytes into the first DQT")
    add("mid-sof", base[:off[Marker.SOF0][0] + 8], "truncated",
        "cut 8 bytes into SOF0 (mid-header)")
    add("mid-dht", base[:off[Marker.DHT][1] + 40], "truncated", "cut 40 bytes into the second DHT")
    add("before-sos", base[:off[Marker.SOS][0]], "truncated", "cut right before SOS")
    add("mid-scan", base[:(s0 + s1) // 2], "truncated", "cut halfway through the scan data")
    add("missing-eoi", base[:-2], "truncated", "EOI removed, scan data complete")

    # Entropy-coded data.
    flips = [s0 + (s1 - s0) * k // 8 for k in (2, 4, 6)]
    flipped = base
    for p in flips:
        while flipped[p] == 0xFF or flipped[p - 1] == 0xFF or flipped[p] ^ 0x5A == 0xFF:
            p += 1
        flipped = patch(flipped, p, [flipped[p] ^ 0x5A])
    add("flipped-bytes", flipped, "corrupt_scan",
        "three scan bytes (at 1/4, 1/2, 3/4) XOR 0x5A, no new 0xFF")
    early = s0 + (s1 - s0) // 4
    while base[early - 1] == 0xFF:
        early += 1
    add("early-eoi", base[:early] + Marker.EOI.bytes + base[early:], "corrupt_scan",
        "0xFFD9 inserted a quarter into the scan data")
    add("unexpected-rst", base[:early] + Marker.RST0.bytes + base[early:], "corrupt_scan",
        "0xFFD0 inserted a quarter into the scan of a file without DRI")
    rsegs = [o for m, o, _ in segments(rst) if is_rst(m)]
    add("restart-out-of-order", patch(rst, rsegs[1] + 1, [Marker.RST5]), "corrupt_scan",
        "second RST marker RST1 changed to RST5", "pillow 4:2:0 q85 restart every 2 MCUs")
    add("restart-missing", rst[:rsegs[1]] + rst[rsegs[1] + 2:], "corrupt_scan",
        "second RST marker removed", "pillow 4:2:0 q85 restart every 2 MCUs")

    # Marker lengths.
    app0 = off[Marker.APP0][0]
    add("length-0", patch(base, off[Marker.DQT][0] + 2, b"\x00\x00"), "bad_length",
        "first DQT length field 0")
    add("length-1", patch(base, app0 + 2, b"\x00\x01"), "bad_length", "APP0 length field 1")
    add("length-past-end", patch(base, app0 + 2, b"\xff\xff"), "bad_length",
        "APP0 length field 65535, past the end of the file")
    add("dqt-short", patch(base, off[Marker.DQT][0] + 2, b"\x00\x42"), "bad_length",
        "first DQT length 66 instead of 67: the table overruns its segment")
    sof_len = off[Marker.SOF0][0] + 2
    add("sof-long", patch(base, sof_len, b"\x00\x14"), "bad_length",
        "SOF0 length 20 instead of 17 for 3 components")

    # Tables.
    add("missing-dht", remove_markers(base, {Marker.DHT}), "missing_dht",
        "all DHT segments removed (the data used the Annex K tables)")
    add("missing-dht-optimised", remove_markers(opt, {Marker.DHT}), "missing_dht",
        "all DHT segments removed from a file with optimised tables",
        f"{bname} optimize=True")
    add("missing-dqt", remove_markers(base, {Marker.DQT}), "missing_dqt",
        "all DQT segments removed")
    add("abbreviated", pillow_encode(px, "4:2:0", quality=85, streamtype=2), "missing_tables",
        "Pillow streamtype=2: an abbreviated image without any DQT or DHT", "encoder output")
    swapped = base
    for o in off[Marker.DHT]:                            # Tc/Th 0x00<->0x01, 0x10<->0x11
        swapped = patch(swapped, o + 4, [swapped[o + 4] ^ 0x01])
    add("huffman-swapped", swapped, "huffman_mismatch",
        "luminance and chrominance DHT table ids exchanged: codes do not match the data")
    add("huffman-swapped-optimised", _swap_ac(opt), "huffman_mismatch",
        "optimised file whose two AC tables exchanged ids", f"{bname} optimize=True")
    bad = patch(base, off[Marker.DHT][0] + 5, bytes([3, 1, 3, 1, 1, 1, 1, 1, 0]))
    add("oversubscribed", bad, "bad_huffman_table",
        "luma DC table counts 3,1,3,1,1,1,1,1: three 1-bit codes do not fit")
    sos = off[Marker.SOS][0]
    add("undefined-huffman", patch(base, sos + 6, b"\x33"), "undefined_table",
        "SOS gives Y DC/AC tables 3/3, never defined")
    add("undefined-quant", patch(base, off[Marker.SOF0][0] + SOF_COMP + 2, b"\x03"),
        "undefined_table", "SOF0 gives Y quant table 3, never defined")
    add("zero-quant-value", patch(base, off[Marker.DQT][0] + 5 + 10, b"\x00"), "bad_quant_table",
        "a luma quant value (zigzag 10) set to 0; T.81 requires 1..255")

    # Frame header.
    add("zero-width", sof_field(base, SOF_X, 0), "zero_width", "SOF0 X = 0")
    add("zero-height", sof_field(base, SOF_Y, 0), "zero_height", "SOF0 Y = 0, no DNL")
    add("65535x65535", sof_field(sof_field(base, SOF_X, 65535), SOF_Y, 65535), "oversize",
        "SOF0 X = Y = 65535 on a 64x48 file")
    add("precision9", sof_field(base, SOF_P, 9, ">B"), "bad_frame", "SOF0 P = 9")
    add("sampling-0", patch(base, off[Marker.SOF0][0] + SOF_COMP + 1, b"\x02"), "bad_frame",
        "Y sampling factors h=0, v=2")
    add("sampling-5", patch(base, off[Marker.SOF0][0] + SOF_COMP + 1, b"\x52"), "bad_frame",
        "Y sampling factors h=5, v=2 (1..4 allowed)")
    sof = off[Marker.SOF0][0]
    add("duplicate-sof", base[:sos] + base[sof:sof + 19] + base[sos:],
        "bad_frame", "a second copy of SOF0 right before SOS")
    add("sos-unknown-component", patch(base, sos + 5, b"\x09"), "bad_scan",
        "SOS names component 9 (not in the frame) instead of 1")
    add("sos-spectral", patch(base, sos + 2 + 10, b"\x05"), "bad_scan",
        "SOS Se = 5 in a sequential file (must be 63)")

    # Not JPEG at all, or not from the start.
    add("no-soi", base[2:], "no_soi", "SOI removed")
    add("empty", b"", "garbage", "zero bytes")
    rng = np.random.default_rng(20240611)
    add("random", rng.integers(0, 256, 512, dtype=np.uint8).tobytes(), "garbage",
        "512 seeded random bytes (numpy default_rng(20240611))")
    add("soi-then-random", Marker.SOI.bytes + rng.integers(0, 256, 512, dtype=np.uint8).tobytes(),
        "garbage", "SOI followed by 512 seeded random bytes")
    return b.files


def damaged_corpus():
    """The slightly wrong files real datasets hold, made from a real photo, each with what
    torchvision's loader (Pillow: ``Image.open(f).convert("RGB")``) and a strict libjpeg-turbo
    (simplejpeg, which stops where libjpeg only warns) make of it:
    ``features["pillow"]`` is "decodes" or "refuses", ``features["libjpeg"]`` "clean" (no
    warning), "warns" or "fails"; ``features["reason"]`` names the damage.
    """
    b = _Builder()
    name, img = photo_source(910, grey=False)
    px = crop(img, 96, 64, 910)
    src = f"pillow 4:2:0 q85 {name} crop 96x64"
    base = pillow_encode(px, "4:2:0", quality=85)
    segs = list(segments(base))
    first = {m: next(o for mm, o, _ in segs if mm == m) for m in (Marker.DQT, Marker.DHT,
                                                                  Marker.SOS)}
    s0, s1 = scan_span(base)

    def add(tag, data, reason, pillow, libjpeg, edit):
        b.add(f"{reason}-{tag}", data, reason=reason, pillow=pillow, libjpeg=libjpeg, edit=edit,
              base=src)

    add("junk", b"JUNK" + base, "before_soi", "refuses", "fails", "4 bytes before SOI")
    add("dqt", base[:first[Marker.DQT]] + b"\x00\x01\x02\x03\x04" + base[first[Marker.DQT]:],
        "extraneous_bytes", "decodes", "warns", "5 bytes before the first DQT")
    add("sos", base[:first[Marker.SOS]] + b"\x12\x34\x56" + base[first[Marker.SOS]:],
        "extraneous_bytes", "decodes", "warns", "3 bytes before SOS")
    add("stuffed-zero", base[:first[Marker.DHT]] + b"\x07\xff\x00\x09" + base[first[Marker.DHT]:],
        "extraneous_bytes", "decodes", "warns",
        "07 FF 00 09 before the first DHT (FF 00: a stuffed zero, junk to libjpeg)")
    exif = segment_bytes(Marker.APP1, b"Exif\0\0" + bytes(range(1, 31)))
    short = exif[:2] + (len(exif) - 2 - 10).to_bytes(2, "big") + exif[4:]
    add("short-app1", base[:2] + short + base[2:], "short_app_segment", "decodes", "warns",
        "an APP1 'Exif' segment whose length is 10 bytes short of its contents")
    add("garbage", base + b"trailing bytes after EOI " * 8, "after_eoi", "decodes", "clean",
        "200 bytes after EOI")
    second = pillow_encode(crop(img, 48, 32, 911), "4:4:4", quality=75)
    add("second-image", base + second, "after_eoi", "decodes", "clean",
        "a second JPEG file after EOI (a multi-picture file's layout)")
    buf = io.BytesIO()
    Image.fromarray(px).save(buf, "MPO", save_all=True, quality=85,
                             append_images=[Image.fromarray(np.ascontiguousarray(px[:, ::-1]))])
    add("mpo", buf.getvalue(), "multi_picture", "decodes", "clean",
        "Pillow's MPO writer: an MPF APP2 segment and a second picture after the first's EOI")
    early = s0 + (s1 - s0) // 3
    while base[early - 1] == 0xFF:
        early += 1
    add("early-eoi", base[:early] + Marker.EOI.bytes + base[early:], "corrupt_scan",
        "decodes", "warns", "EOI inserted a third into the scan data")
    rst = pillow_encode(px, "4:2:0", quality=85, restart_marker_blocks=2)
    second_rst = [o for m, o, _ in segments(rst) if is_rst(m)][1]
    add("restart-out-of-order", patch(rst, second_rst + 1, [Marker.RST5]), "corrupt_scan",
        "decodes", "warns", "the second restart marker RST1 changed to RST5")
    with Image.fromarray(px) as rgb:
        cmyk = rgb.convert("CMYK")
    buf = io.BytesIO()
    cmyk.save(buf, "JPEG", quality=85)
    add("adobe", buf.getvalue(), "cmyk", "decodes", "clean",
        "Pillow's CMYK file: Adobe APP14 transform 0, inverted (Photoshop's convention)")
    add("no-adobe", remove_markers(buf.getvalue(), {Marker.APP14}), "cmyk", "decodes",
        "clean", "the same without its Adobe APP14 segment: plain CMYK")
    if have_jpeglib():
        add("jpeglib", jpeglib_ycck(np.asarray(cmyk)), "ycck", "decodes", "clean",
            "libjpeg's CMYK encode: YCCK, Adobe APP14 transform 2")
    add("pillow", pillow_encode(px, "gray", quality=85), "grey", "decodes", "clean",
        "a greyscale file (an RGB request replicates it)")
    add("half", base[:s0 + (s1 - s0) // 2], "truncated", "refuses", "fails",
        "cut halfway through the scan data")
    return b.files


def _swap_ac(data):
    """Exchange the ids of the two AC Huffman tables (Tc/Th 0x10 <-> 0x11)."""
    for m, o, _ in segments(data):
        if m == Marker.DHT and data[o + 4] in (0x10, 0x11):
            data = patch(data, o + 4, [data[o + 4] ^ 0x01])
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
