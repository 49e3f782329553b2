"""Huffman decoding of one interleaved baseline scan into quantised coefficient blocks.

Table-driven like the hardware: a 16-bit look-ahead indexes a table of (code length,
symbol).  Restart intervals are checked exactly (RSTn numbering, MCU counts), DC prediction is
reset at each, and the scan must end on a marker.
"""

import numpy as np

from dlforge.rtl.jpeg.idct_constants import ZIGZAG
from dlforge.rtl.jpeg.status import JpegDecodeError, JpegStatus as S
from dlforge.rtl.jpeg.syntax import Marker, is_rst

__all__ = ["lookup_table", "decode_scan", "split_entropy_segments", "blocks_in_scan_order"]

_NATURAL = np.array(ZIGZAG)


def lookup_table(table):
    """65536 entries indexed by the next 16 bits: (length << 8 | symbol), or 0 for no code."""
    lut = np.zeros(1 << 16, dtype=np.int32)
    for length, code, symbol in table.codes():
        first = code << (16 - length)
        lut[first:first + (1 << (16 - length))] = (length << 8) | symbol
    return lut


def split_entropy_segments(data, start):
    """Unstuffed entropy-coded segments between markers, and where the scan ends.

    Returns ([(bytes, offset of its first byte, terminator)], offset of the marker that ends
    the scan, or len(data)).  A terminator is ("rst", n), ("end", marker code) or
    ("eof", None) when the data runs out: the same tokens the hardware's unstuffer emits.
    """
    segments = []
    current = bytearray()
    seg_start = pos = start
    n = len(data)
    while True:
        nxt = data.find(b"\xff", pos)
        if nxt < 0:
            current += data[pos:]
            segments.append((bytes(current), seg_start, ("eof", None)))
            return segments, n
        current += data[pos:nxt]
        q = nxt + 1
        while q < n and data[q] == 0xFF:      # fill bytes before a marker
            q += 1
        if q >= n:
            segments.append((bytes(current), seg_start, ("eof", None)))
            return segments, n
        code = data[q]
        if code == 0x00:                      # FF 00 (after any fill): a data byte FF
            current.append(0xFF)
            pos = q + 1
        elif is_rst(code):
            segments.append((bytes(current), seg_start, ("rst", code - Marker.RST0)))
            current = bytearray()
            pos = seg_start = q + 1
        else:
            segments.append((bytes(current), seg_start, ("end", code)))
            return segments, q - 1


class _Bits:
    """MSB-first bit reader over one unstuffed segment."""

    def __init__(self, buf, offset):
        self.buf = buf + b"\x00\x00\x00\x00"
        self.nbits = 8 * len(buf)
        self.pos = 0
        self.offset = offset

    def peek16(self):
        byte, bit = divmod(self.pos, 8)
        window = int.from_bytes(self.buf[byte:byte + 3], "big")
        return (window >> (8 - bit)) & 0xFFFF

    def take(self, n):
        if self.pos + n > self.nbits:
            raise EOFError
        byte, bit = divmod(self.pos, 8)
        window = int.from_bytes(self.buf[byte:byte + 4], "big")
        self.pos += n
        return (window >> (32 - bit - n)) & ((1 << n) - 1)

    def where(self):
        return self.offset + self.pos // 8


def _decode_symbol(bits, lut, what):
    entry = int(lut[bits.peek16()])
    if entry == 0:
        raise JpegDecodeError(S.BAD_HUFFMAN_CODE, bits.where(), f"no {what} code matches")
    length = entry >> 8
    if bits.pos + length > bits.nbits:
        raise EOFError
    bits.pos += length
    return entry & 0xFF


def _extend(value, size):
    """T.81 F.12 EXTEND: the magnitude bits to a signed coefficient."""
    return value - (1 << size) + 1 if size and value < (1 << (size - 1)) else value


def decode_scan(data, headers):
    """Coefficients per component, shape (blocks_v, blocks_h, 8, 8) int16 in natural order,
    and the offset of the marker that ends the scan."""
    comps = headers.components
    mcus_x, mcus_y = headers.mcu_grid
    total = mcus_x * mcus_y
    blocks = [np.zeros((mcus_y * c.v, mcus_x * c.h, 64), dtype=np.int64) for c in comps]
    dc_luts = {c.td: lookup_table(headers.dc_tables[c.td]) for c in comps}
    ac_luts = {c.ta: lookup_table(headers.ac_tables[c.ta]) for c in comps}
    interval = headers.restart_interval or total
    segments, end = split_entropy_segments(data, headers.scan_start)
    intervals = -(-total // interval)
    # Interval by interval, in stream order, as the hardware meets them.
    for index in range(intervals):
        buf, offset, (kind, value) = segments[index]
        bits = _Bits(buf, offset)
        predictors = [0] * len(comps)
        first = index * interval
        for mcu in range(first, min(first + interval, total)):
            my, mx = divmod(mcu, mcus_x)
            for ci, c in enumerate(comps):
                for by in range(c.v):
                    for bx in range(c.h):
                        try:
                            coefs = _decode_block(bits, dc_luts[c.td], ac_luts[c.ta],
                                                  predictors, ci)
                        except EOFError:
                            # The segment ended (a marker or the end of the data) mid-interval.
                            status = S.BAD_RESTART if kind == "rst" else S.TRUNCATED
                            raise JpegDecodeError(status, bits.where(),
                                                  f"entropy data of MCU {mcu} runs past its "
                                                  "segment") from None
                        blocks[ci][my * c.v + by, mx * c.h + bx] = coefs
        # An encoder pads the last byte of a segment with 1-bits and stops; whole bytes
        # left over mean the stream and the tables disagree (libjpeg: "extraneous bytes").
        if bits.nbits - bits.pos >= 8:
            raise JpegDecodeError(S.EXCESS_ENTROPY_DATA, bits.where(),
                                  f"{(bits.nbits - bits.pos) // 8} bytes after the last MCU "
                                  f"of interval {index}")
        last = index == intervals - 1
        if kind == "eof":
            raise JpegDecodeError(S.TRUNCATED, len(data), "the data ends inside the scan")
        if kind == "rst" and (last or value != index % 8):
            raise JpegDecodeError(S.BAD_RESTART, offset + len(buf),
                                  f"RST{value} after interval {index}" + (" (the last)" if last else
                                                                          f", expected RST{index % 8}"))
        if kind == "end" and not last:
            raise JpegDecodeError(S.BAD_RESTART, offset + len(buf),
                                  f"the scan ends after interval {index} of {intervals}")
    out = []
    for c, b in zip(comps, blocks):
        natural = np.zeros_like(b)
        natural[..., _NATURAL] = b
        # JCOEF is 16 bits: libjpeg stores the DC sum truncated.
        out.append(natural.astype(np.int16).reshape(b.shape[0], b.shape[1], 8, 8))
    return out, end


def _decode_block(bits, dc_lut, ac_lut, predictors, ci):
    coefs = [0] * 64
    size = _decode_symbol(bits, dc_lut, "DC")
    if size > 11:
        raise JpegDecodeError(S.BAD_COEFFICIENT, bits.where(), f"DC category {size}")
    diff = _extend(bits.take(size), size) if size else 0
    predictors[ci] += diff
    coefs[0] = predictors[ci]
    k = 1
    while k < 64:
        rs = _decode_symbol(bits, ac_lut, "AC")
        run, size = rs >> 4, rs & 15
        if size == 0:
            if run == 15:
                k += 16
                if k > 64:
                    raise JpegDecodeError(S.TOO_MANY_COEFFICIENTS, bits.where(),
                                          "a zero run past the end of the block")
                continue
            break                                   # EOB
        k += run
        if k > 63:
            raise JpegDecodeError(S.TOO_MANY_COEFFICIENTS, bits.where(),
                                  "a coefficient past the end of the block")
        if size > 10:
            raise JpegDecodeError(S.BAD_COEFFICIENT, bits.where(), f"AC category {size}")
        coefs[k] = _extend(bits.take(size), size)
        k += 1
    return coefs


def blocks_in_scan_order(blocks, headers):
    """(component index, 64 coefficients in zigzag order) for every block, in the order the
    scan carries them: MCU by MCU, each component's blocks left to right, top to bottom."""
    out = []
    mcus_x, mcus_y = headers.mcu_grid
    for my in range(mcus_y):
        for mx in range(mcus_x):
            for ci, c in enumerate(headers.components):
                for by in range(c.v):
                    for bx in range(c.h):
                        natural = blocks[ci][my * c.v + by, mx * c.h + bx].reshape(64)
                        out.append((ci, [int(v) for v in natural[_NATURAL]]))
    return out
