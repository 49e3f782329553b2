"""libjpeg-turbo's reduced IDCTs (``sim/models/idct_reduced_model.py``): a flat block stays flat at
every size, the 4x4 and 2x2 outputs follow the full IDCT's picture of the block, and a size
it has no IDCT for is refused.  Bit-exactness to libjpeg-turbo is checked through whole
scaled decodes in tests/test_jpeg_model.py."""

import numpy as np
import pytest

from dlforge.sim.models.idct_model import idct_islow
from dlforge.sim.models.idct_reduced_model import idct_reduced


def test_a_flat_block_stays_flat_at_every_size():
    quant = np.full((8, 8), 3, np.int64)
    for dc in (-300, -1, 0, 1, 57, 300):
        coefs = np.zeros((8, 8), np.int16)
        coefs[0, 0] = dc
        full = idct_islow(coefs, quant)
        assert np.all(full == full[0, 0])
        for size in (4, 2, 1):
            out = idct_reduced(coefs, quant, size)
            assert out.shape == (size, size) and np.all(out == full[0, 0]), (dc, size)


def test_reduced_blocks_are_the_full_block_seen_smaller():
    """Smooth random blocks: each reduced sample is close to the mean of the full-size
    samples it stands for (the reduced IDCT is not an average, but near one)."""
    rng = np.random.default_rng(5)
    coefs = np.zeros((200, 8, 8), np.int16)
    coefs[:, :3, :3] = rng.integers(-40, 41, (200, 3, 3))
    coefs[:, 0, 0] = rng.integers(-100, 101, 200)
    quant = np.full((8, 8), 4, np.int64)
    full = idct_islow(coefs, quant).astype(np.int64)
    for size in (4, 2, 1):
        k = 8 // size
        mean = full.reshape(200, size, k, size, k).mean(axis=(2, 4))
        out = idct_reduced(coefs, quant, size).astype(np.int64)
        assert out.shape == (200, size, size)
        diff = np.abs(out - mean)
        # (where the full block clips at 0 or 255 the two differ most)
        assert diff.mean() < 0.5 and np.percentile(diff, 99) <= 2 and diff.max() <= 10, size


def test_unknown_sizes_are_refused():
    with pytest.raises(ValueError, match="reduced IDCT sizes"):
        idct_reduced(np.zeros((8, 8), np.int16), np.ones((8, 8), np.int64), 3)
