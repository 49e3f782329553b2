"""The link protocol's frames on the host side: round trips whatever the chunking, and damage
(flipped, dropped, inserted bytes) never yields a wrong frame: a damaged payload comes back
flagged with its tag, a damaged header is skipped and the next frame is found."""

import random
import shutil
import subprocess

import pytest

from dlforge.rtl.link.protocol import HEADER_BYTES, MAX_PAYLOAD, Opcode, Status, encode_frame
from dlforge.host.link.frame_parser import FrameDecoder


def _frames(rng, count):
    return [(rng.choice(list(Opcode)), rng.randrange(1 << 16),
             rng.randbytes(rng.choice([0, 1, 7, 100, MAX_PAYLOAD])), rng.randrange(3))
            for _ in range(count)]


def _feed(decoder, data, rng):
    out = []
    pos = 0
    while pos < len(data):
        step = rng.randint(1, 300)
        out += decoder.feed(data[pos:pos + step])
        pos += step
    return out


def test_round_trip_in_any_chunking():
    rng = random.Random(1)
    frames = _frames(rng, 60)
    stream = rng.randbytes(5) + b"".join(encode_frame(op, tag, pl, st)
                                         for op, tag, pl, st in frames)
    decoder = FrameDecoder()
    got = _feed(decoder, stream, rng)
    assert [(f.opcode, f.tag, f.payload, f.status) for f in got] == \
        [(int(op), tag, pl, st) for op, tag, pl, st in frames]
    assert decoder.dropped_bytes == 5 and decoder.bad_payloads == 0


@pytest.mark.parametrize("seed", range(3))
def test_damage_never_gives_a_wrong_frame(seed):
    rng = random.Random(seed)
    frames = _frames(rng, 200)
    encoded = [encode_frame(op, tag, pl, st) for op, tag, pl, st in frames]
    stream = bytearray()
    damaged = set()
    for n, data in enumerate(encoded):
        data = bytearray(data)
        fault = rng.random()
        if fault < 0.1:                                  # flip a bit
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
            damaged.add(n)
        elif fault < 0.15:                               # drop a byte
            del data[rng.randrange(len(data))]
            damaged.add(n)
        elif fault < 0.2:                                # junk before the frame
            stream += rng.randbytes(rng.randint(1, 20))
        stream += data
    decoder = FrameDecoder()
    got = _feed(decoder, bytes(stream), rng)
    wanted = {(int(op), tag, pl, st) for op, tag, pl, st in frames}
    good = [f for f in got if f.status != Status.BAD_CRC]
    # every frame that comes back intact is one that was sent, in order
    assert all((f.opcode, f.tag, f.payload, f.status) in wanted for f in good)
    # every undamaged frame after the first damage's recovery is found again
    intact = [n for n in range(len(frames)) if n not in damaged]
    found = {(f.opcode, f.tag, f.payload) for f in good}
    lost = [n for n in intact if (int(frames[n][0]), frames[n][1], frames[n][2]) not in found]
    assert len(lost) <= 2 * len(damaged)       # a damaged length can swallow the next frame
    assert decoder.bad_headers + decoder.bad_payloads >= 1


def test_encoder_refuses_what_cannot_be_sent():
    with pytest.raises(ValueError, match="max_payload"):
        encode_frame(Opcode.PING, 1, bytes(MAX_PAYLOAD + 1))
    with pytest.raises(ValueError, match="uint16"):
        encode_frame(Opcode.PING, 1 << 16)
    assert len(encode_frame(Opcode.PING, 0)) == HEADER_BYTES + 4


@pytest.mark.parametrize("w", [1, 4, 8, 16, 32, 64])
def test_wide_frames_are_padded_sections(w):
    """The wide-link layout written out independently of encode_frame: header, payload and
    CRC sections padded to whole beats, the CRC over the padded payload."""
    import zlib
    from dlforge.rtl.link.protocol import LINK_WIDTHS, frame_bytes
    assert w in LINK_WIDTHS
    for length in [0, 1, w - 1, w, w + 1, 3 * w + 5]:
        payload = bytes(range(length % 256)) * (length // 256 + 1)
        payload = payload[:max(length, 0)]
        frame = encode_frame(0x10, 0x1234, payload, status=0x21, link_bytes=w)
        head = -(-12 // w) * w
        body = -(-length // w) * w
        tail = -(-4 // w) * w
        assert len(frame) == head + body + tail == frame_bytes(length, w)
        assert frame[:12] == encode_frame(0x10, 0x1234, payload, status=0x21)[:12]
        assert frame[12:head] == bytes(head - 12)
        assert frame[head:head + length] == payload
        assert frame[head + length:head + body] == bytes(body - length)
        crc = int.from_bytes(frame[head + body:head + body + 4], "little")
        assert crc == zlib.crc32(payload + bytes(body - length))
        assert frame[head + body + 4:] == bytes(tail - 4)


@pytest.mark.parametrize("w", [4, 32])
def test_wide_decoder_hunts_on_beat_boundaries(w):
    import random
    rng = random.Random(w)
    frames = [(0x10 + n, n, rng.randbytes(rng.randrange(0, 3 * w))) for n in range(20)]
    stream = bytearray()
    for op, tag, payload in frames:
        stream += bytes([0x5A, 0xA5]) + rng.randbytes(w - 2)          # a magic, bad header
        stream += encode_frame(op, tag, payload, link_bytes=w)
    decoder = FrameDecoder(link_bytes=w)
    got = []
    for k in range(0, len(stream), 7):                                # any chunking
        got += decoder.feed(bytes(stream[k:k + 7]))
    assert [(f.opcode, f.tag, f.payload, f.status) for f in got] == \
        [(op, tag, payload, 0) for op, tag, payload in frames]
    # a frame that starts off a beat boundary is not a frame
    off = FrameDecoder(link_bytes=w)
    assert off.feed(bytes(1) + encode_frame(1, 2, b"x", link_bytes=w) + bytes(w - 1)) == []


def test_the_header_table_places_every_field():
    """HEADER_FIELDS is where encode_frame puts each field, and what check_header reads."""
    from dlforge.rtl.link.protocol import (FIELDS_AT, HCRC_AT, HEADER_FIELD, HEADER_FIELDS, MAGIC,
                                           check_header, crc16)
    frame = encode_frame(Opcode.JPEG_END, 0xBEEF, bytes(0x0203), status=0x21, seq=0x9C,
                         max_payload=1 << 16)
    want = {"magic": MAGIC, "opcode": bytes([Opcode.JPEG_END]), "status": b"\x21",
            "tag": (0xBEEF).to_bytes(2, "little"), "length": (0x0203).to_bytes(3, "little"),
            "seq": b"\x9c", "hcrc": crc16(frame[FIELDS_AT:HCRC_AT]).to_bytes(2, "little")}
    assert [f.name for f in HEADER_FIELDS] == list(want)
    assert {f.name: frame[f.at:f.at + f.size] for f in HEADER_FIELDS} == want
    assert HEADER_FIELD["hcrc"].at + HEADER_FIELD["hcrc"].size == HEADER_BYTES
    assert check_header(frame, 0, 1 << 16) == (Opcode.JPEG_END, 0x21, 0xBEEF, 0x0203, 0x9C)


@pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler")
def test_the_c_header_matches(tmp_path):
    """The simulated board's harness compiles the frame contract from protocol.c_header: its
    constants are the table's."""
    from dlforge.rtl.link.protocol import (BARRIER_TAG, FIELDS_AT, FIELDS_BYTES, FIRST_DATA_TAG,
                                           HEADER_FIELDS, MAGIC, MAX_LENGTH, TAG_BITS,
                                           TRAILER_BYTES, c_header)
    (tmp_path / "frame_protocol.h").write_text(c_header())
    fields = ", ".join(f"frame::{f.name.upper()}_AT, frame::{f.name.upper()}_BYTES"
                       for f in HEADER_FIELDS)
    ops = ", ".join(f"frame::OP_{op.name}" for op in Opcode)
    (tmp_path / "probe.cpp").write_text(f"""
#include "frame_protocol.h"
#include <cstdio>
#include <initializer_list>
void line(std::initializer_list<unsigned long> values) {{
    for (unsigned long v : values) std::printf("%lu ", v);
    std::printf("\\n");
}}
int main() {{
    line({{frame::MAGIC[0], frame::MAGIC[1], frame::HEADER_BYTES, frame::TRAILER_BYTES}});
    line({{{fields}}});
    line({{frame::FIELDS_AT, frame::FIELDS_BYTES, frame::LENGTH_MASK, frame::SEQ_SHIFT}});
    line({{frame::TAG_BITS, frame::BARRIER_TAG, frame::FIRST_DATA_TAG}});
    line({{{ops}}});
}}
""")
    subprocess.run(["g++", "-std=c++17", "-Wall", "-Werror", "-o", "probe", "probe.cpp"],
                   cwd=tmp_path, check=True)
    out = subprocess.run([str(tmp_path / "probe")], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    got = [[int(v) for v in line.split()] for line in out]
    assert got == [[*MAGIC, HEADER_BYTES, TRAILER_BYTES],
                   [v for f in HEADER_FIELDS for v in (f.at, f.size)],
                   [FIELDS_AT, FIELDS_BYTES, MAX_LENGTH, 24],
                   [TAG_BITS, BARRIER_TAG, FIRST_DATA_TAG],
                   [int(op) for op in Opcode]]
