"""Damaged JPEG files for fuzzing: truncated, bit-flipped and spliced copies of real ones.

Deterministic for a seed, so a failure names a file that can be made again.  Flips land in the
entropy-coded data half of the time (where most of a file is) and anywhere the other half,
so marker lengths, table contents and frame fields are hit too.
"""

import numpy as np

from dlforge.rtl.jpeg.syntax import Marker
from dlforge.sim.corpus.jpeg_corpus import CorpusFile, baseline_corpus

__all__ = ["fuzz_corpus", "MUTATIONS"]

MUTATIONS = ("truncate", "flip", "splice")


def _scan_start(data):
    k = data.find(Marker.SOS.bytes)
    return k + 2 if k >= 0 else 2


def fuzz_corpus(count, seed=0, bases=None):
    """``count`` damaged files made from ``bases`` (default: the quick baseline corpus)."""
    bases = list(bases or baseline_corpus("quick"))
    rng = np.random.default_rng(seed)
    files = []
    for n in range(count):
        kind = MUTATIONS[n % len(MUTATIONS)]
        base = bases[int(rng.integers(len(bases)))]
        data = bytearray(base.data)
        if kind == "truncate":
            cut = int(rng.integers(1, len(data)))
            data = data[:cut]
            what = f"first {cut} of {len(base.data)} bytes"
        elif kind == "flip":
            flips = int(rng.integers(1, 5))
            lo = _scan_start(data) if rng.random() < 0.5 else 0
            places = sorted(int(p) for p in rng.integers(lo, len(data), flips))
            for p in places:
                data[p] ^= 1 << int(rng.integers(8))
            what = "bits flipped at " + ",".join(map(str, places))
        else:
            other = bases[int(rng.integers(len(bases)))]
            a = int(rng.integers(1, len(data)))
            b = int(rng.integers(0, len(other.data)))
            data = data[:a] + other.data[b:]
            what = f"first {a} bytes + {other.name} from byte {b}"
        files.append(CorpusFile(f"fuzz{seed}-{n}-{kind}-{base.name}", bytes(data),
                                {"mutation": kind, "base": base.name, "edit": what}))
    return files
