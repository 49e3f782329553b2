"""A layer's tiles as link words for the convolution engine, and its results back into a
tensor, in the formats of rtl/conv/descriptor.py.  The same code feeds the simulated engine
and a board (batch 1 per call; a batch is a loop over images)."""

import math
import struct

import numpy as np

from dlforge.rtl.conv.descriptor import pack_descriptor, pixel_order, DESCRIPTOR_BYTES
from dlforge.sim.models.conv_model import check_requant

__all__ = ["LayerTensors", "tile_words", "layer_words", "result_words_per_tile",
           "scatter_results"]


class LayerTensors:
    """The tensors of one layer for one image, checked against the layer's shape."""

    def __init__(self, layer, x, w, bias=None, multiplier=None, shift=None, residual=None):
        g = layer.groups
        if x.shape != (layer.in_channels, layer.height, layer.width):
            raise ValueError(f"{layer.name}: input shape {x.shape}, expected "
                             f"{(layer.in_channels, layer.height, layer.width)}")
        if w.shape != (layer.out_channels, layer.in_channels // g, layer.kh, layer.kw):
            raise ValueError(f"{layer.name}: weight shape {w.shape} does not match the layer")
        oc = layer.out_channels
        self.x, self.w = x, w
        self.bias = np.zeros(oc, np.int64) if bias is None else np.asarray(bias, np.int64)
        if multiplier is None:
            raise ValueError(f"{layer.name}: the engine always requantises: give a multiplier "
                             "and a shift")
        self.multiplier, self.shift = check_requant(multiplier, shift, oc)
        if layer.residual and residual is None:
            raise ValueError(f"{layer.name}: the layer adds a residual: give it")
        self.residual = residual


def _span(o0, count, stride, kernel, padding, size):
    lo = o0 * stride - padding
    hi = min((o0 + count - 1) * stride - padding + kernel, size)
    first = max(lo, 0)
    return first, hi - first, lo - first          # first loaded, count, offset (<= 0)


def _pad_to_words(chunks, link_bytes):
    raw = b"".join(chunks)
    raw += bytes(-len(raw) % link_bytes)
    return [int.from_bytes(raw[i:i + link_bytes], "little") for i in range(0, len(raw), link_bytes)]


def tile_words(layer, cfg, tile, t):
    """The link words of one tile (descriptor first)."""
    s, lb, rows = cfg.simd, cfg.link_bytes, cfg.rows
    dtype = np.dtype("<i1") if cfg.operand_bits == 8 else np.dtype("<i2")
    vectors = math.ceil(tile.tic / s)
    iy0, ih, y_off = _span(tile.oy0, tile.th, layer.stride, layer.kh, layer.padding, layer.height)
    ix0, iw, x_off = _span(tile.ox0, tile.tw, layer.stride, layer.kw, layer.padding, layer.width)
    cg, ocg = layer.group_in, layer.group_out
    ic_first = tile.group * cg + tile.ic0
    oc_first = tile.group * ocg + tile.oc0
    desc = pack_descriptor(kh=layer.kh, kw=layer.kw, stride=layer.stride, vectors=vectors,
                           ih=ih, iw=iw, y_off=y_off, x_off=x_off, th=tile.th, tw=tile.tw,
                           oc_count=tile.oc_count, first=tile.first, last=tile.last,
                           load_weights=tile.load_weights, load_inputs=tile.load_inputs,
                           relu=layer.relu, pool=layer.pool, residual=layer.residual)
    words = _pad_to_words([desc.to_bytes(DESCRIPTOR_BYTES, "little")], lb)
    channels = range(oc_first, oc_first + tile.oc_count)
    if tile.first:
        words += _pad_to_words([struct.pack("<iIB7x", int(t.bias[c]), int(t.multiplier[c]),
                                            int(t.shift[c])) for c in channels], lb)
    if tile.load_weights:
        # (oc_count, vectors * s, kh, kw), input channels past the slice zero
        wt = np.zeros((tile.oc_count, vectors * s, layer.kh, layer.kw), dtype)
        wt[:, :tile.tic] = t.w[oc_first:oc_first + tile.oc_count, tile.ic0:tile.ic0 + tile.tic]
        for ky in range(layer.kh):
            for kx in range(layer.kw):
                for v in range(vectors):
                    words += _pad_to_words([wt[:, v * s:(v + 1) * s, ky, kx].tobytes()], lb)
    if tile.load_inputs:
        xt = np.zeros((vectors * s, ih, iw), dtype)
        xt[:tile.tic] = t.x[ic_first:ic_first + tile.tic, iy0:iy0 + ih, ix0:ix0 + iw]
        # row, column, vector, lane
        words += _pad_to_words([xt.transpose(1, 2, 0).tobytes()], lb)
    if tile.last and layer.residual:
        rpp = -(-tile.oc_count // rows)
        res = np.zeros((rpp * rows, tile.th, tile.tw), np.int8)
        res[:tile.oc_count] = t.residual[oc_first:oc_first + tile.oc_count,
                                         tile.oy0:tile.oy0 + tile.th, tile.ox0:tile.ox0 + tile.tw]
        order = pixel_order(tile.th, tile.tw, layer.pool)
        words += _pad_to_words([res[:, y, x].tobytes() for y, x in order], lb)
    return words


def layer_words(layer, cfg, tiles, t):
    """Every tile's words, and how many result words each tile sends back (0 if none)."""
    return [(tile_words(layer, cfg, tile, t), result_words_per_tile(layer, cfg, tile))
            for tile in tiles]


def result_words_per_tile(layer, cfg, tile):
    if not tile.last:
        return 0
    pixels = tile.th * tile.tw // (4 if layer.pool else 1)
    return -(-pixels * -(-tile.oc_count // cfg.rows) * cfg.rows // cfg.link_bytes)


def scatter_results(layer, cfg, tile, words, out):
    """Put one tile's result words into ``out`` (OC, OH', OW') int8."""
    rows = cfg.rows
    rpp = -(-tile.oc_count // rows)
    raw = b"".join(w.to_bytes(cfg.link_bytes, "little") for w in words)
    order = pixel_order(tile.th, tile.tw, layer.pool)
    if layer.pool:
        order = order[::4]
    per_pixel = rpp * rows
    values = np.frombuffer(raw[:len(order) * per_pixel], np.int8).reshape(len(order), per_pixel)
    oc_first = tile.group * layer.group_out + tile.oc0
    div = 2 if layer.pool else 1
    for n, (y, x) in enumerate(order):
        out[oc_first:oc_first + tile.oc_count, (tile.oy0 + y) // div, (tile.ox0 + x) // div] = \
            values[n, :tile.oc_count]
