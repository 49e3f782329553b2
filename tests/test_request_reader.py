"""The resize request's reader (``rtl/resample/request_reader.py``) in the Amaranth
simulator: a request's words in, the tables written and the sizes set as the host packed
them, ``complete`` on the last word; every way a request can be refused is refused in the
clock of the word that shows it."""

import struct

from amaranth.sim import Simulator

from dlforge.host.jpeg.resize_request import Resize
from dlforge.rtl.resample.request_reader import RequestReader
from dlforge.rtl.resample.resampler import Resampler
from dlforge.rtl.resample.table import table_entries
from dlforge.sim.models.resample_model import coefficients

TAPS = 5


def _read(words, whole=None, last_at=None):
    """Offer ``words``; (row writes, column writes, sizes, the word flagged bad or None, the
    word flagged complete or None)."""
    resampler = Resampler(max_columns=64, max_rows=48, taps=TAPS, max_image=(256, 256))
    for part in (resampler, resampler.rows, resampler.columns):
        part._MustUse__silence = True       # (its ports give the reader its shapes only)
    dut = RequestReader(resampler)
    got = {"rows": {}, "columns": {}, "bad": None, "complete": None, "sizes": None}

    async def bench(ctx):
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        for n, word in enumerate(words):
            ctx.set(dut.valid, 1)
            ctx.set(dut.word, word)
            ctx.set(dut.whole, whole is None or n not in whole)
            ctx.set(dut.last, n == last_at)
            if ctx.get(dut.row_table_we):
                got["rows"][ctx.get(dut.row_table_addr)] = _entry(ctx, dut.row_table_data)
            if ctx.get(dut.column_table_we):
                got["columns"][ctx.get(dut.column_table_addr)] = \
                    _entry(ctx, dut.column_table_data)
            if ctx.get(dut.bad):
                got["bad"] = n
                break
            if ctx.get(dut.complete):
                got["complete"] = n
            await ctx.tick()
        ctx.set(dut.valid, 0)
        got["sizes"] = tuple(ctx.get(getattr(dut, name)) for name in
                             ("left", "top", "crop_width", "crop_height", "out_width",
                              "out_height", "vertical_first"))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return got


def _entry(ctx, port):
    value = ctx.get(port)
    return int(value.need), [int(w) for w in value.weights]


def _words(request):
    return list(struct.unpack(f"<{len(request) // 4}I", request))


def test_a_request_fills_the_tables():
    r = Resize((3, 2, 43, 30), (20, 12))
    got = _read(_words(r.request(TAPS)))
    assert got["bad"] is None
    assert got["complete"] == 5 + (1 + TAPS) * (20 + 12) - 1
    assert got["sizes"] == (3, 2, 40, 28, 20, 12, 0)
    rows = table_entries(coefficients(40, 20), TAPS)
    columns = table_entries(coefficients(28, 12), TAPS)
    assert [got["rows"][k] for k in range(20)] == [(n, w) for n, w in rows]
    assert [got["columns"][k] for k in range(12)] == [(n, w) for n, w in columns]


def test_vertical_first_is_read():
    got = _read(_words(Resize((0, 0, 40, 40), (36, 20)).request(TAPS)))
    assert got["bad"] is None and got["sizes"][-1] == 1


def _bad(words, **kw):
    return _read(words, **kw)["bad"]


def test_refusals():
    words = _words(Resize((3, 2, 43, 30), (20, 12)).request(TAPS))
    first_weight = 6
    assert _bad([0x12345678] + words[1:]) == 0                              # magic
    assert _bad(words[:1] + [words[1] + (1 << 8)] + words[2:]) == 1          # other taps
    for word, value in ((3, 0), (3, 65 | 10 << 16), (3, 10 | 49 << 16),      # crop 0, too big
                        (4, 0 | 10 << 16), (4, 65 | 10 << 16), (4, 5 | 49 << 16)):
        changed = list(words)
        changed[word] = value
        assert _bad(changed) == word, (word, value)
    assert _bad(words, whole={first_weight}) == first_weight                 # partial word
    assert _bad(words, last_at=9) == 9                                       # the file ends
    # a need past the crop (40 columns), one that goes backwards, a high half set
    entry = 1 + TAPS
    for k, value in ((0, 40), (1, 0), (0, 1 << 16)):
        changed = list(words)
        changed[5 + k * entry] = value
        if k == 1:
            changed[5] = 3                                                   # first needs 3
        assert _bad(changed) == 5 + k * entry, (k, value)
    # the column table's needs stay below the crop's height (28)
    changed = list(words)
    changed[5 + 20 * entry] = 28
    assert _bad(changed) == 5 + 20 * entry
