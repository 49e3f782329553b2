"""The resize request that leads a file sent to a core with a resampler: defined once for
the gateware (``rtl/jpeg/core.py`` reads it) and the host (``host/jpeg/resize_request.py``
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
                      (both newest first: weight j multiplies input ``need - j``)
====================  =====================================================================

Weights are signed 24-bit (Pillow's 22 fraction bits) in 32-bit words, laid out as
:func:`~dlforge.rtl.resample.table.table_entries` gives them.  Whole words keep
the core's 4-byte beats aligned, so it reads a word a clock and the JPEG starts on a beat.
The host's frames are multiples of 4 bytes long except the file's last, so the request's
beats are whole; a core refuses a request that is not (``JpegStatus.BAD_RESIZE``).

Why the host sends tables and not sizes: Pillow's coefficients are doubles rounded to
integers; computing them in gateware bit-exactly would cost a floating-point unit.  A
table entry is ``taps + 1`` words: for a 224x224 output with 7 taps, 14 KiB a file.
"""

import struct

import numpy as np

__all__ = ["MAGIC", "HEADER_WORDS", "VERTICAL_FIRST", "entry_words", "request_bytes",
           "table_bytes", "pack_request"]

MAGIC = 0x325A5352                 # b"RSZ2" (RSZ1's column table was per line buffer)
HEADER_WORDS = 5
VERTICAL_FIRST = 0x01
TAPS_SHIFT = 8


def entry_words(taps):
    """Words of one table entry."""
    return 1 + taps


def request_bytes(taps, out_width, out_height):
    """The request's length in bytes."""
    return 4 * (HEADER_WORDS + entry_words(taps) * (out_width + out_height))


def table_bytes(needs, weights):
    """A table's words: per entry ``need`` then its weights ((needs, weights) arrays as
    :func:`~dlforge.rtl.resample.table.table_arrays` gives them)."""
    needs, weights = np.asarray(needs, np.int64), np.asarray(weights, np.int64)
    if weights.ndim != 2 or needs.shape != weights.shape[:1]:
        raise ValueError(f"a need per entry and a row of weights: {needs.shape} needs, "
                         f"{weights.shape} weights")
    return (np.column_stack([needs, weights]) & 0xFFFFFFFF).astype("<u4").tobytes()


def pack_request(*, taps, box, size, vertical_first, rows, columns):
    """The request's bytes.  ``box`` (left, top, right, bottom), ``size`` (width, height),
    ``rows`` and ``columns`` the tables' :func:`table_bytes`."""
    left, top, right, bottom = box
    out_w, out_h = size
    for table, count in ((rows, out_w), (columns, out_h)):
        if len(table) != 4 * entry_words(taps) * count:
            raise ValueError(f"a table of {count} entries of {taps} weights is "
                             f"{4 * entry_words(taps) * count} bytes, not {len(table)}")
    header = struct.pack("<5I", MAGIC, (VERTICAL_FIRST if vertical_first else 0)
                         | taps << TAPS_SHIFT, left | top << 16,
                         (right - left) | (bottom - top) << 16, out_w | out_h << 16)
    return b"".join((header, rows, columns))
