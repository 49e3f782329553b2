"""The link protocol's frames on the host side: round trips whatever the chunking, and damage
(flipped, dropped, inserted bytes) never yields a wrong frame: a damaged payload comes back
flagged with its tag, a damaged header is skipped and the next frame is found."""

import random

import pytest

from dlforge.rtl.link.protocol import (HEADER_BYTES, MAX_PAYLOAD, FrameDecoder, Opcode, Status,
                                       encode_frame)


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
