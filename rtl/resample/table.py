"""The tables both resampler passes read, and their multiply-add: one entry per output
(column for the horizontal pass, row for the vertical one), computed on the host from
Pillow's coefficients (``sim.resample_model.coefficients``).

An entry holds ``need``, the last input the output reads (``first + count - 1``), and
``taps`` weights newest first: weight ``j`` multiplies input ``need - j``.  Pillow's bounds
only grow from one output to the next, so a pass can make output ``x`` as soon as input
``need`` has arrived, and forget inputs older than ``need - taps + 1``.
"""

import numpy as np
from amaranth import Cat, Signal, signed, unsigned
from amaranth.lib import data

from ..jpeg.ycc_rgb import clamp_u8

__all__ = ["PRECISION_BITS", "WEIGHT_BITS", "entry_layout", "check_counts", "table_arrays",
           "table_entries", "weighted_pixel"]

#: Pillow's fraction bits; a weight is a signed 24-bit integer (|w| < 2**23).
PRECISION_BITS = 22
WEIGHT_BITS = 24


def entry_layout(taps, need_bits):
    return data.StructLayout({
        "need": unsigned(need_bits),
        "weights": data.ArrayLayout(signed(WEIGHT_BITS), taps),
    })


def check_counts(count, taps):
    """Raise unless every output reads 1 to ``taps`` inputs."""
    count = np.asarray(count)
    if count.size and count.max() > taps:
        raise ValueError(f"an output needs {int(count.max())} taps, the resampler has {taps}")
    if count.size and count.min() < 1:
        raise ValueError("an output with no input taps")


def table_arrays(coefficients, taps):
    """One axis's table as arrays: ``need`` per output and its ``taps`` weights newest
    first.  Raises when an output needs more taps."""
    count = np.asarray(coefficients.count, np.int64)
    check_counts(count, taps)
    weights = np.asarray(coefficients.weights, np.int64)
    back = count[:, None] - 1 - np.arange(taps)[None, :]       # the weight for input need - j
    aligned = np.take_along_axis(weights, np.clip(back, 0, weights.shape[1] - 1), axis=1)
    return (np.asarray(coefficients.first, np.int64) + count - 1,
            np.where(back >= 0, aligned, 0))


def table_entries(coefficients, taps):
    """:func:`table_arrays` as (need, weights) pairs of ints, one per output."""
    needs, weights = table_arrays(coefficients, taps)
    return [(int(n), [int(v) for v in w]) for n, w in zip(needs, weights)]


def weighted_pixel(m, samples, weights, channels, enable=None):
    """Pillow's ``clip8((2**21 + sum(sample * weight)) >> 22)`` per channel of the packed
    pixels ``samples`` and the signed ``weights``, into ``m``; the channels packed again.
    With ``enable`` the products are registered (taken in clocks where ``enable`` is high)
    and the sum and clamp follow them combinationally: a pipeline stage between the
    multipliers and the adder tree, so the value belongs to the samples of the clock before."""
    channels_out = []
    for c in range(channels):
        acc = 1 << (PRECISION_BITS - 1)
        for k, (sample, weight) in enumerate(zip(samples, weights)):
            product = sample[8 * c:8 * c + 8] * weight
            if enable is not None:
                held = Signal(signed(9 + WEIGHT_BITS), name=f"product{c}_{k}")
                with m.If(enable):
                    m.d.sync += held.eq(product)
                product = held
            acc = acc + product
        total = Signal(signed(8 + WEIGHT_BITS + len(samples).bit_length() + 1),
                       name=f"sum{c}")
        m.d.comb += total.eq(acc)
        channels_out.append(clamp_u8(total >> PRECISION_BITS))
    return Cat(*channels_out)
