"""Huffman decoding against libjpeg's own coefficients (jpeglib.read_dct)."""

import jpeglib
import pytest

from dlforge.rtl.jpeg.syntax import Marker
from dlforge.sim.models.jpeg_entropy import lookup_table, split_entropy_segments
from dlforge.sim.models.jpeg_model import decode_coefficients
from dlforge.sim.models.jpeg_parse import HuffmanTable
from jpeg_files import encode, photo


def test_lookup_table_is_canonical():
    # Codes: 'a'=0 (1 bit), 'b'=10, 'c'=110, 'd'=111 (3 bits).
    table = HuffmanTable((1, 1, 2) + (0,) * 13, b"abcd")
    lut = lookup_table(table)
    assert lut[0x0000] >> 8 == 1 and lut[0x0000] & 0xFF == ord("a")
    assert lut[0x8000] & 0xFF == ord("b") and lut[0xBFFF] >> 8 == 2
    assert lut[0xC000] & 0xFF == ord("c") and lut[0xFFFF] & 0xFF == ord("d")
    sparse = lookup_table(HuffmanTable((0, 1) + (0,) * 14, b"x"))    # only '00'
    assert sparse[0x4000] == 0                                        # '01' matches nothing


def test_stuffing_fill_bytes_and_restarts_are_split():
    data = (b"\x12\xff\x00\x34" + Marker.RST0.bytes + b"\x56\xff" + Marker.RST1.bytes + b"\x78"
            + Marker.EOI.bytes)                  # a stuffed FF, a fill byte before RST1
    segments, end = split_entropy_segments(data, 0)
    assert [(s, r) for s, _, r in segments] == [(b"\x12\xff\x34", ("rst", 0)), (b"\x56", ("rst", 1)),
                                                (b"\x78", ("end", Marker.EOI))]
    assert data[end:end + 2] == Marker.EOI.bytes
    segments, end = split_entropy_segments(b"\x12\xff", 0)
    assert segments == [(b"\x12", 0, ("eof", None))] and end == 2


CASES = [
    ("astronaut", (130, 97), {"quality": 90, "subsampling": 2}),
    ("astronaut", (64, 64), {"quality": 75, "subsampling": 1, "restart_marker_blocks": 5}),
    ("coffee", (99, 51), {"quality": 95, "subsampling": 0, "optimize": True}),
    ("camera", (77, 45), {"quality": 50, "restart_marker_rows": 1}),
]


@pytest.mark.parametrize("name, size, options", CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_coefficients_match_libjpeg(tmp_path, name, size, options):
    w, h = size
    data = encode(photo(name)[:h, :w], **options)
    path = tmp_path / "f.jpg"
    path.write_bytes(data)
    ref = jpeglib.read_dct(str(path))
    headers, blocks, end = decode_coefficients(data)
    assert end == len(data)
    refs = [ref.Y] + ([ref.Cb, ref.Cr] if ref.has_chrominance else [])
    assert len(refs) == len(blocks)
    for mine, theirs in zip(blocks, refs):
        bv, bh = theirs.shape[:2]
        assert (mine[:bv, :bh] == theirs).all()
    for c, qt_index in zip(headers.components, ref.quant_tbl_no):
        assert (headers.quant[c.tq] == ref.qt[qt_index]).all()
