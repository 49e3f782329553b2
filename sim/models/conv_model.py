"""Golden model of the convolution engine's int8 arithmetic contract (BRIEF section 3).

Every figure the engine produces is defined here, bit for bit:

* ``acc = conv2d(x, w, stride, padding (zeros), groups) + bias``, exact; the contract keeps it
  inside int32 (:func:`accumulate` raises otherwise: such a layer is outside the contract).
* ``q = (acc * m[oc] + 2**(s[oc] - 1)) >> s[oc]``: a 64-bit product (it cannot overflow:
  ``|acc| < 2**31``, ``m < 2**31``, ``s <= 62``) and an arithmetic (floor) shift, so the
  rounding is half-up.
* ``y = clamp(q + r, lo, 127)`` with ``r`` the optional int8 residual (the second tensor of a
  ResNet shortcut, already in the output's scale; 0 without one) and ``lo = 0`` with ReLU,
  else ``-128``.  The residual is added before the clamp, so ``q + r`` saturates once.
* optional 2x2/stride-2 max pool of ``y`` (an odd last row or column is dropped, as
  ``torch.nn.functional.max_pool2d`` does).

Convolution sums go through float64 matrix products: every partial sum is an integer below
2**53 in magnitude, so they are exact and as fast as BLAS.
"""

import numpy as np

__all__ = ["accumulate", "check_requant", "requantize", "max_pool2", "conv_layer", "output_size"]

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def output_size(size, kernel, stride, padding):
    out = (size + 2 * padding - kernel) // stride + 1
    if out < 1:
        raise ValueError(f"kernel {kernel} does not fit an input of {size} with padding {padding}")
    return out


def _check_int8(name, array):
    array = np.asarray(array)
    if array.dtype != np.int8:
        raise TypeError(f"{name} must be int8, got {array.dtype}")
    return array


def accumulate(x, w, bias=None, stride=1, padding=0, groups=1):
    """The int32 accumulators (as int64) of an int8 convolution: (N, OC, OH, OW)."""
    x = _check_int8("x", x)
    w = _check_int8("w", w)
    if x.ndim != 4 or w.ndim != 4:
        raise ValueError("x must be (N, C, H, W) and w (OC, C/groups, KH, KW)")
    n, c, h, wd = x.shape
    oc, cg, kh, kw = w.shape
    if c % groups or oc % groups or cg != c // groups:
        raise ValueError(f"{c} input and {oc} output channels do not split into {groups} groups "
                         f"of {cg} input channels")
    oh, ow = output_size(h, kh, stride, padding), output_size(wd, kw, stride, padding)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    # Windows: (N, C, OH, OW, KH, KW) as a view, then per group one matrix product.
    sn, sc, sh, sw = xp.strides
    win = np.lib.stride_tricks.as_strided(
        xp, (n, c, oh, ow, kh, kw), (sn, sc, sh * stride, sw * stride, sh, sw), writeable=False)
    ocg = oc // groups
    acc = np.empty((n, oc, oh, ow), dtype=np.int64)
    for g in range(groups):
        cols = win[:, g * cg:(g + 1) * cg].transpose(0, 2, 3, 1, 4, 5).reshape(n * oh * ow, -1)
        wmat = w[g * ocg:(g + 1) * ocg].reshape(ocg, -1).astype(np.float64)
        part = cols @ wmat.T                                     # (N*OH*OW, OCg), exact
        acc[:, g * ocg:(g + 1) * ocg] = part.reshape(n, oh, ow, ocg).transpose(0, 3, 1, 2)
    if bias is not None:
        bias = np.asarray(bias)
        if bias.shape != (oc,) or bias.dtype != np.int32:
            raise ValueError(f"bias must be int32 of shape ({oc},)")
        acc += bias.astype(np.int64)[None, :, None, None]
    if acc.size and (acc.min() < INT32_MIN or acc.max() > INT32_MAX):
        raise OverflowError("accumulator leaves int32: the layer is outside the arithmetic "
                            "contract (reduce the bias or the reduction length)")
    return acc


def check_requant(multiplier, shift, channels):
    m = np.asarray(multiplier)
    s = np.asarray(shift)
    if m.shape != (channels,) or s.shape != (channels,):
        raise ValueError(f"multiplier and shift must have shape ({channels},)")
    if not np.issubdtype(m.dtype, np.integer) or not np.issubdtype(s.dtype, np.integer):
        raise TypeError("multiplier and shift must be integers")
    if m.min() <= 0 or m.max() >= 1 << 31:
        raise ValueError("multiplier must satisfy 0 < m < 2**31")
    if s.min() < 1 or s.max() > 62:
        raise ValueError("shift must satisfy 1 <= s <= 62")
    return m.astype(np.int64), s.astype(np.int64)


def requantize(acc, multiplier, shift, residual=None, relu=False):
    """int8 outputs from accumulators (N, OC, OH, OW): round half up, residual, clamp."""
    acc = np.asarray(acc, dtype=np.int64)
    m, s = check_requant(multiplier, shift, acc.shape[1])
    m, s = m[None, :, None, None], s[None, :, None, None]
    q = (acc * m + (np.int64(1) << (s - 1))) >> s
    if residual is not None:
        residual = _check_int8("residual", residual)
        if residual.shape != acc.shape:
            raise ValueError(f"residual shape {residual.shape} is not the output's {acc.shape}")
        q = q + residual.astype(np.int64)
    return np.clip(q, 0 if relu else -128, 127).astype(np.int8)


def max_pool2(y):
    """2x2 max pool, stride 2, over (N, C, H, W); an odd last row or column is dropped."""
    n, c, h, w = y.shape
    if h < 2 or w < 2:
        raise ValueError(f"a 2x2 pool needs at least 2x2 outputs, got {h}x{w}")
    y = y[:, :, :h // 2 * 2, :w // 2 * 2]
    return y.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))


def conv_layer(x, w, bias=None, multiplier=None, shift=None, stride=1, padding=0, groups=1,
               relu=False, pool=False, residual=None):
    """One layer as the engine runs it: int8 in, int8 out (or the int32 accumulators as int64
    when no multiplier and shift are given)."""
    acc = accumulate(x, w, bias, stride, padding, groups)
    if multiplier is None and shift is None:
        if relu or pool or residual is not None:
            raise ValueError("ReLU, pooling and the residual need a multiplier and a shift")
        return acc
    if multiplier is None or shift is None:
        raise ValueError("give both multiplier and shift, or neither")
    y = requantize(acc, multiplier, shift, residual, relu)
    return max_pool2(y) if pool else y
