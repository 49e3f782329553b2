"""The network program: what the compiler (host/conv/compile.py) and the quantiser
(host/conv/quantize.py) produce and what every device runs, written once.  The golden model
(sim/models/network_model.py) runs it with the int8 layer arithmetic; the host runners
(host/conv/network_run.py, image_infer.py) run its engine layers on a device and its host
operations here.  It imports nothing of the project, so that the golden model may import it
(the import rule's one contract exception, tests/import_rule.py).

A :class:`NetworkProgram` numbers its values: value 0 is the quantised input, every operation
writes one new value.  All arithmetic is integer, so a device's result is either equal to the
golden model or wrong.

Host operations, defined here bit for bit:

* ``max_pool`` (k, s, p): a max pool the engine cannot fuse (it fuses only 2x2/stride 2
  after a convolution), e.g. ResNet's 3x3/stride-2 stem pool; padding reads as -128, which
  no int8 value is below, so it is torch's -inf padding.
* ``global_avg_pool``: the mean over H x W rounded half up, ``floor((2 sum + HW) / 2HW)``, in
  the input's scale (a mean of int8 values is an int8 value).

The input's quantisation, ``clamp(floor(x / scale + 1/2), -128, 127)`` on float32 data, is
:func:`quantize_input`, and the input's check :func:`check_input`; every device calls the
same functions.
"""

from dataclasses import dataclass, field

import numpy as np

__all__ = ["EngineLayer", "HostOp", "NetworkProgram", "HOST_OPS", "quantize_input",
           "check_input", "max_pool", "global_avg_pool", "run_host_op"]

#: the kinds of :class:`HostOp`
HOST_OPS = ("max_pool", "global_avg_pool")


@dataclass
class EngineLayer:
    """One convolution (or fully connected layer as a convolution) with its fused
    post-operations, quantised: what one engine layer computes."""
    name: str
    source: int
    output: int
    weight: np.ndarray          # int8 (OC, C/groups, KH, KW)
    bias: np.ndarray            # int32 (OC)
    multiplier: np.ndarray      # int64 (OC), 0 < m < 2**31
    shift: np.ndarray           # int64 (OC), 1..62
    stride: int = 1
    padding: int = 0
    groups: int = 1
    relu: bool = False
    pool: bool = False
    residual: int | None = None

    @property
    def kind(self):
        return "engine"


@dataclass
class HostOp:
    """An operation the host runs between engine layers (see the module's docstring)."""
    name: str
    kind: str
    source: int
    output: int
    kernel: int = 1
    stride: int = 1
    padding: int = 0


@dataclass
class NetworkProgram:
    """A quantised network: its operations in order, the scales of its input and output,
    and the shapes (C, H, W) of every value (batch left out)."""
    input_scale: float
    output_scale: float
    ops: list
    shapes: dict
    output: int
    flatten_output: bool = True
    scales: dict = field(default_factory=dict)

    @property
    def input_shape(self):
        return self.shapes[0]

    def engine_layers(self):
        return [op for op in self.ops if op.kind == "engine"]


def quantize_input(x, scale):
    """float (N, C, H, W) -> int8, round half up, saturating (the host's first step)."""
    x = np.asarray(x, dtype=np.float32)
    q = np.floor(x / np.float32(scale) + np.float32(0.5))
    return np.clip(q, -128, 127).astype(np.int8)


def check_input(program, x):
    """``x`` as an array, or a clear error if it is not the network's int8 (N, C, H, W)."""
    x = np.asarray(x)
    if x.dtype != np.int8:
        raise TypeError(f"the network's input must be int8 (quantize_input), got {x.dtype}")
    if x.ndim != 4 or x.shape[1:] != tuple(program.input_shape):
        raise ValueError(f"input shape {x.shape[1:]} is not the network's "
                         f"{tuple(program.input_shape)} (N, C, H, W)")
    return x


def max_pool(y, kernel, stride, padding):
    """Max pool of int8 (N, C, H, W), padding as -128 (torch's, ceil_mode off)."""
    n, c, h, w = y.shape
    oh = (h + 2 * padding - kernel) // stride + 1
    ow = (w + 2 * padding - kernel) // stride + 1
    if oh < 1 or ow < 1:
        raise ValueError(f"a {kernel}x{kernel} pool does not fit {h}x{w} with padding {padding}")
    p = np.pad(y, ((0, 0), (0, 0), (padding, padding), (padding, padding)),
               constant_values=-128)
    out = np.full((n, c, oh, ow), -128, np.int8)
    for ky in range(kernel):
        for kx in range(kernel):
            out = np.maximum(out, p[:, :, ky:ky + stride * (oh - 1) + 1:stride,
                                    kx:kx + stride * (ow - 1) + 1:stride])
    return out


def global_avg_pool(y):
    """int8 (N, C, H, W) -> int8 (N, C, 1, 1): the mean, rounded half up."""
    n, c, h, w = y.shape
    total = y.astype(np.int64).sum(axis=(2, 3), keepdims=True)
    area = h * w
    return ((2 * total + area) // (2 * area)).astype(np.int8)


def run_host_op(op, y):
    """The int8 output of :class:`HostOp` ``op`` on its int8 input ``y``."""
    if op.kind == "max_pool":
        return max_pool(y, op.kernel, op.stride, op.padding)
    if op.kind == "global_avg_pool":
        return global_avg_pool(y)
    raise ValueError(f"{op.name}: unknown host operation {op.kind!r}")
