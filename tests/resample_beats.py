"""Helpers for the resampler's amaranth.sim tests: images as beats in, rows of pixels out."""

import numpy as np

from dlforge.rtl.resample.beats import LANES, row_beats

__all__ = ["image_payloads", "collect_rows", "rows_to_image"]


def image_payloads(image, rng=None, lanes=LANES):
    """The beats of ``image`` (:func:`row_beats`) as payload dicts for ``ctx.set``."""
    return [{"pixels": run + [0] * (lanes - len(run)), "count": len(run), "last": last}
            for run, last in row_beats(image, rng, lanes)]


async def collect_rows(ctx, port, rows, rng, ready_prob=1.0):
    """Forever: draw ``ready`` at random; each beat taken extends the last row of ``rows``
    (a list of lists), and a beat with ``last`` closes it."""
    open_row = False
    while True:
        ctx.set(port.ready, rng.random() < ready_prob)
        _, _, valid, ready, payload = await ctx.tick().sample(port.valid, port.ready,
                                                              port.payload)
        if valid and ready:
            count = int(payload.count)
            assert 1 <= count <= len(payload.pixels), f"a beat of {count} pixels"
            if not open_row:
                rows.append([])
                open_row = True
            rows[-1].extend(int(payload.pixels[k]) for k in range(count))
            if payload.last:
                open_row = False


def rows_to_image(rows, width):
    """The rows collected, as an (H, W, 3) uint8 array; every row must be ``width`` long."""
    assert all(len(r) == width for r in rows), [len(r) for r in rows]
    values = np.array(rows, np.int64).reshape(len(rows), width)
    return np.stack([(values >> (8 * c)) & 255 for c in range(3)], axis=-1).astype(np.uint8)
