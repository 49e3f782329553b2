"""The resampler's tables (``rtl/resample/table.py``): needs and newest-first weights from
Pillow's coefficients, and the taps check."""

import numpy as np
import pytest

from dlforge.rtl.resample.table import table_arrays, table_entries
from dlforge.sim.models.resample_model import coefficients


def test_weights_newest_first():
    c = coefficients(20, 7)
    needs, weights = table_arrays(c, taps=9)
    for x in range(7):
        first, count = int(c.first[x]), int(c.count[x])
        assert needs[x] == first + count - 1
        assert list(weights[x][:count]) == list(c.weights[x][:count][::-1])
        assert not np.any(weights[x][count:])
        assert sum(weights[x]) in range((1 << 22) - 9, (1 << 22) + 10)
    assert table_entries(c, 9)[0] == (int(needs[0]), [int(w) for w in weights[0]])


def test_the_table_refuses_too_many_taps():
    with pytest.raises(ValueError, match="needs 8 taps, the resampler has 7"):
        table_entries(coefficients(100, 25), taps=7)
