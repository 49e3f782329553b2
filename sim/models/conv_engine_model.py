"""The convolution engine at the link level, in Python: link words in, result words out, with
the engine's buffers and their double-buffer halves (rtl/conv/engine.py).

It pins down the meaning of the link formats (rtl/conv/descriptor.py) independently of the
gateware: the host's packing (host/conv/link_words.py) is tested against it, and the RTL testbench
can compare tile by tile when a layer goes wrong.
"""


import numpy as np
from amaranth import Shape

from dlforge.rtl.conv.descriptor import (DescriptorError as E, MAGIC, PARAM_RECORD_BYTES,
                                         TileDescriptor, pixel_order)

__all__ = ["EngineModel", "EngineError"]


class EngineError(Exception):
    """A descriptor the engine refuses, with the engine's own error code, so tests can
    check that the RTL refuses the same descriptors with the same code."""

    def __init__(self, code):
        super().__init__(f"descriptor refused: {E(code).name}")
        self.code = E(code)


def _signed(value, bits):
    return value - (1 << bits) if value >> (bits - 1) else value


class EngineModel:
    """The engine word by word: the same descriptors and buffers as the RTL, so that a
    testbench can compare the engine's outputs and refusals with it, not only a layer's
    result."""

    def __init__(self, cfg):
        self.cfg = cfg
        r, c = cfg.rows, cfg.cols
        self.weights = [np.zeros((cfg.weight_depth, r * c, cfg.simd), np.int64) for _ in range(2)]
        self.inputs = [np.zeros((cfg.input_depth + 64, cfg.simd), np.int64) for _ in range(2)]
        self.params = [np.zeros((r * c, 3), np.int64) for _ in range(2)]
        self.residual = [np.zeros((cfg.psum_depth * c, r), np.int64) for _ in range(2)]
        self.psum = np.zeros((cfg.psum_depth, r * c), np.int64)
        self.current = {"w": 1, "i": 1, "p": 1, "r": 1}

    def _check(self, d):
        cfg = self.cfg
        if d["magic"] != MAGIC:
            raise EngineError(E.BAD_MAGIC)
        if d["kh"] == 0 or d["kw"] == 0:
            raise EngineError(E.BAD_KERNEL)
        if d["stride"] not in (1, 2):
            raise EngineError(E.BAD_STRIDE)
        if 0 in (d["vectors"], d["ih"], d["iw"], d["th"], d["tw"]):
            raise EngineError(E.ZERO_SIZE)
        if not 1 <= d["oc_count"] <= cfg.channels:
            raise EngineError(E.BAD_CHANNELS)
        if d["pool"] and (d["th"] % 2 or d["tw"] % 2):
            raise EngineError(E.BAD_POOL)
        if d["y_off"] > 0 or d["x_off"] > 0:
            raise EngineError(E.BAD_OFFSET)
        if d["kh"] * d["kw"] * d["vectors"] > cfg.weight_depth:
            raise EngineError(E.WEIGHTS_TOO_BIG)
        if d["vectors"] * d["ih"] * d["iw"] > cfg.input_depth:
            raise EngineError(E.INPUTS_TOO_BIG)
        if d["th"] * d["tw"] > cfg.psum_depth:
            raise EngineError(E.PIXELS_TOO_BIG)

    def run(self, words):
        """Consume whole tiles from ``words`` (ints); return the result words."""
        cfg = self.cfg
        lb, bits, s = cfg.link_bytes, cfg.operand_bits, cfg.simd
        out = []
        pos = 0

        def take(n):
            nonlocal pos
            chunk = words[pos:pos + n]
            if len(chunk) < n:
                raise ValueError("the words end inside a tile")
            pos += n
            return b"".join(w.to_bytes(lb, "little") for w in chunk)

        def operands(raw, count):
            dtype = np.dtype("<i1") if bits == 8 else np.dtype("<i2")
            return np.frombuffer(raw[:count * s * bits // 8], dtype).astype(np.int64).reshape(count, s)

        while pos < len(words):
            raw = words[pos] & ((1 << TileDescriptor.size) - 1)
            pos += 1
            d = _unpack(raw)
            self._check(d)
            rows_per_pixel = -(-d["oc_count"] // cfg.rows)
            if d["first"]:
                h = self.current["p"] ^ 1
                raw_p = take(-(-d["oc_count"] * PARAM_RECORD_BYTES // lb))
                for ch in range(d["oc_count"]):
                    rec = raw_p[ch * PARAM_RECORD_BYTES:]
                    self.params[h][ch] = [int.from_bytes(rec[0:4], "little", signed=True),
                                          int.from_bytes(rec[4:8], "little"), rec[8]]
                self.current["p"] = h
            k_count = d["kh"] * d["kw"] * d["vectors"]
            if d["load_weights"]:
                h = self.current["w"] ^ 1
                per_k = -(-d["oc_count"] * cfg.vector_bytes // lb)
                for k in range(k_count):
                    self.weights[h][k, :d["oc_count"]] = operands(take(per_k), d["oc_count"])
                self.current["w"] = h
            n_in = d["vectors"] * d["ih"] * d["iw"]
            if d["load_inputs"]:
                h = self.current["i"] ^ 1
                self.inputs[h][:n_in] = operands(take(-(-n_in * cfg.vector_bytes // lb)), n_in)
                self.current["i"] = h
            pixels = pixel_order(d["th"], d["tw"], d["pool"])
            if d["last"] and d["residual"]:
                h = self.current["r"] ^ 1
                n_rows = len(pixels) * rows_per_pixel
                raw_r = take(-(-n_rows * cfg.rows // lb))
                self.residual[h][:n_rows] = np.frombuffer(raw_r[:n_rows * cfg.rows], np.int8) \
                    .astype(np.int64).reshape(n_rows, cfg.rows)
                self.current["r"] = h
            out += self._compute(d, pixels, rows_per_pixel)
        return out

    def _compute(self, d, pixels, rows_per_pixel):
        cfg = self.cfg
        w = self.weights[self.current["w"]]
        x = self.inputs[self.current["i"]]
        params = self.params[self.current["p"]]
        n = d["oc_count"]
        results = []
        acc_mod = 1 << cfg.acc_bits
        for index, (y, xo) in enumerate(pixels):
            acc = np.zeros(n, np.int64)
            for ky in range(d["kh"]):
                for kx in range(d["kw"]):
                    iy = y * d["stride"] + ky + d["y_off"]
                    ix = xo * d["stride"] + kx + d["x_off"]
                    if not (0 <= iy < d["ih"] and 0 <= ix < d["iw"]):
                        continue
                    for v in range(d["vectors"]):
                        k = (ky * d["kw"] + kx) * d["vectors"] + v
                        vec = x[(iy * d["iw"] + ix) * d["vectors"] + v]
                        acc += w[k, :n] @ vec
            value = acc + (params[:n, 0] if d["first"] else self.psum[index, :n])
            value = (value + acc_mod // 2) % acc_mod - acc_mod // 2
            if not d["last"]:
                self.psum[index, :n] = value
                continue
            m, sh = params[:n, 1], params[:n, 2]
            q = np.array([(int(a) * int(mm) + (1 << (int(ss) - 1))) >> int(ss)
                          for a, mm, ss in zip(value, m, sh)], np.int64)
            if d["residual"]:
                rows = self.residual[self.current["r"]][index * rows_per_pixel:
                                                         (index + 1) * rows_per_pixel].ravel()
                q = q + rows[:n]
            results.append(np.clip(q, 0 if d["relu"] else -128, 127))
        if not d["last"]:
            return []
        if d["pool"]:
            results = [np.max(results[i:i + 4], axis=0) for i in range(0, len(results), 4)]
        raw = b""
        for r in results:
            padded = np.zeros(rows_per_pixel * cfg.rows, np.int8)
            padded[:n] = r
            raw += padded.tobytes()
        raw += bytes(-len(raw) % cfg.link_bytes)
        return [int.from_bytes(raw[i:i + cfg.link_bytes], "little")
                for i in range(0, len(raw), cfg.link_bytes)]


def _unpack(raw):
    fields = {}
    for name, field in TileDescriptor:
        width = field.width
        value = (raw >> field.offset) & ((1 << width) - 1)
        fields[name] = _signed(value, width) if Shape.cast(field.shape).signed else value
    return fields
