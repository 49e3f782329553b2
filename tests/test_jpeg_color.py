"""YCbCr->RGB tables and arithmetic, transcribed independently from jdcolor.c."""

import numpy as np

from dlforge.sim.models.jpeg_color import ycc_tables, ycc_to_rgb


def test_tables_match_jdcolor():
    cr_r, cb_b, cr_g, cb_g = ycc_tables()
    for i in range(256):
        x = i - 128
        assert cr_r[i] == (91881 * x + 32768) >> 16          # FIX(1.40200) = 91881
        assert cb_b[i] == (116130 * x + 32768) >> 16         # FIX(1.77200) = 116130
        assert cr_g[i] == -46802 * x                         # FIX(0.71414) = 46802
        assert cb_g[i] == -22554 * x + 32768                 # FIX(0.34414) = 22554


def test_conversion_matches_scalar_formula():
    rng = np.random.default_rng(0)
    y, cb, cr = (rng.integers(0, 256, 500) for _ in range(3))
    rgb = ycc_to_rgb(y, cb, cr)
    for k in range(500):
        r = y[k] + ((91881 * (cr[k] - 128) + 32768) >> 16)
        g = y[k] + ((-22554 * (cb[k] - 128) + 32768 - 46802 * (cr[k] - 128)) >> 16)
        b = y[k] + ((116130 * (cb[k] - 128) + 32768) >> 16)
        assert rgb[k].tolist() == [min(max(v, 0), 255) for v in (r, g, b)]
