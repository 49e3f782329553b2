"""The whole IDCT component in amaranth.sim: a quick bit-exactness check at every width."""

import numpy as np
import pytest

from dlforge.rtl.jpeg.idct import Idct
from dlforge.sim.models.idct_model import idct_islow
from dlforge.sim.corpus.idct_vectors import idct_test_blocks
from amaranth_streams import run_stream


@pytest.mark.parametrize("lanes", [1, 2, 4, 8])
def test_blocks_bit_exact(lanes):
    coefs, quant = idct_test_blocks(40, seed=lanes)
    # Mix in the edge cases' extremes and random blocks from the end of a longer list.
    more_c, more_q = idct_test_blocks(600, seed=lanes)
    coefs = np.concatenate([coefs, more_c[-20:]])
    quant = np.concatenate([quant, more_q[-20:]])
    flat = [{"coef": int(c), "quant": int(q)} for c, q in zip(coefs.reshape(-1), quant.reshape(-1))]
    beats = [flat[i:i + lanes] for i in range(0, len(flat), lanes)]
    got, when = run_stream(Idct(lanes), beats, len(beats), valid_prob=0.9, ready_prob=0.8, seed=lanes)
    samples = np.array([int(v) for g in got for v in g]).reshape(-1, 8, 8)
    assert (samples == idct_islow(coefs, quant)).all()


def test_latency_and_interval_figures():
    assert Idct.timing(8) == (29, 8) and Idct.timing(1) == (86, 64)
    assert Idct.timing(2) == (54, 32) and Idct.timing(4) == (38, 16)


def test_rejects_unsupported_width():
    with pytest.raises(ValueError):
        Idct(3)
