"""The islow IDCT golden model (sim/models/idct_model.py) checked against real JPEG decoders.

Three references, each for what it is good for (docs/idct-reference.md has the findings):

* libjpeg-turbo through simplejpeg (SIMD, AVX2/SSE2) and Pillow: bit-exact on real photos
  at any quality, odd sizes, progressive files and 16-bit (SOF1) quant tables.
* IJG libjpeg 8d/9f, the portable C code that jpeglib bundles: bit-exact on every block,
  corrupt ones included (``ISLOW_MULT_TYPE`` is ``int`` there, as in the model).
* libjpeg-turbo's SIMD IDCT works in 16-bit lanes (pmullw, paddw, packssdw, packsswb), so on
  corrupt blocks it differs from the C arithmetic; a numpy emulation of the AVX2 routine
  below reproduces it exactly and shows the differences appear only where 16-bit
  arithmetic overflows or the output leaves [-512, 511].

Coefficients and quant tables from ``jpeglib.read_dct`` are in natural (row-major) order;
tests below verify that against the file bytes rather than assuming it.
"""

import contextlib
import io
import os
import platform
import subprocess
import sys

import jpeglib
import numpy as np
import pytest
import simplejpeg
import skimage.data
from PIL import Image

from dlforge.rtl.jpeg import idct_constants as K
from dlforge.rtl.jpeg.syntax import Marker, is_sof, segment_body, walk_segments
from dlforge.sim.models.idct_model import dequantize, idct_islow, idct_islow_raw, range_limit_table

# ---------------------------------------------------------------------------------------
# Helpers: images, files, block assembly


def _gray(name):
    a = getattr(skimage.data, name)()
    if a.ndim == 3:
        a = np.asarray(Image.fromarray(a).convert("L"))
    return np.ascontiguousarray(a)


@pytest.fixture(scope="module")
def photos():
    """Real grayscale photos shipped with scikit-image (no downloads)."""
    return {n: _gray(n) for n in ("camera", "astronaut", "coffee", "chelsea", "rocket")}


def _pillow_jpeg(gray, **kw):
    buf = io.BytesIO()
    Image.fromarray(gray).save(buf, format="JPEG", **kw)
    return buf.getvalue()


def _read_dct(data, tmp_path, name="x.jpg"):
    path = tmp_path / name
    path.write_bytes(data)
    return jpeglib.read_dct(str(path))


def _to_blocks(img, bv, bh):
    """(bv*8, bh*8) image -> (bv, bh, 8, 8) blocks."""
    return img.reshape(bv, 8, bh, 8).transpose(0, 2, 1, 3)


def _from_blocks(blocks, h, w):
    """(bv, bh, 8, 8) blocks -> image cropped to h x w."""
    bv, bh = blocks.shape[:2]
    return blocks.transpose(0, 2, 1, 3).reshape(bv * 8, bh * 8)[:h, :w]


def _model_decode(dct):
    """Decode a one-component JPEG from its coefficients with the golden model."""
    Y = dct.Y
    h, w = dct.height, dct.width
    assert Y.dtype == np.int16
    assert Y.shape == (-(-h // 8), -(-w // 8), 8, 8)     # (blocks_v, blocks_h, 8, 8)
    assert dct.quant_tbl_no[0] == 0
    return _from_blocks(idct_islow(Y, dct.qt[0]), h, w)


def _simplejpeg(data):
    return simplejpeg.decode_jpeg(data, colorspace="GRAY", fastdct=False)[..., 0]


def _pillow(data):
    return np.asarray(Image.open(io.BytesIO(data)))


def _segments(data):
    """(marker, payload) of every marker segment up to the first SOS."""
    return [(marker, segment_body(data, offset, length))
            for marker, offset, length in walk_segments(data)]


def _dqt_tables(data):
    """{Tq: (Pq, natural-order 8x8 table)} parsed from the DQT segments (zigzag in the file)."""
    tables = {}
    for marker, p in _segments(data):
        if marker != Marker.DQT:
            continue
        i = 0
        while i < len(p):
            pq, tq = p[i] >> 4, p[i] & 15
            n = 2 if pq else 1
            zz = [int.from_bytes(p[i + 1 + n * k:i + 1 + n * (k + 1)], "big") for k in range(64)]
            nat = np.zeros(64, dtype=np.int64)
            nat[list(K.ZIGZAG)] = zz
            tables[tq] = (pq, nat.reshape(8, 8))
            i += 1 + 64 * n
    return tables


def _sof_markers(data):
    return [m for m, _ in _segments(data) if is_sof(m)]


#: libjpeg-turbo's AVX2/SSE2 IDCT (and the emulation of it below) is x86-only.
X86 = platform.machine().lower() in ("x86_64", "amd64")

#: Table K.1 of ITU-T T.81, the luminance table libjpeg scales by quality (natural order).
STD_LUMA = np.array([
    16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55,
    14, 13, 16, 24, 40, 57, 69, 56, 14, 17, 22, 29, 51, 87, 80, 62,
    18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113, 92,
    49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99,
]).reshape(8, 8)


# ---------------------------------------------------------------------------------------
# Unit checks of the model's pieces


def _jdmaster_range_limit():
    """The post-IDCT part of jdmaster.c's prepare_range_limit_table, built as the C does.

    table = alloc((5 * (MAXJSAMPLE+1) + CENTERJSAMPLE)); table += MAXJSAMPLE+1;
    memset(table - 256, 0, 256); table[i] = i for 0..255; table += CENTERJSAMPLE;
    table[i] = 255 for i in 128..511; memset(table + 512, 0, 384);
    memcpy(table + 896, sample_range_limit, 128).  The IDCT indexes table[x & 1023].
    """
    buf = np.full(5 * 256 + 128, -1, dtype=np.int64)
    base = 256                                   # cinfo->sample_range_limit
    buf[base - 256:base] = 0
    buf[base:base + 256] = np.arange(256)
    idct = base + 128                            # IDCT_range_limit = sample_range_limit + 128
    buf[idct + 128:idct + 512] = 255
    buf[idct + 512:idct + 512 + 384] = 0
    buf[idct + 896:idct + 1024] = buf[base:base + 128]
    table = buf[idct:idct + 1024]
    assert len(buf) == idct + 1024 and (table >= 0).all()
    return table


def test_range_limit_table_matches_jdmaster():
    """The model's 1024-entry table is exactly the one libjpeg builds, entry by entry."""
    ref = _jdmaster_range_limit()
    assert np.array_equal(range_limit_table(), ref)
    xs = range(-2048, 2048)
    assert [K.range_limit(x) for x in xs] == [int(ref[x & 1023]) for x in xs]


def test_zigzag_table():
    """K.ZIGZAG is the T.81 Figure A.6 order (generated here by walking the anti-diagonals)."""
    order = []
    for s in range(15):
        cells = [(r, s - r) for r in range(8) if 0 <= s - r < 8]
        order += [r * 8 + c for r, c in (cells if s % 2 else cells[::-1])]
    assert tuple(order) == K.ZIGZAG


def test_all_zero_block_is_mid_grey():
    """Zero coefficients give raw 0 and samples 128 whatever the quant table."""
    z = np.zeros((3, 8, 8), dtype=np.int16)
    q = np.full((8, 8), 65535, dtype=np.uint16)
    assert np.all(idct_islow_raw(z, q) == 0)
    assert np.all(idct_islow(z, q) == 128)


@pytest.mark.parametrize("q", [1, 7, 255, 16383])
def test_dc_only_blocks(q):
    """A DC-only block is flat: raw = (4*dq + 16) >> 5 = (dq + 4) >> 3, sample = table lookup."""
    dc = np.arange(-32768, 32768, 37, dtype=np.int64)
    coefs = np.zeros((dc.size, 8, 8), dtype=np.int16)
    coefs[:, 0, 0] = dc
    quant = np.full((8, 8), 3, dtype=np.uint16)
    quant[0, 0] = q
    raw = idct_islow_raw(coefs, quant)
    expect = (dc * q + 4) >> 3
    assert np.array_equal(raw, np.broadcast_to(expect[:, None, None], raw.shape))
    table = _jdmaster_range_limit()
    samples = idct_islow(coefs, quant)
    assert np.array_equal(samples, np.broadcast_to(table[expect & 1023][:, None, None], raw.shape))
    inside = np.abs(expect) <= 128                         # plain level shift near zero
    assert np.array_equal(samples[inside, 0, 0], np.clip(expect[inside] + 128, 0, 255))


def test_extreme_dequantisation_is_exact():
    """-32768 * 65535 = -2147450880 fits a C int; the model keeps it exact and then follows C.

    DC-only: dcval = (int)(dq << 2) wraps to 131072 in the work array, raw = 4096, and
    4096 & 1023 = 0 gives mid grey.  Other positions go through the odd/even parts in 64-bit
    JLONG; a literal transcription of jidctint.c agrees on all of them.
    """
    coefs = np.zeros((1, 8, 8), dtype=np.int16)
    coefs[0, 0, 0] = -32768
    quant = np.full((8, 8), 65535, dtype=np.uint16)
    assert dequantize(coefs, quant)[0, 0, 0] == -2147450880
    assert np.all(idct_islow_raw(coefs, quant) == 4096)
    assert np.all(idct_islow(coefs, quant) == 128)
    for pos in range(64):
        for value in (-32768, 32767):
            c = np.zeros((8, 8), dtype=np.int16)
            c.flat[pos] = value
            raw, samples = _c_islow(c, quant)
            assert np.array_equal(idct_islow_raw(c, quant), raw), (pos, value)
            assert np.array_equal(idct_islow(c, quant), samples), (pos, value)


def test_model_matches_c_transcription_on_random_extreme_blocks():
    """Full-range random blocks (incl. the C zero-column/zero-row shortcuts) agree with C."""
    rng = np.random.default_rng(1180)
    n = 120
    coefs = rng.integers(-32768, 32768, size=(n, 8, 8)).astype(np.int16)
    coefs[: n // 3, 1:, :] = 0                               # columns AC-free: column shortcut
    sparse = rng.random((n // 3, 8, 8)) < 0.9
    coefs[n // 3: 2 * n // 3][sparse] = 0                    # some zero rows in pass 2
    quants = rng.integers(0, 65536, size=(n, 8, 8)).astype(np.uint16)
    raw = idct_islow_raw(coefs, quants)
    samples = idct_islow(coefs, quants)
    for b in range(n):
        r, s = _c_islow(coefs[b], quants[b])
        assert np.array_equal(raw[b], r), b
        assert np.array_equal(samples[b], s), b


@pytest.mark.parametrize("coefs, quant", [
    (np.full((8, 8), 32768, dtype=np.int64), np.ones((8, 8), dtype=np.uint16)),
    (np.full((8, 8), -32769, dtype=np.int64), np.ones((8, 8), dtype=np.uint16)),
    (np.zeros((8, 8), dtype=np.int16), np.full((8, 8), 65536, dtype=np.int64)),
    (np.zeros((8, 8), dtype=np.int16), np.full((8, 8), -1, dtype=np.int64)),
])
def test_model_rejects_out_of_range_inputs(coefs, quant):
    """JCOEF is 16-bit signed and quant values 16-bit unsigned; anything else is refused."""
    with pytest.raises(ValueError):
        idct_islow(coefs, quant)


# ---------------------------------------------------------------------------------------
# A literal transcription of jidctint.c (one block, Python ints), for the unit checks

_FIX = {name: getattr(K, name) for name in dir(K) if name.startswith("FIX_")}


def _i32(x):
    """C ``(int)`` of a 64-bit JLONG: keep the low 32 bits, two's complement."""
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _i16(x):
    return ((x + (1 << 15)) & 0xFFFF) - (1 << 15)


def _c_1d(x, descale):
    """One even/odd butterfly exactly as written in jidctint.c (JLONG = Python int)."""
    F = _FIX
    z2, z3 = x[2], x[6]
    z1 = (z2 + z3) * F["FIX_0_541196100"]
    tmp2 = z1 + z3 * -F["FIX_1_847759065"]
    tmp3 = z1 + z2 * F["FIX_0_765366865"]
    z2, z3 = x[0], x[4]
    tmp0 = (z2 + z3) << K.CONST_BITS
    tmp1 = (z2 - z3) << K.CONST_BITS
    tmp10, tmp13, tmp11, tmp12 = tmp0 + tmp3, tmp0 - tmp3, tmp1 + tmp2, tmp1 - tmp2
    tmp0, tmp1, tmp2, tmp3 = x[7], x[5], x[3], x[1]
    z1, z2, z3, z4 = tmp0 + tmp3, tmp1 + tmp2, tmp0 + tmp2, tmp1 + tmp3
    z5 = (z3 + z4) * F["FIX_1_175875602"]
    tmp0 *= F["FIX_0_298631336"]
    tmp1 *= F["FIX_2_053119869"]
    tmp2 *= F["FIX_3_072711026"]
    tmp3 *= F["FIX_1_501321110"]
    z1 *= -F["FIX_0_899976223"]
    z2 *= -F["FIX_2_562915447"]
    z3 *= -F["FIX_1_961570560"]
    z4 *= -F["FIX_0_390180644"]
    z3 += z5
    z4 += z5
    tmp0 += z1 + z3
    tmp1 += z2 + z4
    tmp2 += z2 + z3
    tmp3 += z1 + z4
    out = [tmp10 + tmp3, tmp11 + tmp2, tmp12 + tmp1, tmp13 + tmp0,
           tmp13 - tmp0, tmp12 - tmp1, tmp11 - tmp2, tmp10 - tmp3]
    return [_i32((o + (1 << (descale - 1))) >> descale) for o in out]   # (int)DESCALE(o, n)


def _c_islow(coef, quant, mult16=False):
    """jpeg_idct_islow for one block: (raw 8x8 before the range limit, samples 8x8).

    ``mult16`` makes ISLOW_MULT_TYPE ``short`` as in libjpeg-turbo builds WITH_SIMD
    (jmorecfg.h: MULTIPLIER short), so quant values above 32767 turn negative.
    """
    c = [int(v) for v in np.asarray(coef).ravel()]
    q = [int(v) for v in np.asarray(quant).ravel()]
    if mult16:
        q = [_i16(v) for v in q]
    table = _jdmaster_range_limit()
    ws = [0] * 64
    for col in range(8):                                   # pass 1: columns
        if all(c[8 * r + col] == 0 for r in range(1, 8)):  # AC terms all zero
            dcval = _i32((c[col] * q[col]) << K.PASS1_BITS)
            for r in range(8):
                ws[8 * r + col] = dcval
            continue
        out = _c_1d([c[8 * r + col] * q[8 * r + col] for r in range(8)], K.PASS1_DESCALE)
        for r in range(8):
            ws[8 * r + col] = out[r]
    raw = np.zeros((8, 8), dtype=np.int64)
    for r in range(8):                                     # pass 2: rows
        row = ws[8 * r:8 * r + 8]
        if all(v == 0 for v in row[1:]):
            raw[r, :] = _i32((row[0] + (1 << (K.PASS1_BITS + 2))) >> (K.PASS1_BITS + 3))
        else:
            raw[r, :] = _c_1d(row, K.PASS2_DESCALE)
    return raw, table[raw & K.RANGE_MASK].astype(np.uint8)


# ---------------------------------------------------------------------------------------
# Real photos through libjpeg-turbo


@pytest.mark.parametrize("quality", [10, 50, 75, 90, 100])
def test_photos_match_libjpeg_turbo(photos, tmp_path, quality):
    """Every pixel of every photo equals simplejpeg's (islow) and Pillow's decode."""
    for name, img in photos.items():
        data = _pillow_jpeg(img, quality=quality)
        dct = _read_dct(data, tmp_path)
        assert (dct.height, dct.width) == img.shape
        ours = _model_decode(dct)
        assert np.array_equal(ours, _simplejpeg(data)), name
        assert np.array_equal(ours, _pillow(data)), name


@pytest.mark.parametrize("options", [{"progressive": True}, {"optimize": True}])
def test_progressive_and_optimised_files(photos, tmp_path, options):
    """Progressive and Huffman-optimised files carry the same coefficients; same pixels."""
    img = photos["chelsea"]
    data = _pillow_jpeg(img, quality=85, **options)
    ours = _model_decode(_read_dct(data, tmp_path))
    assert np.array_equal(ours, _simplejpeg(data))


CROPS = [  # (image, top, left, height, width, quality)
    ("camera", 0, 0, 1, 1, 75), ("camera", 200, 300, 1, 1, 10),
    ("astronaut", 10, 20, 9, 8, 90), ("astronaut", 100, 7, 8, 9, 50),
    ("coffee", 33, 44, 17, 23, 75), ("coffee", 5, 5, 23, 17, 100),
    ("chelsea", 100, 150, 101, 67, 50), ("rocket", 0, 0, 67, 101, 90),
    ("rocket", 211, 333, 1, 37, 75), ("camera", 400, 12, 41, 1, 100),
    ("chelsea", 0, 0, 299, 451, 10), ("coffee", 1, 3, 15, 15, 100),
]


@pytest.mark.parametrize("crop", CROPS, ids=[f"{c[0]}-{c[3]}x{c[4]}-q{c[5]}" for c in CROPS])
def test_odd_sizes(photos, tmp_path, crop):
    """Partial edge blocks: libjpeg pads them, the model decodes the padding, the crop matches."""
    name, top, left, h, w, quality = crop
    img = np.ascontiguousarray(photos[name][top:top + h, left:left + w])
    data = _pillow_jpeg(img, quality=quality)
    ours = _model_decode(_read_dct(data, tmp_path))
    assert ours.shape == (h, w)
    assert np.array_equal(ours, _simplejpeg(data))
    assert np.array_equal(ours, _pillow(data))


SIXTEEN_BIT_TABLES = {
    "std_x3": STD_LUMA * 3,                              # 30..363: a few entries need 16 bits
    "std_x20": STD_LUMA * 20,                            # 200..2420
    "std_x50_capped": np.minimum(STD_LUMA * 50, 32767),  # 500..6050
    "x1000": np.minimum(STD_LUMA * 1000, 65535),         # capped at 32767; all coefs round
                                                         # to 0: the SOF1/DQT syntax only
    # High frequencies x300 (up to 36300 -> 32767), low ones standard.  See the test.
    "hf_x300": np.where(np.add.outer(np.arange(8), np.arange(8)) > 6, STD_LUMA * 300, STD_LUMA),
}


@pytest.mark.parametrize("table_name", list(SIXTEEN_BIT_TABLES))
def test_sixteen_bit_quant_tables(photos, tmp_path, table_name):
    """Tables with entries > 255 make Pillow/libjpeg write SOF1 and a Pq=1 DQT.

    libjpeg's jpeg_add_quant_table (force_baseline FALSE) limits entries to 32767.  The model
    always equals IJG libjpeg's portable C decode, and equals libjpeg-turbo's SIMD decode
    (simplejpeg, Pillow) for every table except ``hf_x300``: libjpeg-turbo's encoder keeps
    8 * q in 16 bits (jcdctmgr.c compute_reciprocal), so entries above 8191 quantise with
    ((8q) mod 65536) / 8, e.g. 16500 -> 116.  A few coefficients come out +-1 where 0 was
    due, and their reconstruction reaches +-4000, far outside [-512, 511]: the C table wraps
    those values modulo 1024, the SIMD code saturates them (pass 1's packssdw, then the
    final pack).  Only such blocks differ.
    """
    table = SIXTEEN_BIT_TABLES[table_name]
    expect = np.minimum(table, 32767)
    differing = 0
    for name in ("camera", "coffee"):
        img = photos[name]
        data = _pillow_jpeg(img, qtables=[table.ravel().tolist()])
        assert _sof_markers(data) == [Marker.SOF1]              # extended sequential
        (pq, file_table), = _dqt_tables(data).values()
        assert pq == 1 and np.array_equal(file_table, expect)
        dct = _read_dct(data, tmp_path)
        assert np.array_equal(dct.qt[0], expect) and dct.qt.dtype == np.uint16
        ours = _model_decode(dct)
        with _libjpeg("9f"):
            c = jpeglib.read_spatial(str(tmp_path / "x.jpg"), dct_method=jpeglib.JDCT_ISLOW)
        assert np.array_equal(ours, c.spatial[..., 0]), name
        lib = _simplejpeg(data)
        assert np.array_equal(lib, _pillow(data)), name          # both libjpeg-turbo SIMD
        if table_name != "hf_x300":
            assert np.array_equal(ours, lib), name
            continue
        bv, bh = dct.Y.shape[:2]                                 # whole blocks: 512x512, 400x600
        differ = _diff_blocks(_to_blocks(ours, bv, bh), _to_blocks(lib, bv, bh)).ravel()
        raw = idct_islow_raw(dct.Y, dct.qt[0]).reshape(-1, 8, 8)
        outside = np.any((raw < -512) | (raw > 511), axis=(1, 2))
        assert not differ[~outside].any(), name
        differing += differ.sum()
        if X86:
            emu, safe = simd_idct_islow(dct.Y.reshape(-1, 8, 8), dct.qt[0])
            assert np.array_equal(emu, _to_blocks(lib, bv, bh).reshape(-1, 8, 8)), name
            assert np.array_equal(~safe, outside), name          # unsafe = C beyond +-512
    if table_name == "hf_x300":
        assert differing > 0


def test_baseline_file_is_sof0_with_8bit_table(photos):
    """Control for the test above: ordinary quality settings give SOF0 and Pq=0."""
    data = _pillow_jpeg(photos["camera"], quality=75)
    assert _sof_markers(data) == [Marker.SOF0]
    assert _dqt_tables(data)[0][0] == 0


# ---------------------------------------------------------------------------------------
# jpeglib's array orders, verified


def test_jpeglib_qt_is_natural_order(photos, tmp_path):
    """jpeglib's qt equals the DQT table de-zigzagged, and Pillow's qtables are natural too."""
    ramp = np.arange(1, 65).reshape(8, 8)
    data = _pillow_jpeg(photos["camera"], qtables=[ramp.ravel().tolist()])
    dct = _read_dct(data, tmp_path)
    assert np.array_equal(_dqt_tables(data)[0][1], ramp)        # file bytes are zigzag
    assert np.array_equal(dct.qt[0], ramp)                      # jpeglib: natural, row-major
    assert dct.qt.shape == (1, 8, 8)
    data = _pillow_jpeg(photos["camera"], quality=75)
    assert np.array_equal(_read_dct(data, tmp_path).qt[0], _dqt_tables(data)[0][1])


def test_jpeglib_coefficients_are_natural_row_major(photos, tmp_path):
    """Y[by, bx, v, u] is F(v=vertical, u=horizontal frequency) of block (by, bx).

    At quality 100 (all quant values 1) the stored coefficients are the FDCT of the level
    shifted pixels; libjpeg's integer FDCT is within 1 of the float one.  The transposed
    reading is far off, and decoding transposed blocks no longer reproduces the image.
    """
    from dlforge.sim.models.ieee1180 import reference_fdct

    img = photos["camera"]
    data = _pillow_jpeg(img, quality=100)
    dct = _read_dct(data, tmp_path)
    assert np.all(dct.qt[0] == 1)
    bv, bh = img.shape[0] // 8, img.shape[1] // 8
    ref = reference_fdct(_to_blocks(img.astype(np.int64) - 128, bv, bh))
    Y = dct.Y.astype(np.int64)
    assert np.abs(Y - ref).max() <= 1
    assert np.abs(np.swapaxes(Y, -1, -2) - ref).max() > 100
    swapped = _from_blocks(idct_islow(np.swapaxes(dct.Y, -1, -2), dct.qt[0]), *img.shape)
    assert not np.array_equal(swapped, _simplejpeg(data))


# ---------------------------------------------------------------------------------------
# Corrupt / out-of-range blocks: portable C vs libjpeg-turbo's SIMD


def _wrap16(x):
    return ((x + (1 << 15)) & 0xFFFF) - (1 << 15)


def _wrap32(x):
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _simd_1d(v, descale, flags):
    """One dodct pass of jidctint-avx2.asm / -sse2.asm on int16 lanes (v: (N, 8, 8) int64).

    16-bit paddw/psubw for in0 +- in4, in7 + in3, in5 + in1; pmaddwd products with the
    combined constants; 32-bit paddd; psrad; packssdw saturates the result to int16.
    ``flags["overflow"]`` (N,) records blocks where any of those steps lost information.
    """
    i = [v[..., k] for k in range(8)]                  # each (N, 8)

    def lossy(exact, kept):
        flags["overflow"] |= np.any(exact != kept, axis=-1)
        return kept

    F054, F076, F184 = K.FIX_0_541196100, K.FIX_0_765366865, K.FIX_1_847759065
    F117, F196, F039 = K.FIX_1_175875602, K.FIX_1_961570560, K.FIX_0_390180644
    F029, F089, F150 = K.FIX_0_298631336, K.FIX_0_899976223, K.FIX_1_501321110
    F205, F256, F307 = K.FIX_2_053119869, K.FIX_2_562915447, K.FIX_3_072711026
    tmp3 = i[2] * (F054 + F076) + i[6] * F054          # pmaddwd with combined constants
    tmp2 = i[2] * F054 + i[6] * (F054 - F184)
    tmp0 = lossy(i[0] + i[4], _wrap16(i[0] + i[4])) << K.CONST_BITS
    tmp1 = lossy(i[0] - i[4], _wrap16(i[0] - i[4])) << K.CONST_BITS
    tmp10, tmp13, tmp11, tmp12 = tmp0 + tmp3, tmp0 - tmp3, tmp1 + tmp2, tmp1 - tmp2
    z3 = lossy(i[7] + i[3], _wrap16(i[7] + i[3]))
    z4 = lossy(i[5] + i[1], _wrap16(i[5] + i[1]))
    z3p = z3 * (F117 - F196) + z4 * F117
    z4p = z3 * F117 + z4 * (F117 - F039)
    o0 = i[7] * (F029 - F089) + i[1] * -F089 + z3p
    o1 = i[5] * (F205 - F256) + i[3] * -F256 + z4p
    o2 = i[5] * -F256 + i[3] * (F307 - F256) + z3p
    o3 = i[7] * -F089 + i[1] * (F150 - F089) + z4p
    outs = [tmp10 + o3, tmp11 + o2, tmp12 + o1, tmp13 + o0,
            tmp13 - o0, tmp12 - o1, tmp11 - o2, tmp10 - o3]
    res = []
    for o in outs:
        o = o + (1 << (descale - 1))
        d = lossy(o, _wrap32(o)) >> descale            # paddd wraps, psrad
        res.append(lossy(d, np.clip(d, -32768, 32767)))  # packssdw
    return np.stack(res, axis=-1)


def simd_idct_islow(coefs, quant):
    """Numpy emulation of libjpeg-turbo's jsimd_idct_islow_avx2 (and _sse2): samples + flags.

    coefs (N, 8, 8) int16, quant (8, 8) natural order.  Returns (samples uint8 (N, 8, 8),
    safe bool (N,)), where ``safe`` means no 16-bit wrap or saturation happened and the
    pass-2 values stayed in [-512, 511]; for such blocks the C arithmetic gives the same.
    """
    c = np.asarray(coefs, dtype=np.int64)
    q = np.asarray(quant, dtype=np.int64)
    n = c.shape[0]
    flags = {"overflow": np.zeros(n, dtype=bool)}
    exact = c * q
    dq = _wrap16(exact)                                      # pmullw: low 16 bits
    flags["overflow"] |= np.any(dq != exact, axis=(1, 2))
    ws = np.swapaxes(_simd_1d(np.swapaxes(dq, -1, -2), K.PASS1_DESCALE, flags), -1, -2)
    # Block-level shortcut: rows 1..7 of the coefficients all zero -> psllw dq, PASS1_BITS.
    shortcut = ~np.any(c[:, 1:, :] != 0, axis=(1, 2))
    dc = dq[:, :1, :] << K.PASS1_BITS
    short_ws = np.broadcast_to(_wrap16(dc), dq.shape)
    flags["overflow"] |= shortcut & np.any(_wrap16(dc) != dc, axis=(1, 2))
    ws = np.where(shortcut[:, None, None], short_ws, ws)
    raw = _simd_1d(ws, K.PASS2_DESCALE, flags)               # packssdw to int16
    samples = (np.clip(raw, -128, 127) + 128).astype(np.uint8)  # packsswb, paddb 128
    safe = ~flags["overflow"] & np.all((raw >= -512) & (raw <= 511), axis=(1, 2))
    return samples, safe


@contextlib.contextmanager
def _libjpeg(version):
    """Switch jpeglib's bundled libjpeg build and restore the previous one."""
    old = jpeglib.version.get()
    jpeglib.version.set(version)
    try:
        yield
    finally:
        if old:
            jpeglib.version.set(old)


def _write_coefficients(base, path, Y, qt):
    """Write Y/qt into a copy of ``base`` as an arithmetic-coded file (SOF9).

    libjpeg's Huffman encoder refuses |AC| > 1023 (JERR_BAD_DCT_COEF); its arithmetic
    coder carries any coefficient down to -32767, with DC differences within +-32767.
    """
    dc = Y[..., 0, 0].astype(np.int64).ravel()
    assert np.abs(np.diff(dc)).max(initial=0) <= 32767 and np.abs(dc[0]) <= 32767
    with _libjpeg("turbo210"):
        dct = jpeglib.read_dct(str(base))
        dct.Y = Y.astype(np.int16)
        q = dct.qt.copy()
        q[0] = qt
        dct.qt = q
        dct.write_dct(str(path), flags=["+ARITH_CODE"])
        back = jpeglib.read_dct(str(path))
        assert np.array_equal(back.Y, Y) and np.array_equal(back.qt[0], qt)
    return path.read_bytes()


@pytest.fixture(scope="module")
def corrupt_files(tmp_path_factory):
    """Files whose lower half holds extreme blocks; the upper half keeps real photo blocks.

    Returns {case: (path, Y, qt, valid)} where ``valid`` marks untouched blocks decoded with
    the file's original (baseline-range) table.
    """
    tmp = tmp_path_factory.mktemp("corrupt")
    img = np.ascontiguousarray(_gray("camera")[192:320, 192:320])        # 16 x 16 blocks
    base = tmp / "base.jpg"
    base.write_bytes(_pillow_jpeg(img, quality=75))
    dct = jpeglib.read_dct(str(base))
    Y0, q0 = dct.Y.astype(np.int64), dct.qt[0].copy()
    rng = np.random.default_rng(20240601)
    low = np.s_[8:]                                                      # block rows 8..15
    valid = np.ones(Y0.shape[:2], dtype=bool)
    valid[low] = False

    def big(n):                                     # +-2047 .. +-32767
        return rng.choice([-1, 1], n) * rng.integers(2047, 32768, n)

    cases = {}
    Y = Y0.copy()                                   # a few huge AC terms per block
    pos = rng.random(Y[low].shape) < 8 / 63
    pos[..., 0, 0] = False
    Y[low][pos] = big(pos.sum())
    cases["sparse_ac"] = (Y, q0, valid)
    Y = Y0.copy()                                   # every coefficient random, full range
    Y[low] = rng.integers(-32767, 32768, size=Y[low].shape)
    Y[low][..., 0, 0] //= 2
    cases["all_random"] = (Y, q0, valid)
    Y = Y0.copy()                                   # DC only, a sorted sweep of the DC range
    Y[low] = 0
    Y[low][..., 0, 0] = np.sort(rng.integers(-32500, 32501, size=Y[low][..., 0, 0].size)
                                ).reshape(Y[low][..., 0, 0].shape)
    cases["dc_only"] = (Y, q0, valid)
    Y = Y0.copy()                                   # first row only: SIMD's psllw shortcut
    Y[low][..., 1:, :] = 0
    Y[low][..., 0, 1:] = rng.integers(-32767, 32768, size=Y[low][..., 0, 1:].shape)
    cases["row0_only"] = (Y, q0, valid)
    none = np.zeros_like(valid)                     # a large table touches every block
    cases["quant_15bit"] = (Y0, rng.integers(256, 32768, size=(8, 8)), none)
    cases["quant_16bit"] = (Y0, rng.integers(256, 65536, size=(8, 8)), none)

    out = {}
    for name, (Y, qt, ok) in cases.items():
        path = tmp / f"{name}.jpg"
        _write_coefficients(base, path, Y, np.asarray(qt, dtype=np.uint16))
        out[name] = (path, Y.astype(np.int16), np.asarray(qt, dtype=np.uint16), ok)
    return out


def _decode_blocks(data, bv, bh):
    return _to_blocks(_simplejpeg(data), bv, bh)


def _diff_blocks(a, b):
    return np.any(a != b, axis=(-1, -2))


def test_corrupt_blocks_match_portable_c_libjpeg(corrupt_files):
    """IJG libjpeg 8d/9f (portable C, ISLOW_MULT_TYPE int) equal the model on every block."""
    for name, (path, Y, qt, _) in corrupt_files.items():
        ours = idct_islow(Y, qt)
        for version in ("8d", "9f"):
            with _libjpeg(version):
                theirs = jpeglib.read_spatial(str(path), dct_method=jpeglib.JDCT_ISLOW)
            theirs = _to_blocks(theirs.spatial[..., 0], *Y.shape[:2])
            assert np.array_equal(theirs, ours), (name, version)



def test_corrupt_blocks_vs_libjpeg_turbo_simd(corrupt_files):
    """simplejpeg's SIMD islow equals the model on valid blocks and differs on corrupt ones.

    The SIMD code dequantises with pmullw (low 16 bits of coef * quant), adds in 16 bits,
    saturates every pass output with packssdw and the final sample with packsswb, where
    the C code multiplies in int, keeps 64-bit JLONG sums, truncates the work array to int
    and wraps the result modulo 1024 through the range-limit table.  The emulation above
    reproduces the library bit for bit; wherever it reports no 16-bit overflow and a pass-2
    value inside [-512, 511], model and library agree, and every difference is elsewhere.
    """
    for name, (path, Y, qt, valid) in corrupt_files.items():
        lib = _decode_blocks(path.read_bytes(), *Y.shape[:2])
        ours = idct_islow(Y, qt)
        differ = _diff_blocks(ours, lib)
        assert not differ[valid].any(), name
        assert differ.any(), name                # the finding: extreme blocks do differ
        if not X86:
            continue
        emu, safe = simd_idct_islow(Y.reshape(-1, 8, 8), qt)
        assert np.array_equal(emu, lib.reshape(-1, 8, 8)), name
        assert not differ.ravel()[safe].any(), name
        assert np.array_equal(_diff_blocks(ours.reshape(-1, 8, 8), emu), differ.ravel())


def _decode_in_subprocess(paths, env_var, out):
    """Decode with simplejpeg in a fresh process with a JSIMD_* override set to 1."""
    script = ("import sys, numpy as np, simplejpeg\n"
              "imgs = [simplejpeg.decode_jpeg(open(p, 'rb').read(), colorspace='GRAY',"
              " fastdct=False)[..., 0] for p in sys.argv[2:]]\n"
              "np.savez(sys.argv[1], *imgs)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("JSIMD_")}
    env[env_var] = "1"
    subprocess.run([sys.executable, "-c", script, str(out), *map(str, paths)],
                   env=env, check=True, timeout=120)
    with np.load(out) as z:
        return [z[f"arr_{i}"] for i in range(len(paths))]


@pytest.mark.skipif(not X86, reason="JSIMD_FORCE* and the AVX2/SSE2 emulation are x86-only")
def test_libjpeg_turbo_sse2_and_c_paths(corrupt_files, tmp_path):
    """libjpeg-turbo's other two islow paths, selected with its JSIMD_FORCE* variables.

    SSE2 does the same 16-bit arithmetic as AVX2.  The C path (JSIMD_FORCENONE) equals the
    model except where a quant value exceeds 32767: SIMD builds compile jidctint.c with
    MULTIPLIER short, so such a value acts as value - 65536; the transcription with a short
    multiplier reproduces those blocks too.
    """
    names = list(corrupt_files)
    paths = [corrupt_files[n][0] for n in names]
    sse2 = _decode_in_subprocess(paths, "JSIMD_FORCESSE2", tmp_path / "sse2.npz")
    plain_c = _decode_in_subprocess(paths, "JSIMD_FORCENONE", tmp_path / "c.npz")
    for name, a, c in zip(names, sse2, plain_c):
        _, Y, qt, _ = corrupt_files[name]
        bv, bh = Y.shape[:2]
        emu, _ = simd_idct_islow(Y.reshape(-1, 8, 8), qt)
        assert np.array_equal(_to_blocks(a, bv, bh).reshape(-1, 8, 8), emu), name
        c = _to_blocks(c, bv, bh)
        ours = idct_islow(Y, qt)
        if qt.max() <= 32767:
            assert np.array_equal(c, ours), name
        else:
            differ = _diff_blocks(c, ours)
            assert differ.any(), name
            for by, bx in zip(*np.nonzero(differ)):
                assert np.array_equal(_c_islow(Y[by, bx], qt, mult16=True)[1], c[by, bx])


# Hand-made blocks whose outcome is worked out in the comments (quant: DC 1, (0, 1) 65535,
# everything else 2).  Each row: coefficients {(v, u): value}, then the model's and the SIMD
# library's output, as one value for a flat block or as the row every block row repeats.
EXAMPLES = [
    # DC 1000: raw 125, no overflow anywhere -> both 253.
    ({(0, 0): 1000}, 253, 253),
    # DC 8000: raw 1000 is outside [-512, 511].  C: table[1000 & 1023] = table[-24] = 104;
    # SIMD: 8000 << 2 = 32000 fits int16, pass 2 gives 1000, packsswb saturates -> 255.
    ({(0, 0): 8000}, 104, 255),
    # DC 16000: C raw 2000 -> table[976] = 80.  SIMD takes its rows-1..7-are-zero shortcut:
    # psllw 16000 << 2 = 64000 wraps to -1536, pass 2 gives -48 -> 80.  Two wraps, one answer.
    ({(0, 0): 16000}, 80, 80),
    # The same plus (7, 7) = 1: no shortcut, pass 1 runs and packssdw saturates 64000 to 32767,
    # pass 2 gives about 1024 -> 255.  C still wraps 2000 -> 80.
    ({(0, 0): 16000, (7, 7): 1}, 80, 255),
    # (0, 1) = 1 with quant 65535: C dequantises to 65535 and the row swings +-11363 (wrapped
    # by the table); pmullw keeps the low 16 bits, -1, which is nothing after descaling.
    ({(0, 1): 1}, [227, 255, 255, 255, 0, 0, 0, 29], 128),
]


def test_worked_examples(tmp_path):
    """Concrete corrupt blocks, decoded by the model, libjpeg 9f (C) and simplejpeg (SIMD)."""
    qt = np.full((8, 8), 2, dtype=np.uint16)
    qt[0, 0], qt[0, 1] = 1, 65535
    Y = np.zeros((1, len(EXAMPLES), 8, 8), dtype=np.int64)
    for b, (coefs, _, _) in enumerate(EXAMPLES):
        for (v, u), value in coefs.items():
            Y[0, b, v, u] = value
    img = np.zeros((8, 8 * len(EXAMPLES)), dtype=np.uint8)
    base = tmp_path / "base.jpg"
    base.write_bytes(_pillow_jpeg(img, quality=75))
    data = _write_coefficients(base, tmp_path / "examples.jpg", Y, qt)
    ours = idct_islow(Y.astype(np.int16), qt)[0]
    lib = _decode_blocks(data, 1, len(EXAMPLES))[0]
    with _libjpeg("9f"):
        c = jpeglib.read_spatial(str(tmp_path / "examples.jpg"), dct_method=jpeglib.JDCT_ISLOW)
    assert np.array_equal(_to_blocks(c.spatial[..., 0], 1, len(EXAMPLES))[0], ours)
    for b, (_, model_value, simd_value) in enumerate(EXAMPLES):
        assert np.all(ours[b] == np.asarray(model_value)), b
        assert np.all(lib[b] == np.asarray(simd_value)), b
    if X86:
        emu, safe = simd_idct_islow(Y[0], qt)
        assert np.array_equal(emu, lib)
        assert list(safe) == [True, False, False, False, False]
