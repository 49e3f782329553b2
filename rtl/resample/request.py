"""The resize request that leads a file sent to a core with a resampler: defined once for
the gateware (``rtl/jpeg/core.py`` reads it) and the host (``host/resize_request.py``
builds it).

A JPEG request frame with :data:`~dlforge.rtl.link.protocol.REQUEST_RESIZE` in its status
byte carries the request in front of the file's bytes, as little-endian 32-bit words:

====================  =====================================================================
word 0                :data:`MAGIC`
word 1                bit 0: the vertical pass first (Pillow's order for these sizes);
                      bits 8..15: the taps the tables were made for (the device's own)
word 2                left | top << 16 (the crop box's corner in the decoded image)
word 3                crop width | crop height << 16
word 4                output width | output height << 16
then                  the row table: per output column, ``need`` then ``taps`` weights
then                  the column table: per output row, ``need`` then ``taps`` weights
====================  =====================================================================

Weights are signed 24-bit (Pillow's 22 fraction bits) in 32-bit words, laid out as
:func:`~dlforge.rtl.resample.row_resampler.row_table` and
:func:`~dlforge.rtl.resample.column_resampler.column_table` give them.  Whole words keep
the core's 4-byte beats aligned, so it reads a word a clock and the JPEG starts on a beat.
The host's frames are multiples of 4 bytes long except the file's last, so the request's
beats are whole; a core refuses a request that is not (``JpegStatus.BAD_RESIZE``).

Why the host sends tables and not sizes: Pillow's coefficients are doubles rounded to
integers; computing them in gateware bit-exactly would cost a floating-point unit.  A
table entry is ``taps + 1`` words: for a 224x224 output with 7 taps, 14 KiB a file.
"""

import struct

__all__ = ["MAGIC", "HEADER_WORDS", "VERTICAL_FIRST", "entry_words", "request_bytes",
           "pack_request"]

MAGIC = 0x315A5352                 # b"RSZ1"
HEADER_WORDS = 5
VERTICAL_FIRST = 0x01
TAPS_SHIFT = 8


def entry_words(taps):
    """Words of one table entry."""
    return 1 + taps


def request_bytes(taps, out_width, out_height):
    """The request's length in bytes."""
    return 4 * (HEADER_WORDS + entry_words(taps) * (out_width + out_height))


def pack_request(*, taps, box, size, vertical_first, row_entries, column_entries):
    """The request's bytes.  ``box`` (left, top, right, bottom), ``size`` (width, height),
    the entries as (need, weights) pairs of ``taps`` weights each."""
    left, top, right, bottom = box
    out_w, out_h = size
    if len(row_entries) != out_w or len(column_entries) != out_h:
        raise ValueError("a table entry per output column and per output row")
    words = [MAGIC, (VERTICAL_FIRST if vertical_first else 0) | taps << TAPS_SHIFT,
             left | top << 16, (right - left) | (bottom - top) << 16, out_w | out_h << 16]
    for need, weights in list(row_entries) + list(column_entries):
        if len(weights) != taps:
            raise ValueError(f"{len(weights)} weights in an entry, not {taps}")
        words.append(need)
        words.extend(w & 0xFFFFFFFF for w in weights)
    return struct.pack(f"<{len(words)}I", *words)
