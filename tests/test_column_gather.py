"""ColumnGather: raster in, columns out, two banks so a block is read while the next is written."""

import numpy as np
import pytest
from amaranth import signed

from dlforge.rtl.jpeg.column_gather import ColumnGather
from amaranth_streams import run_stream


def blocks(n, seed=0):
    return np.random.default_rng(seed).integers(-2**15, 2**15, (n, 8, 8))


@pytest.mark.parametrize("slots", [2, 4])
@pytest.mark.parametrize("small_ram", ["lut", "block"])
@pytest.mark.parametrize("lanes", [1, 2, 4, 8])
def test_columns_under_backpressure(lanes, small_ram, slots):
    data = blocks(6, lanes)
    beats = [list(map(int, chunk)) for chunk in data.reshape(-1, lanes)]
    got, _ = run_stream(ColumnGather(signed(16), lanes, small_ram, slots), beats, 6 * 8,
                        valid_prob=0.7, ready_prob=0.6, seed=lanes)
    cols = np.array([[int(v) for v in g] for g in got]).reshape(6, 8, 8)   # (block, col, row)
    assert (cols.transpose(0, 2, 1) == data).all()


@pytest.mark.parametrize("small_ram", ["lut", "block"])
def test_eight_lanes_sustain_a_block_every_eight_clocks(small_ram):
    data = blocks(10)
    beats = [list(map(int, row)) for row in data.reshape(-1, 8)]
    _, when = run_stream(ColumnGather(signed(16), 8, small_ram), beats, 80)
    assert when == list(range(when[0], when[0] + 80))
    # the block RAM's output register costs one clock of latency and no rate
    _, lut_ram = run_stream(ColumnGather(signed(16), 8), beats, 80)
    assert when[0] == lut_ram[0] + (small_ram == "block")


def test_bad_lane_count_or_ram():
    with pytest.raises(ValueError):
        ColumnGather(signed(16), 3)
    with pytest.raises(ValueError, match="small_ram must be one of"):
        ColumnGather(signed(16), 8, "bram")
    with pytest.raises(ValueError, match="slots must be 2 or 4"):
        ColumnGather(signed(16), 8, slots=3)
