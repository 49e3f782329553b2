"""The JPEG corpus (sim/corpus/jpeg_corpus.py): deterministic, described truthfully, and covering
what the golden model and the RTL decoder will be tested on.

The marker walker's ``features`` are checked against Pillow's and simplejpeg's own header
parsers; baseline files against two libjpeg-turbo builds (simplejpeg, Pillow); unsupported
files against what makes them unsupported; malformed files against what libjpeg does with
them, recorded below because libjpeg is lenient with several.
"""

import io
import warnings

import numpy as np
import pytest
import simplejpeg
from PIL import Image, JpegImagePlugin

pytest.importorskip("skimage")

from dlforge.rtl.jpeg.syntax import Marker as M, segment_bytes
from dlforge.sim.corpus import jpeg_corpus as jc, jpeg_making, jpeg_markers
from dlforge.sim.corpus import photos as skimage_photos
from dlforge.sim.corpus.pick import files_of

PROGRESSIVE_SOF = {M.SOF2, M.SOF6, M.SOF10, M.SOF14}
ARITHMETIC_SOF = {M.SOF9, M.SOF10, M.SOF11, M.SOF13, M.SOF14, M.SOF15}
PIL_SAMPLING = {"4:4:4": 0, "4:2:2": 1, "4:2:0": 2}
SJ_SAMPLING = {"gray": "Gray", "4:4:4": "444", "4:2:2": "422", "4:4:0": "440", "4:2:0": "420"}


@pytest.fixture(scope="module")
def quick():
    return jc.baseline_corpus("quick")


@pytest.fixture(scope="module")
def full():
    return jc.baseline_corpus("full")


@pytest.fixture(scope="module")
def photos():
    return jc.photo_corpus()


@pytest.fixture(scope="module")
def unsupported():
    return {f.name: f for f in jc.unsupported_corpus()}


@pytest.fixture(scope="module")
def malformed():
    return {f.name: f for f in jc.malformed_corpus()}


def _snapshot(files):
    return [(f.name, f.data, f.features) for f in files]


# ---------------------------------------------------------------------------------------
# Determinism and shape of the API


def test_deterministic(quick, photos, unsupported, malformed):
    """Same bytes on every build, source photos re-read too: golden outputs can be cached."""
    skimage_photos.photo.cache_clear()
    assert _snapshot(jc.baseline_corpus("quick")) == _snapshot(quick)
    assert _snapshot(jc.photo_corpus()) == _snapshot(photos)
    assert _snapshot(jc.unsupported_corpus()) == _snapshot(unsupported.values())
    assert _snapshot(jc.malformed_corpus()) == _snapshot(malformed.values())


def test_full_is_deterministic_and_a_superset_in_kind(quick, full):
    """The full corpus rebuilds identically and holds several hundred files."""
    assert _snapshot(jc.baseline_corpus("full")) == _snapshot(full)
    assert 300 <= len(full) <= 800
    assert 40 <= len(quick) <= 80
    assert {f.features["layout"] for f in full} == {f.features["layout"] for f in quick}


def test_names_unique_and_files_frozen(quick, full, photos, unsupported, malformed):
    """Names are test ids and file names (write_corpus), so they must be unique."""
    for files in (quick, full, photos):
        assert len({f.name for f in files}) == len(files)
    f = quick[0]
    with pytest.raises(AttributeError):
        f.name = "x"
    assert isinstance(f.data, bytes) and hash(f) == hash(jc.CorpusFile(f.name, f.data))


def test_write_corpus(tmp_path, unsupported):
    """Files land as <name>.jpg, byte for byte, for C decoders and RTL testbenches."""
    jc.write_corpus(unsupported.values(), tmp_path / "out")
    for f in unsupported.values():
        assert (tmp_path / "out" / f"{f.name}.jpg").read_bytes() == f.data


# ---------------------------------------------------------------------------------------
# The marker walker


def test_segments_walks_stuffing_restarts_and_fill_bytes():
    """Stuffed 0xFF00 is data, RSTn inside a scan is yielded, fill 0xFFs are skipped."""
    data = (M.SOI.bytes + segment_bytes(M.COM, b"ab")
            + segment_bytes(M.SOS, b"\x01\x01\x00\x00\x3f\x00")
            + b"\x12\xff\x00\x34" + M.RST0.bytes + b"\x56" + b"\xff\xff" + M.EOI.bytes)
    assert list(jpeg_markers.segments(data)) == [(M.SOI, 0, 0), (M.COM, 2, 4), (M.SOS, 8, 8),
                                                 (M.RST0, 22, 0), (M.EOI, 27, 0)]
    assert jpeg_markers.describe(data)["fill_bytes"] == 2
    for bad in (b"", M.SOI.bytes, M.SOI.bytes + M.COM.bytes + b"\x00\x01",
                M.SOI.bytes + M.COM.bytes + b"\x00\x09ab", data[:-1], data[:12]):
        with pytest.raises(jpeg_markers.JpegSyntaxError):
            list(jpeg_markers.segments(bad))


def test_zigzag_and_standard_tables():
    """ZIGZAG is T.81 Figure A.6; the Annex K tables are what libjpeg writes unoptimised."""
    assert jpeg_markers.ZIGZAG[:10] == (0, 1, 8, 16, 9, 2, 3, 10, 17, 24)
    assert sorted(jpeg_markers.ZIGZAG) == list(range(64)) and jpeg_markers.ZIGZAG[-1] == 63
    for bits, vals in jpeg_markers.STD_HUFFMAN_TABLES.values():
        assert sum(bits) == len(vals) and len(set(vals)) == len(vals)
    buf = io.BytesIO()
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(buf, "JPEG")
    tables = jpeg_markers.huffman_tables(buf.getvalue())
    assert {(c, i): t for (c, i), t in tables.items()} == jpeg_markers.STD_HUFFMAN_TABLES


def _pillow_view(data):
    """Pillow's header parse (no decode): size, mode, bits, layers, tables, APPn, flags."""
    with Image.open(io.BytesIO(data)) as im:
        return dict(size=im.size, mode=im.mode, bits=im.bits, layer=list(im.layer),
                    sampling=JpegImagePlugin.get_sampling(im),
                    quantization={k: tuple(v) for k, v in im.quantization.items()},
                    apps=[a for a, _ in im.applist if a.startswith("APP")],
                    progressive=bool(im.info.get("progressive")),
                    adobe_transform=im.info.get("adobe_transform"),
                    comment="comment" in im.info)


def _check_against_pillow(f):
    d = f.features
    p = _pillow_view(f.data)
    assert p["size"] == (d["width"], d["height"])
    assert p["mode"] == {1: "L", 3: "RGB", 4: "CMYK"}[len(d["components"])]
    assert p["bits"] == d["precision"]
    assert p["layer"] == d["components"]
    assert p["sampling"] == PIL_SAMPLING.get(d["layout"], -1)
    assert p["quantization"] == jpeg_markers.quant_tables(f.data)
    assert p["apps"] == d["app_markers"]
    assert p["progressive"] == (d["sof"] in PROGRESSIVE_SOF)
    assert p["adobe_transform"] == d["adobe_transform"]
    assert p["comment"] == (d["com_markers"] > 0)


def test_features_match_pillow_and_simplejpeg(quick, full, photos, unsupported):
    """The walker's reading of every openable file is Pillow's and simplejpeg's reading."""
    opened = 0
    for f in [*quick, *full, *photos, *unsupported.values()]:
        d = f.features
        if d["precision"] != 8 or len(d["components"]) not in (1, 3, 4) or d["height"] == 0:
            continue                                  # Pillow refuses these (checked below)
        _check_against_pillow(f)
        if d["layout"] in SJ_SAMPLING:
            h, w, _, sub = simplejpeg.decode_jpeg_header(f.data)
            assert (w, h, sub) == (d["width"], d["height"], SJ_SAMPLING[d["layout"]]), f.name
        opened += 1
    assert opened > 500


# ---------------------------------------------------------------------------------------
# Baseline corpus: coverage, and every file decodes


def test_quick_corpus_covers_the_baseline_features(quick):
    """Each layout, size class, table form, restart form and marker kind appears."""
    fs = [f.features for f in quick]
    layouts = {d["layout"] for d in fs}
    assert layouts == {"gray", "4:4:4", "4:2:2", "4:4:0", "4:2:0"}
    for lay in layouts:
        mine = [d for d in fs if d["layout"] == lay]
        hmax, vmax = max(c[1] for c in mine[0]["components"]), max(c[2] for c in
                                                                   mine[0]["components"])
        assert any(d["width"] % (8 * hmax) and d["height"] % (8 * vmax) for d in mine), lay
        assert any(d["optimized_huffman"] for d in mine), lay
    assert {d["sof"] for d in fs} == {M.SOF0, M.SOF1}
    assert all(d["precision"] == 8 and d["scans"] == 1 for d in fs)
    sizes = {(d["width"], d["height"]) for d in fs}
    for s in ((1, 1), (1, 2), (2, 1), (3, 5), (7, 9), (15, 17), (17, 15), (31, 33), (33, 31),
              (100, 75)):
        assert s in sizes, s
    quals = [d["quality"] for d in fs if d.get("quality")]
    assert {10, 50, 100} <= set(quals)
    assert sum(75 <= q <= 90 for q in quals) > len(quals) / 2
    # Restarts: by blocks and by rows, RST7 -> RST0 wrap, partial last interval, none needed.
    rst = [d for d in fs if d["restart_interval"]]
    assert any(d["rst_markers"] >= 8 for d in rst)
    assert any(d["rst_markers"] == 0 for d in rst)
    assert any(d["optimized_huffman"] for d in rst)
    assert {d.get("requested_layout") for d in rst} >= {"gray", "4:4:4", "4:2:2", "4:2:0"}
    # Tables: 16-bit DQT, mixed 8/16-bit, several tables per DQT and per DHT segment.
    assert any(16 in d["dqt_precisions"] for d in fs)
    big = [max(max(t) for t in jpeg_markers.quant_tables(f.data).values()) for f in quick
           if 16 in f.features["dqt_precisions"]]
    assert min(big) > 255 and max(big) <= 8191    # libjpeg-turbo's encoder is exact up to 8191
    assert any(set(d["dqt_precisions"]) == {8, 16} for d in fs)
    assert any(max(d["dqt_tables_per_segment"]) >= 2 for d in fs)
    assert any(max(d["dht_tables_per_segment"]) == 4 for d in fs)
    assert any(d["sof"] == M.SOF1 and 16 not in d["dqt_precisions"] for d in fs)
    # Markers a decoder must skip, and 0xFF fill bytes.
    assert any(d["com_markers"] for d in fs)
    assert any("APP1" in d["app_markers"] for d in fs)
    assert any("APP2" in d["app_markers"] for d in fs)
    assert any(not d["app_markers"] for d in fs)
    assert any(d["fill_bytes"] for d in fs)
    assert any(d["layout"] == "gray" and d["components"][0][1:3] == (2, 2) for d in fs)


def test_full_corpus_adds_real_files(full):
    """The JPEGs scikit-image ships are included as they are, Photoshop's layout among them."""
    shipped = {f.name: f.features for f in full if f.name.startswith("skimage-")}
    hubble = shipped.get("skimage-hubble_deep_field.jpg")
    if hubble is None:
        pytest.skip("scikit-image without hubble_deep_field.jpg")
    assert hubble["dqt_tables_per_segment"] == [2] and hubble["dht_tables_per_segment"] == [4]
    assert all(d["sof"] == M.SOF0 for d in shipped.values())


def _decode_all_ways(data, features):
    shape = (features["height"], features["width"], 3)
    for fast in (False, True):
        img = simplejpeg.decode_jpeg(data, colorspace="RGB", fastdct=fast, fastupsample=fast)
        assert img.shape == shape
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with Image.open(io.BytesIO(data)) as im:
            im.load()
            assert im.size == shape[1::-1]


@pytest.mark.parametrize("which", ["quick", "full", "photos"])
def test_every_baseline_file_decodes(which, request):
    """simplejpeg (strict: libjpeg warnings raise) fancy and fast, and Pillow, decode all."""
    files = request.getfixturevalue(which)
    for f in files:
        d = f.features
        assert d["sof"] in (M.SOF0, M.SOF1) and d["scans"] == 1 and d["precision"] == 8, f.name
        if which == "photos":
            img = simplejpeg.decode_jpeg(f.data, colorspace="RGB", fastdct=False,
                                         fastupsample=False)
            assert img.shape == (d["height"], d["width"], 3)
        else:
            _decode_all_ways(f.data, d)


def test_edits_decode_like_their_sources(quick):
    """Merged tables, moved tables, fill bytes and SOF1 relabelling change no pixel."""
    edits = [f for f in quick if f.name.startswith("edit-") and "8and16bit" not in f.name]
    assert len(edits) >= 5
    decoded = [simplejpeg.decode_jpeg(f.data, colorspace="RGB") for f in edits]
    for f, img in zip(edits, decoded):
        assert np.array_equal(img, decoded[0]), f.name


def test_photo_corpus(photos):
    """Whole photos, quality 75-90, 4:2:0 and 4:4:4 each, some optimised."""
    fs = [f.features for f in photos]
    assert len({d["source"] for d in fs}) >= 4
    assert {d["quality"] for d in fs} == {75, 80, 85, 90}
    assert {d["layout"] for d in fs} == {"4:2:0", "4:4:4"}
    assert any(d["optimized_huffman"] for d in fs) and not all(d["optimized_huffman"] for d in fs)
    assert any((d["width"], d["height"]) == (512, 512) for d in fs)
    assert [d["quality"] for d in (f.features for f in jc.photo_corpus((80, 82), 1))][:3] == \
        [80, 81, 82]


def test_files_of_picks_the_files_given_else_the_corpus_named(tmp_path):
    """What every testbench and bench decodes: the paths in ``files`` (a bench's FILEs), else
    the named corpus, at most ``limit`` of them, never an empty file."""
    quick = jc.baseline_corpus("quick")
    paths = []
    for n, f in enumerate(quick[:2]):
        paths.append(tmp_path / f"given{n}.jpg")
        paths[-1].write_bytes(f.data)
    (tmp_path / "empty.jpg").write_bytes(b"")
    given = files_of({"files": [str(p) for p in paths] + [str(tmp_path / "empty.jpg")],
                      "corpus": "photos"})
    assert given == [("given0.jpg", quick[0].data), ("given1.jpg", quick[1].data)]
    assert files_of({"limit": 3}) == [(f.name, f.data) for f in quick[:3]]
    assert [name for name, _ in files_of({"corpus": "shipped"})] == [
        name for name, _ in skimage_photos.shipped_jpegs()]


def test_heavy_corpus():
    """ImageNet-size photos (0.2-0.3 MP) at quality 90 as libjpeg writes them: its scaled IJG
    tables (Pillow's own at quality 90: the same scaling) and its standard Huffman tables,
    4:2:0 and 4:4:4 of each photo, every file decoded to its size by libjpeg-turbo."""
    heavy = jc.heavy_corpus()
    assert _snapshot(jc.heavy_corpus()) == _snapshot(heavy)
    low, high = jc.HEAVY_MEGAPIXELS
    buf = io.BytesIO()
    Image.new("RGB", (16, 16)).save(buf, "JPEG", quality=90)
    q90 = Image.open(buf).quantization
    assert len(heavy) >= 12 and len({f.features["source"] for f in heavy}) == len(heavy) // 2
    for f in heavy:
        d = f.features
        assert low <= d["width"] * d["height"] / 1e6 <= high, f.name
        assert d["encoder"].startswith("jpeglib") and d["quality"] == 90
        assert d["sof"] == M.SOF0 and not d["optimized_huffman"]
        assert d["layout"] == d["requested_layout"] in ("4:2:0", "4:4:4")
        assert Image.open(io.BytesIO(f.data)).quantization == q90, f.name
        img = simplejpeg.decode_jpeg(f.data, colorspace="RGB", fastdct=False,
                                     fastupsample=False)
        assert img.shape == (d["height"], d["width"], 3)
    assert {f.features["layout"] for f in heavy} == {"4:2:0", "4:4:4"}


# ---------------------------------------------------------------------------------------
# Unsupported corpus


def test_unsupported_files_are_what_they_claim(unsupported):
    """Each reason is visible in the bytes, and the rest of the file is valid."""
    by_reason = {}
    for f in unsupported.values():
        by_reason.setdefault(f.features["reason"], []).append(f)
    assert set(by_reason) == {"progressive", "arithmetic", "precision12", "cmyk",
                              "two_components", "multiscan", "dnl"}
    for f in by_reason["progressive"]:
        assert f.features["sof"] in PROGRESSIVE_SOF and f.features["scans"] > 1
    for f in by_reason["arithmetic"]:
        assert f.features["sof"] in ARITHMETIC_SOF and f.features["dht_segments"] == 0
    for f in by_reason["cmyk"]:
        assert len(f.features["components"]) == 4 and _pillow_view(f.data)["mode"] == "CMYK"
    for f in by_reason["multiscan"]:
        d = f.features
        assert d["sof"] == M.SOF0 and d["scans"] > 1
        assert sorted(sum(d["scan_components"], [])) == [c[0] for c in d["components"]]
        assert all(s == (0, 63, 0, 0) for s in d["spectral"])
    # Progressive, arithmetic, CMYK and multi-scan files are real: libjpeg-turbo decodes them.
    for reason in ("progressive", "arithmetic", "multiscan", "cmyk"):
        for f in by_reason[reason]:
            _check_against_pillow(f)
            with Image.open(io.BytesIO(f.data)) as im:
                im.load()

    (p12,) = by_reason["precision12"]
    assert p12.features["precision"] == 12 and p12.features["sof"] == M.SOF1
    with pytest.raises(ValueError, match="precision 12"):
        simplejpeg.decode_jpeg(p12.data)
    as8 = jpeg_making.sof_field(p12.data, jpeg_making.SOF_P, 8, ">B")   # the edit undone decodes cleanly
    simplejpeg.decode_jpeg(as8, colorspace="RGB")

    (dnl,) = by_reason["dnl"]
    d = dnl.features
    assert d["height"] == 0 and d["dnl"] > 0
    restored = jpeg_making.sof_field(jpeg_making.remove_markers(dnl.data, {M.DNL}), jpeg_making.SOF_Y, d["dnl"])
    assert simplejpeg.decode_jpeg(restored, colorspace="RGB").shape[:2] == (d["dnl"], d["width"])

    (two,) = by_reason["two_components"]
    d = two.features
    assert len(d["components"]) == 2 and d["scan_components"] == [[1], [2]]
    three = next(f for f in by_reason["multiscan"] if f.features["scans"] == 3)
    for k in range(2):                             # its scans are the 3-scan file's, verbatim
        a, b = jpeg_making.scan_span(two.data, k), jpeg_making.scan_span(three.data, k)
        assert two.data[a[0]:a[1]] == three.data[b[0]:b[1]]
    for f in (p12, dnl, two):
        with pytest.raises(Exception):
            _pillow_view(f.data)


# ---------------------------------------------------------------------------------------
# Malformed corpus

# (simplejpeg strict, simplejpeg lenient, Pillow) as observed with simplejpeg 1.9 and
# Pillow 13 (both libjpeg-turbo 3.x). "error": raises; "ok": returns an image.  Pillow
# never surfaces libjpeg's warnings, and emits no Python warning for any of these.
E, OK = "error", "ok"
LIBJPEG = {
    "truncated-after-soi": (E, E, E), "truncated-mid-dqt": (E, E, E),
    "truncated-mid-sof": (E, E, E), "truncated-mid-dht": (E, E, E),
    "truncated-before-sos": (E, E, E),
    "truncated-mid-scan": (E, OK, E),              # lenient libjpeg pads with zeros
    "truncated-missing-eoi": (E, OK, E),
    "corrupt_scan-flipped-bytes": (OK, OK, OK),    # undetectable: decodes to other pixels
    "corrupt_scan-early-eoi": (E, OK, OK),
    "corrupt_scan-unexpected-rst": (E, OK, OK),
    "corrupt_scan-restart-out-of-order": (E, OK, OK),
    "corrupt_scan-restart-missing": (E, OK, OK),
    "bad_length-length-0": (E, E, E), "bad_length-length-1": (E, E, OK),
    "bad_length-length-past-end": (E, E, E), "bad_length-dqt-short": (E, E, E),
    "bad_length-sof-long": (E, E, E),
    "missing_dht-missing-dht": (OK, OK, OK),       # libjpeg-turbo substitutes Annex K tables
    "missing_dht-missing-dht-optimised": (E, OK, OK),
    "missing_dqt-missing-dqt": (E, E, E), "missing_tables-abbreviated": (E, E, E),
    "huffman_mismatch-huffman-swapped": (E, OK, OK),
    "huffman_mismatch-huffman-swapped-optimised": (E, OK, OK),
    "bad_huffman_table-oversubscribed": (E, E, E),
    "undefined_table-undefined-huffman": (E, E, E), "undefined_table-undefined-quant": (E, E, E),
    "bad_quant_table-zero-quant-value": (OK, OK, OK),   # nobody checks Qk >= 1
    "zero_width-zero-width": (E, E, E), "zero_height-zero-height": (E, E, E),
    "oversize-65535x65535": (E, E, E),             # Pillow: DecompressionBombError
    "bad_frame-precision9": (E, E, E), "bad_frame-sampling-0": (E, E, E),
    "bad_frame-sampling-5": (E, E, E), "bad_frame-duplicate-sof": (E, E, E),
    "bad_scan-sos-unknown-component": (E, E, E), "bad_scan-sos-spectral": (E, OK, OK),
    "no_soi-no-soi": (E, E, E), "garbage-empty": (E, E, E), "garbage-random": (E, E, E),
    "garbage-soi-then-random": (E, E, E),
}


def _outcome(fn):
    try:
        fn()
    except Exception:
        return E
    return OK


def _pillow_load(data):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with Image.open(io.BytesIO(data)) as im:
            im.load()


def test_malformed_recorded_library_behaviour(malformed):
    """What libjpeg-turbo does with each file, so a change of library shows up here."""
    assert set(malformed) == set(LIBJPEG)
    seen = {}
    for name, f in malformed.items():
        seen[name] = (
            _outcome(lambda: simplejpeg.decode_jpeg(f.data, colorspace="RGB", strict=True)),
            _outcome(lambda: simplejpeg.decode_jpeg(f.data, colorspace="RGB", strict=False)),
            _outcome(lambda: _pillow_load(f.data)))
    assert seen == LIBJPEG


def test_malformed_files_are_really_malformed(malformed):
    """Where libjpeg accepts a file, the walker or the tables show the fault."""
    reasons = {f.features["reason"] for f in malformed.values()}
    assert {"truncated", "corrupt_scan", "bad_length", "missing_dht", "missing_dqt",
            "huffman_mismatch", "zero_width", "zero_height", "oversize", "no_soi",
            "garbage"} <= reasons
    for name, f in malformed.items():
        d = f.features
        assert d["edit"] and d["base"], name
        if d["reason"] in ("truncated", "bad_length", "no_soi", "garbage"):
            with pytest.raises(jpeg_markers.JpegSyntaxError):
                jpeg_markers.describe(f.data)
    m = {n: f.features for n, f in malformed.items()}
    assert m["missing_dht-missing-dht"]["dht_segments"] == 0
    assert m["bad_quant_table-zero-quant-value"]["dqt_segments"] == 2
    assert 0 in jpeg_markers.quant_tables(malformed["bad_quant_table-zero-quant-value"].data)[0]
    assert m["corrupt_scan-unexpected-rst"]["restart_interval"] == 0
    assert m["corrupt_scan-unexpected-rst"]["rst_markers"] == 1
    assert m["zero_width-zero-width"]["width"] == 0
    assert m["zero_height-zero-height"]["height"] == 0
    assert m["zero_height-zero-height"]["dnl"] is None
    assert (m["oversize-65535x65535"]["width"], m["oversize-65535x65535"]["height"]) == (65535,) * 2
    # The flipped file differs from the base (missing-eoi plus its EOI) in 3 scan bytes.
    flipped = malformed["corrupt_scan-flipped-bytes"].data
    base = malformed["truncated-missing-eoi"].data + M.EOI.bytes
    s0, s1 = jpeg_making.scan_span(base)
    assert len(flipped) == len(base)
    diff = [i for i in range(len(base)) if flipped[i] != base[i]]
    assert len(diff) == 3 and all(s0 <= i < s1 for i in diff)
