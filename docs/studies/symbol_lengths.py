"""How many Huffman symbols a fast path covers (issue 20): per file of the 64-photo speed
corpus, the share of symbols whose code is longer than L bits and whose code plus magnitude
bits (the bits the symbol takes from the window) exceed T bits.

A loop that resolves codes of up to L bits from one table lookup, and consumes up to T bits
in one clock, sends the rest down a slower path; these shares give the cost of that path
in symbols per clock.  The golden model (sim/models/jpeg_entropy.py) decodes every file,
and each symbol it reads is counted as it goes.

    .venv/bin/python docs/studies/symbol_lengths.py [--limit N]
"""
import argparse
import collections
import contextlib
import json

import numpy as np

from dlforge.sim.corpus.jpeg_corpus import photo_corpus
from dlforge.sim.models import jpeg_entropy
from dlforge.sim.models.jpeg_parse import parse_headers

CODE_LIMITS = (6, 7, 8, 9, 10)
TOTAL_LIMITS = (8, 10, 12, 14, 15, 16)


@contextlib.contextmanager
def counting(counts):
    """While inside, every symbol the model decodes adds one to counts[(class, code length,
    code length + magnitude bits)]."""
    decode_symbol = jpeg_entropy._decode_symbol

    def counted(bits, lut, what):
        length = int(lut[bits.peek16()]) >> 8
        symbol = decode_symbol(bits, lut, what)
        size = symbol & 15 if what == "AC" else symbol
        counts[(what, length, length + size)] += 1
        return symbol

    jpeg_entropy._decode_symbol = counted
    try:
        yield counts
    finally:
        jpeg_entropy._decode_symbol = decode_symbol


def shares(data):
    """{"code>L": share, "total>T": share} for one file."""
    counts = collections.Counter()
    with counting(counts):
        jpeg_entropy.decode_scan(data, parse_headers(data))
    n = sum(counts.values())
    row = {f"code>{lim}": sum(c for (_, code, _), c in counts.items() if code > lim) / n
           for lim in CODE_LIMITS}
    row.update({f"total>{lim}": sum(c for (_, _, t), c in counts.items() if t > lim) / n
                for lim in TOTAL_LIMITS})
    return n, row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, help="the first N files only")
    args = parser.parse_args()
    rows = []
    for f in photo_corpus()[:args.limit]:
        n, row = shares(f.data)
        rows.append(row)
        print(json.dumps({"file": f.name, "symbols": n,
                          **{k: round(v, 4) for k, v in row.items()}}), flush=True)
    for what, pick in (("median", np.median), ("max", np.max)):
        print(json.dumps({what: {k: round(float(pick([r[k] for r in rows])), 4)
                                 for k in rows[0]}}))


if __name__ == "__main__":
    main()
