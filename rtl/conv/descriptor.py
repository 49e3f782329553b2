"""The tile descriptor and the link formats of the convolution engine: defined once here,
used by the gateware (layouts) and the host (packing functions).

A tile arrives on the link as one descriptor word followed by its data, each part padded to
whole link words:

1. the descriptor (:data:`TileDescriptor`, 128 bits, in the low bits of one word);
2. when ``first``: one 16-byte record per output channel: bias (int32), multiplier (uint32),
   shift (one byte), 7 bytes of zeros;
3. when ``load_weights``: for each of the ``kh * kw * vectors`` weight words of a PE (``k =
   (ky * kw + kx) * vectors + v``), the ``oc_count`` channels' ``simd``-operand vectors, channel
   0 first (each ``k`` starts a new link word);
4. when ``load_inputs``: the loaded input region, row by row, column by column, ``vectors``
   vectors of ``simd`` input channels each (channels past the tile's slice are zero), packed
   without gaps;
5. when ``last`` and ``residual``: per output pixel of the tile (in the order the engine
   visits them, see :func:`pixel_order`), ``ceil(oc_count / rows)`` rows of ``rows`` int8
   values (channels past ``oc_count`` zero), packed without gaps.

Results (after the last slice) leave as per output pixel (pooled when ``pool``, in visiting
order) ``ceil(oc_count / rows)`` rows of ``rows`` int8 values, packed without gaps into words.
Operands and results are little-endian two's complement.
"""

import enum

from amaranth import signed
from amaranth.lib import data

__all__ = ["TileDescriptor", "DescriptorError", "DESCRIPTOR_BYTES", "MAGIC",
           "PARAM_RECORD_BYTES", "pack_descriptor", "pixel_order"]

MAGIC = 0xC5                # first byte of every descriptor: a lost or extra word shows
DESCRIPTOR_BYTES = 16
PARAM_RECORD_BYTES = 16

TileDescriptor = data.StructLayout({
    "magic": 8,
    "kh": 3,            # 1..7
    "kw": 3,
    "stride": 2,        # 1 or 2
    "vectors": 12,      # simd-operand vectors per input position (ceil(tic / simd))
    "ih": 12,           # loaded input rows (the tile's receptive field, clipped to the image)
    "iw": 12,           # loaded input columns
    "y_off": signed(4),  # first output row's first input row, relative to the loaded region
    "x_off": signed(4),  # (0 or negative: rows of zero padding above / left)
    "th": 12,           # output rows of the tile (before pooling)
    "tw": 12,           # output columns
    "oc_count": 12,     # output channels, 1..rows * cols
    "first": 1,         # first input-channel slice: start from the bias (params follow)
    "last": 1,          # last slice: requantise, send the results
    "load_weights": 1,
    "load_inputs": 1,
    "relu": 1,
    "pool": 1,          # 2x2 max pool (th and tw even; pixels visited in 2x2 blocks)
    "residual": 1,      # add the int8 residual that follows before the clamp
})
assert TileDescriptor.size <= 8 * DESCRIPTOR_BYTES


class DescriptorError(enum.IntEnum):
    """Why the engine refused a descriptor (its ``error_code``; 0: none).  After a refusal the
    engine drops everything on its input until it is reset: the link is out of step."""
    NONE = 0
    BAD_MAGIC = 1           # not a descriptor: the host and the engine disagree on lengths
    BAD_KERNEL = 2          # kh or kw outside 1..7
    BAD_STRIDE = 3          # stride outside 1..2
    ZERO_SIZE = 4           # vectors, ih, iw, th or tw is zero
    BAD_CHANNELS = 5        # oc_count outside 1..rows * cols
    WEIGHTS_TOO_BIG = 6     # kh * kw * vectors > weight_depth
    INPUTS_TOO_BIG = 7      # vectors * ih * iw > input_depth
    PIXELS_TOO_BIG = 8      # th * tw > psum_depth
    BAD_POOL = 9            # pooling with an odd th or tw
    BAD_OFFSET = 10         # y_off or x_off positive (the window starts below or right of
                            # its first loaded row or column)


def pack_descriptor(**fields):
    """The descriptor as an integer (its bytes are ``value.to_bytes(16, "little")``)."""
    fields = {"magic": MAGIC} | fields
    return TileDescriptor.const(fields).as_value().value


def pixel_order(th, tw, pool):
    """(y, x) of a tile's output pixels in the order the engine computes them: raster order,
    or 2x2 blocks in raster order (each block's pixels in raster order) when pooling."""
    if not pool:
        return [(y, x) for y in range(th) for x in range(tw)]
    return [(by + dy, bx + dx) for by in range(0, th, 2) for bx in range(0, tw, 2)
            for dy in (0, 1) for dx in (0, 1)]
