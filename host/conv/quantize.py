"""Post-training quantisation of a compiled network to the engine's int8 contract.

Our own PTQ rather than torch.ao's: the engine's arithmetic is fixed (symmetric int8
activations without zero points, per-output-channel int8 weights, an int32 bias, a
per-channel multiplier and shift with round half up, the residual added in the output's
scale), and torch.ao's FX flow produces asymmetric uint8 activations with zero points and
float requantisation that would have to be converted and re-rounded anyway; its FX graph mode
is also deprecated in the pinned torch in favour of PT2E, whose quantizers are backend
specific.  The rules, each a line below:

* batch norms are already folded into the weights by the compiler (host/conv/compile.py);
* weights: per output channel, scale ``max |w| / 127``, rounded to nearest;
* activations: symmetric, scale ``max |v| / 127`` over the calibration batch;
* values that must share a scale share one (the largest of their ranges): a layer's output
  and its residual (so the engine's fused add is exact), a host pool's input and output;
* bias: ``round(b / (s_in * s_w))`` in int32; requantisation ``s_in * s_w / s_out`` as a
  31-bit multiplier ``m`` in [2**30, 2**31) and a shift.
"""

import numpy as np

from dlforge.host.conv.compile import run_float
from dlforge.host.conv.program import EngineLayer, HostOp, NetworkProgram

__all__ = ["calibrate", "quantize", "requant_parameters"]


def calibrate(net, x, batch=64):
    """Every value's largest magnitude over a float calibration set (N, C, H, W)."""
    absmax = {}
    x = np.asarray(x, np.float32)
    if len(x) == 0:
        raise ValueError("calibration needs at least one input")
    for start in range(0, len(x), batch):
        run_float(net, x[start:start + batch], absmax)
    return absmax


def requant_parameters(factor):
    """``(m, s)`` with ``m / 2**s`` nearest ``factor`` (> 0): 0 < m < 2**31, 1 <= s <= 62."""
    factor = np.asarray(factor, np.float64)
    if np.any(factor <= 0) or not np.all(np.isfinite(factor)):
        raise ValueError("requantisation factors must be positive and finite")
    frac, exp = np.frexp(factor)                 # factor = frac * 2**exp, frac in [0.5, 1)
    m = np.rint(frac * 2.0 ** 31).astype(np.int64)
    shift = 31 - exp.astype(np.int64)
    carry = m == 1 << 31
    m[carry] >>= 1
    shift[carry] -= 1
    if np.any(shift < 1):
        raise ValueError(f"a requantisation factor of {factor.max():.3g} is beyond the "
                         "engine's range (at most 2**30)")
    small = shift > 62
    if np.any(small):
        m[small] = np.maximum(np.rint(factor[small] * 2.0 ** 62), 1).astype(np.int64)
        shift[small] = 62
    return m, shift


class _Groups:
    """Union-find over values that must share a scale."""

    def __init__(self):
        self.parent = {}

    def find(self, v):
        self.parent.setdefault(v, v)
        while self.parent[v] != v:
            self.parent[v] = self.parent[self.parent[v]]
            v = self.parent[v]
        return v

    def union(self, a, b):
        self.parent[self.find(a)] = self.find(b)


def _scales(net, absmax):
    groups = _Groups()
    for op in net.ops:
        groups.find(op.output)
        if op.kind == "engine" and op.residual is not None:
            groups.union(op.output, op.residual)
        elif op.kind != "engine":
            groups.union(op.output, op.source)
    groups.find(0)
    reach = {}
    for v, top in absmax.items():
        root = groups.find(v)
        reach[root] = max(reach.get(root, 0.0), top)
    scales = {}
    for v in absmax:
        top = reach[groups.find(v)]
        scales[v] = top / 127.0 if top > 0 else 1.0
    return scales


def quantize(net, calibration, batch=64):
    """The :class:`NetworkProgram` of a :class:`FloatNetwork`, scales from ``calibration``
    (float inputs as the model takes them)."""
    absmax = calibrate(net, calibration, batch)
    scales = _scales(net, absmax)
    ops = []
    for op in net.ops:
        if op.kind != "engine":
            ops.append(HostOp(op.name, op.kind, op.source, op.output, op.kernel, op.stride,
                              op.padding))
            continue
        s_in, s_out = scales[op.source], scales[op.output]
        w = op.weight
        top = np.abs(w).reshape(len(w), -1).max(axis=1)
        s_w = np.where(top > 0, top / 127.0, 1.0)
        wq = np.clip(np.rint(w / s_w[:, None, None, None]), -127, 127).astype(np.int8)
        bq = np.rint(op.bias / (s_in * s_w))
        if np.abs(bq).max(initial=0) >= 2 ** 31:
            raise ValueError(f"{op.name}: its bias does not fit int32 at the input's scale "
                             f"{s_in:.3g}")
        m, s = requant_parameters(s_in * s_w / s_out)
        ops.append(EngineLayer(op.name, op.source, op.output, wq, bq.astype(np.int32), m, s,
                               op.stride, op.padding, op.groups, op.relu, op.pool,
                               op.residual))
    return NetworkProgram(scales[0], scales[net.output], ops, dict(net.shapes), net.output,
                          net.flatten_output, scales)
