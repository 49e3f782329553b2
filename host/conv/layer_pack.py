"""A layer's link stream prepared once, filled per image with a few numpy copies.

:func:`~dlforge.host.conv.link_words.tile_words` builds every tile's words in Python, which
is clear but costs about a second per ResNet-18 image: far longer than the engine's work.
Everything but the inputs and the residual is the same for every image (descriptors,
per-channel parameters, weights), so :class:`LayerPack` builds those bytes once per layer
and keeps, per tile, where the image's data goes; results come back through one gather
index per layer.  The bytes are the same as ``tile_words``'s (tests/test_layer_pack.py).
"""

import math

import numpy as np

from dlforge.host.conv.link_words import (LayerTensors, _span, result_words_per_tile,
                                          tile_words)
from dlforge.rtl.conv.descriptor import pixel_order

__all__ = ["LayerPack"]


class LayerPack:
    """One layer's constant bytes and the places of an image's data, for one engine."""

    def __init__(self, layer, cfg, tiles, w, bias, multiplier, shift):
        self.layer, self.cfg, self.tiles = layer, cfg, tiles
        lb, s = cfg.link_bytes, cfg.simd
        self.dtype = np.dtype("<i1") if cfg.operand_bits == 8 else np.dtype("<i2")
        # The image-independent words of each tile: tile_words on an all-zero input (and no
        # residual), cut where the inputs start.
        zero = np.zeros((layer.in_channels, layer.height, layer.width), np.int8)
        t = LayerTensors(layer, zero, w, bias, multiplier, shift,
                         np.zeros((layer.out_channels, layer.out_h, layer.out_w), np.int8)
                         if layer.residual else None)
        self.parts = []            # per tile: (head bytes, input spec or None, residual spec)
        for tile in tiles:
            words = tile_words(layer, cfg, tile, t)
            vectors = math.ceil(tile.tic / s)
            iy0, ih, _ = _span(tile.oy0, tile.th, layer.stride, layer.kh, layer.padding,
                               layer.height)
            ix0, iw, _ = _span(tile.ox0, tile.tw, layer.stride, layer.kw, layer.padding,
                               layer.width)
            in_words = (-(-vectors * s * ih * iw * self.dtype.itemsize // lb)
                        if tile.load_inputs else 0)
            res_words = 0
            if tile.last and layer.residual:
                rpp = -(-tile.oc_count // cfg.rows)
                res_words = -(-len(pixel_order(tile.th, tile.tw, layer.pool)) * rpp * cfg.rows
                              // lb)
            head = len(words) - in_words - res_words
            raw = b"".join(word.to_bytes(lb, "little") for word in words[:head])
            ic_first = tile.group * layer.group_in + tile.ic0
            inputs = ((ic_first, tile.tic, vectors * s, iy0, ih, ix0, iw, in_words * lb)
                      if tile.load_inputs else None)
            residual = None
            if res_words:
                oc_first = tile.group * layer.group_out + tile.oc0
                order = np.array(pixel_order(tile.th, tile.tw, layer.pool))
                residual = (oc_first, tile.oc_count, rpp * cfg.rows,
                            tile.oy0 + order[:, 0], tile.ox0 + order[:, 1], res_words * lb)
            self.parts.append((raw, inputs, residual))
        self.result_words = [result_words_per_tile(layer, cfg, tile) for tile in tiles]
        self._index = self._result_index()

    def image_bytes(self, x, residual=None):
        """The layer's stream for one image ``x`` (C, H, W) (and its residual)."""
        if x.shape != (self.layer.in_channels, self.layer.height, self.layer.width):
            raise ValueError(f"{self.layer.name}: input shape {x.shape}, expected "
                             f"{(self.layer.in_channels, self.layer.height, self.layer.width)}")
        c = self.layer.in_channels
        if self.layer.groups == 1 and c % self.cfg.simd:
            # one zero-padded copy, so that a last slice's lanes past the channels read zeros
            hwc = np.zeros((x.shape[1], x.shape[2], c + self.cfg.simd), self.dtype)
            hwc[:, :, :c] = x.transpose(1, 2, 0)
        else:
            hwc = np.ascontiguousarray(x.transpose(1, 2, 0)).astype(self.dtype, copy=False)
        chunks = []
        for raw, inputs, res in self.parts:
            chunks.append(raw)
            if inputs is not None:
                ic, tic, lanes, iy0, ih, ix0, iw, nbytes = inputs
                block = hwc[iy0:iy0 + ih, ix0:ix0 + iw, ic:ic + (lanes if hwc.shape[2] > c
                                                                  else tic)]
                if block.shape[2] != lanes:
                    block = np.concatenate(
                        [block, np.zeros((ih, iw, lanes - tic), self.dtype)], axis=2)
                data = block.tobytes()
                chunks += [data, bytes(nbytes - len(data))]
            if res is not None:
                oc, count, per_pixel, ys, xs, nbytes = res
                block = np.zeros((len(ys), per_pixel), np.int8)
                block[:, :count] = residual[oc:oc + count, ys, xs].T
                data = block.tobytes()
                chunks += [data, bytes(nbytes - len(data))]
        return b"".join(chunks)

    def _result_index(self):
        """For every output element (OC, OH', OW') in C order, its byte in one image's
        results."""
        layer, cfg = self.layer, self.cfg
        div = 2 if layer.pool else 1
        oh, ow = layer.out_h // div, layer.out_w // div
        index = np.full((layer.out_channels, oh, ow), -1, np.int64)
        position = 0
        for tile, words in zip(self.tiles, self.result_words):
            if not words:
                continue
            per_pixel = -(-tile.oc_count // cfg.rows) * cfg.rows
            order = np.array(pixel_order(tile.th, tile.tw, layer.pool))
            if layer.pool:
                order = order[::4]
            ys = (tile.oy0 + order[:, 0]) // div
            xs = (tile.ox0 + order[:, 1]) // div
            oc_first = tile.group * layer.group_out + tile.oc0
            n = np.arange(len(order))
            for k in range(tile.oc_count):
                index[oc_first + k, ys, xs] = position + n * per_pixel + k
            position += words * cfg.link_bytes
        if (index < 0).any():
            raise AssertionError(f"{layer.name}: the tiles leave outputs uncovered")
        self.image_result_bytes = position
        # (np.take with an int32 index: several times faster than fancy indexing here)
        return index.astype(np.int32) if position < 1 << 31 else index

    def results(self, got, images):
        """int8 (N, OC, OH', OW') from the result bytes of ``images`` images."""
        raw = np.frombuffer(got, np.int8).reshape(images, self.image_result_bytes)
        return np.take(raw, self._index, axis=1)
