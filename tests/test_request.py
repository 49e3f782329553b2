"""The resize request's layout (``rtl/resample/request.py``), which the core reads and the
host writes: the header words, the tables entry by entry, and the checks on their sizes."""

import struct

import numpy as np
import pytest

from dlforge.rtl.resample.request import (HEADER_WORDS, MAGIC, VERTICAL_FIRST, entry_words,
                                          pack_request, request_bytes, table_bytes)


def test_layout():
    rows = table_bytes([1, 2], [[10, -20, 0], [30, 40, 50]])
    columns = table_bytes([4], [[-1, 2, 3]])
    request = pack_request(taps=3, box=(5, 6, 25, 16), size=(2, 1), vertical_first=True,
                           rows=rows, columns=columns)
    assert len(request) == request_bytes(3, 2, 1) == 4 * (HEADER_WORDS + entry_words(3) * 3)
    words = struct.unpack(f"<{len(request) // 4}I", request)
    assert words[:5] == (MAGIC, VERTICAL_FIRST | 3 << 8, 5 | 6 << 16, 20 | 10 << 16,
                         2 | 1 << 16)
    signed = np.array(words[5:], np.uint32).view(np.int32).tolist()
    assert signed == [1, 10, -20, 0, 2, 30, 40, 50, 4, -1, 2, 3]
    assert request[:4] == b"RSZ2"


def test_sizes_are_checked():
    rows = table_bytes([1, 2], [[1, 2, 3], [4, 5, 6]])
    with pytest.raises(ValueError, match="a table of 3 entries"):
        pack_request(taps=3, box=(0, 0, 4, 4), size=(3, 2), vertical_first=False, rows=rows,
                     columns=rows)
    with pytest.raises(ValueError, match="a need per entry"):
        table_bytes([1, 2, 3], [[1, 2, 3], [4, 5, 6]])
