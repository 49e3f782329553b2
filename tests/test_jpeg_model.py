"""The JPEG golden model decodes real files exactly as libjpeg-turbo does (simplejpeg)."""

import io
import os

import numpy as np
import pytest
import simplejpeg
import skimage

from dlforge.rtl.jpeg.status import JpegStatus as S
from dlforge.rtl.jpeg.syntax import Marker
from dlforge.sim.models.jpeg_model import JpegDecodeError, decode
from jpeg_files import encode, photo

SIZES = [(1, 1), (2, 1), (1, 2), (3, 5), (5, 3), (8, 8), (9, 7), (16, 16), (17, 15), (31, 33),
         (64, 48), (101, 67)]
SUBSAMPLING = {0: "4:4:4", 1: "4:2:2", 2: "4:2:0"}


def reference(data, mode):
    return simplejpeg.decode_jpeg(data, colorspace="RGB", fastdct=False,
                                  fastupsample=(mode == "fast"))


def assert_exact(data, mode):
    got = decode(data, mode).pixels
    ref = reference(data, mode)
    assert got.shape == ref.shape
    bad = np.argwhere(got != ref)
    assert bad.size == 0, f"{len(bad)} values differ, first at {bad[0].tolist()}"


@pytest.mark.parametrize("subsampling", [0, 1, 2], ids=SUBSAMPLING.get)
@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_colour_layouts_and_odd_sizes(subsampling, size):
    w, h = size
    for quality, extra in ((75, {}), (90, {"restart_marker_blocks": 2}), (60, {"optimize": True})):
        data = encode(photo("astronaut")[100:100 + h, 200:200 + w], quality=quality,
                      subsampling=subsampling, **extra)
        for mode in ("fancy", "fast"):
            assert_exact(data, mode)


@pytest.mark.parametrize("mode", ["fancy", "fast"])
def test_full_size_photos(mode):
    for name, subsampling in (("astronaut", 2), ("coffee", 1), ("chelsea", 0), ("rocket", 2)):
        assert_exact(encode(photo(name), quality=85, subsampling=subsampling), mode)


def test_grayscale_and_restart_rows():
    for size in ((1, 1), (13, 7), (512, 512)):
        w, h = size
        for extra in ({}, {"restart_marker_rows": 1}, {"optimize": True, "quality": 95}):
            assert_exact(encode(photo("camera")[:h, :w], **extra), "fancy")


def test_sixteen_bit_quant_tables_sof1():
    """Quant values above 255 make libjpeg write SOF1 with 16-bit DQT entries."""
    table = [min(8191, 16 * (1 + (k % 8) + (k // 8)) * 3) for k in range(64)]
    data = encode(photo("coffee")[:67, :91], qtables=[table, table], subsampling=2)
    assert Marker.SOF1.bytes in data
    for mode in ("fancy", "fast"):
        assert_exact(data, mode)


def test_real_jpeg_files_shipped_with_scikit_image():
    folder = os.path.join(os.path.dirname(skimage.__file__), "data")
    files = [f for f in ("rocket.jpg", "retina.jpg", "hubble_deep_field.jpg")
             if os.path.exists(os.path.join(folder, f))]
    assert files, "scikit-image ships no JPEG files here"
    decoded = 0
    for name in files:
        with open(os.path.join(folder, name), "rb") as f:
            data = f.read()
        try:
            got = decode(data, "fancy").pixels
        except JpegDecodeError as error:
            assert error.status.unsupported, f"{name}: {error}"
            continue
        assert (got == reference(data, "fancy")).all(), name
        decoded += 1
    assert decoded >= 1


def test_unsupported_and_malformed_files_raise_with_a_status():
    data = encode(photo("coffee")[:64, :64], quality=80)
    progressive = encode(photo("coffee")[:64, :64], quality=80, progressive=True)
    with pytest.raises(JpegDecodeError) as info:
        decode(progressive)
    assert info.value.status == S.UNSUPPORTED_PROGRESSIVE
    for cut in (len(data) - 2, len(data) - 60):
        with pytest.raises(JpegDecodeError) as info:
            decode(data[:cut])
        assert info.value.status == S.TRUNCATED
    # Bytes after EOI are not part of the image: decoding stops at EOI and says where.
    padded = decode(data + b"\x00garbage")
    assert padded.end == len(data) and (padded.pixels == decode(data).pixels).all()


def test_damaged_scans_are_caught():
    data = encode(photo("astronaut")[:64, :64], quality=85)
    scan = data.index(Marker.SOS.bytes) + 14
    middle = scan + (len(data) - scan) // 2
    with pytest.raises(JpegDecodeError) as info:               # EOI in the middle of the scan
        decode(data[:middle] + Marker.EOI.bytes)
    assert info.value.status == S.TRUNCATED
    with pytest.raises(JpegDecodeError) as info:               # a stray restart marker
        decode(data[:middle] + Marker.RST0.bytes + data[middle:])
    assert info.value.status == S.BAD_RESTART
    # Random byte damage: a status whenever the damage is visible, never a crash or overrun.
    rng = np.random.default_rng(1)
    outcomes = []
    for _ in range(60):
        bad = bytearray(data)
        for k in rng.integers(scan, len(data) - 2, 4):
            bad[k] = rng.integers(0, 256)
        try:
            decode(bytes(bad))
            outcomes.append(S.OK)
        except JpegDecodeError as error:
            assert error.status.malformed, error
            outcomes.append(error.status)
    assert any(o != S.OK for o in outcomes)


# --- The shared corpus (sim/corpus/jpeg_corpus.py): every layout, size and table feature, real encoders.

from dlforge.sim.corpus import jpeg_corpus

UNSUPPORTED_STATUS = {
    "progressive": S.UNSUPPORTED_PROGRESSIVE, "arithmetic": S.UNSUPPORTED_ARITHMETIC,
    "precision12": S.UNSUPPORTED_PRECISION, "cmyk": S.UNSUPPORTED_COMPONENTS,
    "two_components": S.UNSUPPORTED_COMPONENTS, "multiscan": S.UNSUPPORTED_MULTISCAN,
    "dnl": S.UNSUPPORTED_DNL, "lossless": S.UNSUPPORTED_LOSSLESS,
}


@pytest.mark.parametrize("mode", ["fancy", "fast"])
def test_quick_corpus_bit_exact(mode):
    files = jpeg_corpus.baseline_corpus("quick")
    layouts = {f.features["layout"] for f in files}
    assert {"gray", "4:4:4", "4:2:2", "4:4:0", "4:2:0"} <= layouts
    for f in files:
        got = decode(f.data, mode).pixels
        assert (got == reference(f.data, mode)).all(), f.name


@pytest.mark.slow
def test_full_corpus_bit_exact():
    for f in jpeg_corpus.baseline_corpus("full"):
        for mode in ("fancy", "fast"):
            assert (decode(f.data, mode).pixels == reference(f.data, mode)).all(), (f.name, mode)


@pytest.mark.slow
def test_photo_corpus_bit_exact():
    for f in jpeg_corpus.photo_corpus():
        assert (decode(f.data, "fancy").pixels == reference(f.data, "fancy")).all(), f.name


def test_unsupported_corpus_statuses():
    for f in jpeg_corpus.unsupported_corpus():
        with pytest.raises(JpegDecodeError) as info:
            decode(f.data)
        assert info.value.status == UNSUPPORTED_STATUS[f.features["reason"]], f.name


def test_malformed_corpus_never_decodes_silently_wrong():
    """Each malformed file gets a malformed status, except damage that leaves a decodable
    stream (flipped scan bytes, a zero quant value, swapped Huffman tables that still parse);
    those must decode exactly as libjpeg-turbo does, and a zero height is routed to the
    CPU fallback as "DNL"."""
    decoded = []
    for f in jpeg_corpus.malformed_corpus():
        try:
            pixels = decode(f.data).pixels
        except JpegDecodeError as error:
            assert error.status.malformed or error.status in (
                S.UNSUPPORTED_DNL, S.UNSUPPORTED_PRECISION, S.TOO_LARGE), (f.name, error)
            continue
        decoded.append(f.name)
        assert (pixels == reference(f.data, "fancy")).all(), f.name
    assert len(decoded) <= 4, decoded


def test_fill_byte_before_a_stuffed_ff_is_data():
    """``FF FF 00`` in a scan is a fill byte and a stuffed FF (libjpeg's fill_bit_buffer),
    not a marker 00; the hardware's unstuffer reads it the same way."""
    data = encode(photo("chelsea")[:48, :64], quality=95, subsampling=2)
    start = data.index(Marker.SOS.bytes)
    k = data.index(b"\xff\x00", start + 14)
    filled = data[:k] + b"\xff" + data[k:]
    assert (decode(filled).pixels == decode(data).pixels).all()
    assert (decode(filled).pixels == reference(filled, "fancy")).all()


# ---- scaled decoding (DCT-domain downscale) -----------------------------------------------------

def scaled_reference(data, scale, mode="fancy"):
    """libjpeg-turbo's scaled decode through simplejpeg, which takes the coarsest scale whose
    output is at least ceil(size / scale): exactly 1/scale, unless a coarser one gives the
    same size (:func:`_ambiguous`)."""
    width, height = simplejpeg.decode_jpeg_header(data)[1::-1]
    assert not _ambiguous(width, height, scale)
    return simplejpeg.decode_jpeg(data, colorspace="RGB", fastdct=False,
                                  fastupsample=(mode == "fast"),
                                  min_width=-(-width // scale), min_height=-(-height // scale))


def _ambiguous(w, h, scale):
    """Whether another of libjpeg-turbo's M/8 scales gives the same output size as 1/scale
    (tiny images), so that simplejpeg may pick it."""
    def size(m):
        return -(-w * m // 8), -(-h * m // 8)
    return any(size(m) == size(8 // scale) for m in range(1, 9) if m != 8 // scale)


@pytest.mark.parametrize("scale", [2, 4, 8])
@pytest.mark.parametrize("subsampling", [0, 1, 2], ids=SUBSAMPLING.get)
def test_scaled_decode_matches_libjpeg_turbo(subsampling, scale):
    """1/2, 1/4 and 1/8 of every colour layout at odd sizes, with restarts and optimised
    tables, both upsampling modes: bit-exact to libjpeg-turbo's own scaled decode."""
    for w, h in [size for size in SIZES + [(333, 211)] if not _ambiguous(*size, scale)]:
        for quality, extra in ((75, {}), (92, {"restart_marker_blocks": 3}),
                               (55, {"optimize": True})):
            data = encode(photo("astronaut")[50:50 + h, 100:100 + w], quality=quality,
                          subsampling=subsampling, **extra)
            for mode in ("fancy", "fast"):
                got = decode(data, mode, scale=scale).pixels
                ref = scaled_reference(data, scale, mode)
                assert got.shape == ref.shape == (-(-h // scale), -(-w // scale), 3)
                assert np.array_equal(got, ref), (w, h, quality, mode)


def test_scaled_decode_of_greyscale_and_real_files():
    from PIL import Image
    grey = encode(photo("camera")[:123, :77], quality=85)
    files = [grey]
    for name in ("rocket.jpg", "retina.jpg"):
        with open(os.path.join(os.path.dirname(skimage.__file__), "data", name), "rb") as f:
            files.append(f.read())
    for data in files:
        for scale in (2, 4, 8):
            got = decode(data, scale=scale).pixels
            assert np.array_equal(got, scaled_reference(data, scale))
            # Pillow's draft asks libjpeg-turbo for the same scale
            image = Image.open(io.BytesIO(data))
            image.draft("RGB", (image.width // scale, image.height // scale))
            assert image.size == got.shape[1::-1]
            assert np.array_equal(np.asarray(image.convert("RGB")), got)


def test_chroma_is_scaled_in_the_idct_not_upsampled():
    """At 1/2 a 4:2:0 file's chroma gets the 8x8 IDCT and the luma a 4x4 one (jdmaster.c);
    4:2:2 keeps chroma at 4x4 (vertical doubling does not divide) and upsamples it."""
    from dlforge.sim.models.jpeg_model import component_sizes
    from dlforge.sim.models.jpeg_parse import parse_headers
    for subsampling, want in ((2, {2: [4, 8, 8], 4: [2, 4, 4], 8: [1, 2, 2]}),
                              (1, {2: [4, 4, 4], 4: [2, 2, 2], 8: [1, 1, 1]}),
                              (0, {2: [4, 4, 4], 4: [2, 2, 2], 8: [1, 1, 1]})):
        data = encode(photo("astronaut")[:40, :40], quality=80, subsampling=subsampling)
        headers = parse_headers(data, 4096, 4096)
        for scale, sizes in want.items():
            assert component_sizes(headers, scale) == sizes


def test_bad_scale_is_refused():
    data = encode(photo("astronaut")[:16, :16], quality=80)
    with pytest.raises(ValueError, match="scale must be one of"):
        decode(data, scale=3)
