"""Per-layer tiling for the convolution engine (FlexCNN's dynamic tiling) and the analytic
cycle model it optimises.

A layer is cut into tiles: a block of up to ``rows * cols`` output channels (one per PE), a
rectangle of output pixels, and a slice of the input channels.  The engine works through the
tiles in the plan's order with three units running at once (docs/conv-engine.md):

* the *loader* takes a tile's descriptor, weights (skipped when the tile uses the weights of
  the tile before it), per-channel parameters (one channel per clock), inputs (skipped
  likewise) and residual from the link, one word per clock, into the free half of each double
  buffer;
* the *array* computes the tile once its data is in and the tile before it is done: each output
  pixel takes ``max(KH * KW * ceil(tic / simd), cols)`` clocks (the dot product, or the
  ``cols``-clock drain of the PE row chains when the dot product is shorter), plus
  :func:`tile_overhead` clocks per tile;
* the *unloader* sends a tile's int8 results (after the last input-channel slice) while the
  array goes on.

:func:`predict_cycles` runs that schedule; :func:`plan_layer` searches tile sizes and loop
order for the fewest predicted cycles within the buffer sizes.
"""

import itertools
import math
from dataclasses import dataclass

from dlforge.rtl.conv.descriptor import DESCRIPTOR_BYTES
from dlforge.rtl.conv.pe_array import LATENCY as ARRAY_LATENCY
from dlforge.rtl.conv.post import POST_LATENCY
from dlforge.rtl.conv.walker import START_LATENCY as WALKER_START

__all__ = ["LayerShape", "Tile", "Plan", "PlanError", "tiles_for", "predict_cycles",
           "plan_layer", "brute_force_plan", "utilization", "tile_overhead", "ORDERS"]

#: Clocks a tile costs the array beyond its pixels: the walker's start, the operand read, the
#: array's pipeline and column drain, the post-processing lanes, and the compute unit's two
#: bookkeeping clocks (IDLE -> START, DRAIN -> IDLE).
def tile_overhead(cfg):
    return WALKER_START + 1 + ARRAY_LATENCY + cfg.cols - 1 + POST_LATENCY + 2

ORDERS = ("oc_outer", "pixel_outer")


class PlanError(ValueError):
    """A layer or tile the engine cannot run, with the reason."""


@dataclass(frozen=True)
class LayerShape:
    """One convolution layer's geometry and post-operations (batch 1)."""
    name: str
    in_channels: int
    height: int
    width: int
    out_channels: int
    kernel: int | tuple = 3
    stride: int = 1
    padding: int = 0
    groups: int = 1
    relu: bool = False
    pool: bool = False
    residual: bool = False

    @property
    def kh(self):
        return self.kernel[0] if isinstance(self.kernel, tuple) else self.kernel

    @property
    def kw(self):
        return self.kernel[1] if isinstance(self.kernel, tuple) else self.kernel

    @property
    def out_h(self):
        return (self.height + 2 * self.padding - self.kh) // self.stride + 1

    @property
    def out_w(self):
        return (self.width + 2 * self.padding - self.kw) // self.stride + 1

    @property
    def work_h(self):
        """Output rows the engine computes: a pool drops an odd last row, so it is not computed."""
        return self.out_h // 2 * 2 if self.pool else self.out_h

    @property
    def work_w(self):
        return self.out_w // 2 * 2 if self.pool else self.out_w

    @property
    def group_in(self):
        return self.in_channels // self.groups

    @property
    def group_out(self):
        return self.out_channels // self.groups

    @property
    def macs(self):
        return self.out_channels * self.out_h * self.out_w * self.group_in * self.kh * self.kw

    def check(self, cfg):
        """Raise PlanError when the engine cannot run this layer at all."""
        for name in ("in_channels", "height", "width", "out_channels", "stride", "groups"):
            if getattr(self, name) < 1:
                raise PlanError(f"{self.name}: {name} must be at least 1")
        if not (1 <= self.kh <= 7 and 1 <= self.kw <= 7):
            raise PlanError(f"{self.name}: kernel {self.kh}x{self.kw} unsupported (1x1 to 7x7)")
        if self.stride not in (1, 2):
            raise PlanError(f"{self.name}: stride {self.stride} unsupported (1 or 2)")
        if self.padding < 0 or self.padding >= max(self.kh, self.kw):
            raise PlanError(f"{self.name}: padding {self.padding} unsupported "
                            f"(0 to kernel size - 1)")
        if self.in_channels % self.groups or self.out_channels % self.groups:
            raise PlanError(f"{self.name}: channels do not split into {self.groups} groups")
        if self.out_h < 1 or self.out_w < 1:
            raise PlanError(f"{self.name}: the kernel does not fit the padded input")
        if self.pool and (self.out_h < 2 or self.out_w < 2):
            raise PlanError(f"{self.name}: a 2x2 pool needs at least 2x2 outputs")
        if self.group_in * self.kh * self.kw > cfg.max_reduction:
            raise PlanError(f"{self.name}: a dot product of {self.group_in * self.kh * self.kw} "
                            f"exceeds the engine's max_reduction {cfg.max_reduction}")


@dataclass(frozen=True)
class Tile:
    """One descriptor's worth of work."""
    group: int
    oc0: int            # first output channel, within the group
    oc_count: int       # at most rows * cols
    oy0: int
    th: int             # output rows
    ox0: int
    tw: int             # output columns
    ic0: int            # first input channel, within the group
    tic: int            # input channels
    first: bool         # ic0 == 0: accumulators start from the bias
    last: bool          # the last input-channel slice: requantise and send
    load_weights: bool
    load_inputs: bool


@dataclass(frozen=True)
class Plan:
    """A layer's tiling (tile height, width, input channels, loop order) and its predicted
    cycles: what the planner chooses per layer and what the runner and the engine follow."""

    layer: LayerShape
    th: int
    tw: int
    tic: int
    order: str
    cycles: int

    def tiles(self, cfg):
        return tiles_for(self.layer, cfg, self.th, self.tw, self.tic, self.order)

    def as_dict(self):
        return {"th": self.th, "tw": self.tw, "tic": self.tic, "order": self.order}


def _input_span(o0, count, stride, kernel, padding, size):
    """Input rows (or columns) a run of outputs reads, clipped to the image: (first, count)."""
    lo = o0 * stride - padding
    hi = (o0 + count - 1) * stride - padding + kernel
    lo, hi = max(lo, 0), min(hi, size)
    return lo, max(hi - lo, 0)


def check_tile_sizes(layer, cfg, th, tw, tic):
    """Raise PlanError when tiles of this size do not fit the engine's buffers."""
    s = cfg.simd
    if th < 1 or tw < 1 or tic < 1:
        raise PlanError(f"{layer.name}: tile sizes must be at least 1 (got {th}x{tw}x{tic})")
    if th > layer.work_h or tw > layer.work_w or tic > layer.group_in:
        raise PlanError(f"{layer.name}: tile {th}x{tw}x{tic} is larger than the layer")
    if tic % s and tic != layer.group_in:
        raise PlanError(f"{layer.name}: input-channel slices must be multiples of simd {s}")
    vectors = math.ceil(tic / s)
    if layer.kh * layer.kw * vectors > cfg.weight_depth:
        raise PlanError(f"{layer.name}: {layer.kh * layer.kw * vectors} weight words per PE "
                        f"exceed the weight buffer ({cfg.weight_depth})")
    ih = (th - 1) * layer.stride + layer.kh
    iw = (tw - 1) * layer.stride + layer.kw
    if vectors * ih * iw > cfg.input_depth:
        raise PlanError(f"{layer.name}: {vectors * ih * iw} input words exceed the input "
                        f"buffer ({cfg.input_depth})")
    if th * tw > cfg.psum_depth:
        raise PlanError(f"{layer.name}: {th * tw} pixels exceed the partial-sum/output "
                        f"buffer ({cfg.psum_depth})")
    if layer.pool and (th % 2 or tw % 2):
        raise PlanError(f"{layer.name}: with pooling, tiles must have even sizes")


def tiles_for(layer, cfg, th, tw, tic, order):
    """The tiles of a layer in execution order (input-channel slices innermost)."""
    check_tile_sizes(layer, cfg, th, tw, tic)
    if order not in ORDERS:
        raise PlanError(f"unknown order {order!r}; known: {', '.join(ORDERS)}")
    block = min(cfg.channels, layer.group_out)
    oc_blocks = [(o, min(block, layer.group_out - o)) for o in range(0, layer.group_out, block)]
    pixels = [(y, min(th, layer.work_h - y), x, min(tw, layer.work_w - x))
              for y in range(0, layer.work_h, th) for x in range(0, layer.work_w, tw)]
    slices = [(c, min(tic, layer.group_in - c)) for c in range(0, layer.group_in, tic)]
    tiles = []
    prev_w = prev_i = None
    for g in range(layer.groups):
        outer = (itertools.product(oc_blocks, pixels) if order == "oc_outer" else
                 ((ob, px) for px, ob in itertools.product(pixels, oc_blocks)))
        for (oc0, occ), (oy0, h, ox0, w) in outer:
            for n, (ic0, icc) in enumerate(slices):
                wkey, ikey = (g, oc0, ic0), (g, oy0, ox0, ic0)
                tiles.append(Tile(g, oc0, occ, oy0, h, ox0, w, ic0, icc, n == 0,
                                  n == len(slices) - 1, wkey != prev_w, ikey != prev_i))
                prev_w, prev_i = wkey, ikey
    return tiles


def _words(nbytes, cfg):
    return -(-nbytes // cfg.link_bytes)


def tile_costs(layer, cfg, tile):
    """(load, compute, unload) clocks of one tile, in the link formats of rtl/conv/descriptor."""
    vb = cfg.vector_bytes
    vectors = math.ceil(tile.tic / cfg.simd)
    result_rows = -(-tile.oc_count // cfg.rows) * cfg.rows         # bytes per output pixel
    load = _words(DESCRIPTOR_BYTES, cfg)
    if tile.load_weights:
        load += layer.kh * layer.kw * vectors * _words(tile.oc_count * vb, cfg)
    if tile.first:
        load += tile.oc_count                       # one parameter record per clock
    if tile.load_inputs:
        _, ih = _input_span(tile.oy0, tile.th, layer.stride, layer.kh, layer.padding, layer.height)
        _, iw = _input_span(tile.ox0, tile.tw, layer.stride, layer.kw, layer.padding, layer.width)
        load += _words(vectors * ih * iw * vb, cfg)
    if tile.last and layer.residual:
        load += _words(tile.th * tile.tw * result_rows, cfg)
    period = max(layer.kh * layer.kw * vectors, cfg.cols)
    compute = tile.th * tile.tw * period + tile_overhead(cfg)
    unload = 0
    if tile.last:
        pixels = tile.th * tile.tw // 4 if layer.pool else tile.th * tile.tw
        unload = _words(pixels * result_rows, cfg)
    return load, compute, unload


def predict_cycles(layer, cfg, tiles):
    """Clocks from the first descriptor word to the last result word."""
    load_end = compute_end = unload_end = 0
    compute_hist = [0, 0]       # compute ends of the two tiles before, for the double buffers
    unload_hist = [0, 0]
    for tile in tiles:
        load, compute, unload = tile_costs(layer, cfg, tile)
        # The loader fills the half the tile two back computed from.
        start = max(load_end, compute_hist[0])
        load_end = start + load
        start = max(load_end, compute_end, unload_hist[0])
        compute_end = start + compute
        if unload:
            unload_end = max(compute_end, unload_end) + unload
        compute_hist = [compute_hist[1], compute_end]
        unload_hist = [unload_hist[1], unload_end]
    return max(compute_end, unload_end)


def _candidates(n, even=False):
    """Tile sizes that give each possible number of equal tiles: ceil(n / k) for k = 1..n
    (in pairs when ``even``)."""
    if even:
        return [2 * size for size in _candidates(n // 2)]
    return sorted({-(-n // k) for k in range(1, n + 1)}, reverse=True)


def _slice_candidates(layer, cfg):
    vectors = math.ceil(layer.group_in / cfg.simd)
    sizes = {min(layer.group_in, cfg.simd * v) for v in _candidates(vectors)}
    return sorted(sizes, reverse=True)


def _lower_bound(layer, cfg, th, tw, tic):
    """Clocks the array alone needs for these tile sizes: no plan of them is faster."""
    slices = [min(tic, layer.group_in - c) for c in range(0, layer.group_in, tic)]
    periods = sum(max(layer.kh * layer.kw * math.ceil(t / cfg.simd), cfg.cols) for t in slices)
    blocks = math.ceil(layer.group_out / cfg.channels) * layer.groups
    pixel_tiles = math.ceil(layer.work_h / th) * math.ceil(layer.work_w / tw)
    return blocks * (layer.work_h * layer.work_w * periods
                     + pixel_tiles * len(slices) * tile_overhead(cfg))


def plan_layer(layer, cfg):
    """The plan with the fewest predicted cycles among equal-size tilings (branch and bound
    on the array's own time)."""
    layer.check(cfg)
    options = []
    for th, tw, tic in itertools.product(_candidates(layer.work_h, layer.pool),
                                         _candidates(layer.work_w, layer.pool),
                                         _slice_candidates(layer, cfg)):
        try:
            check_tile_sizes(layer, cfg, th, tw, tic)
        except PlanError:
            continue
        options.append((_lower_bound(layer, cfg, th, tw, tic), th, tw, tic))
    if not options:
        raise PlanError(f"{layer.name}: no tiling fits the engine's buffers "
                        f"(even 1x1 pixels and {cfg.simd} input channels)")
    best = None
    for bound, th, tw, tic in sorted(options):
        if best is not None and bound >= best.cycles:
            break
        for order in ORDERS:
            cycles = predict_cycles(layer, cfg, tiles_for(layer, cfg, th, tw, tic, order))
            if best is None or cycles < best.cycles:
                best = Plan(layer, th, tw, tic, order, cycles)
    return best


def brute_force_plan(layer, cfg):
    """Every tile size and order, each fully predicted (for tests on small layers)."""
    layer.check(cfg)
    best = None
    tics = sorted({min(layer.group_in, cfg.simd * v)
                   for v in range(1, math.ceil(layer.group_in / cfg.simd) + 1)})
    for th, tw, tic, order in itertools.product(range(1, layer.work_h + 1),
                                                range(1, layer.work_w + 1), tics, ORDERS):
        try:
            tiles = tiles_for(layer, cfg, th, tw, tic, order)
        except PlanError:
            continue
        cycles = predict_cycles(layer, cfg, tiles)
        if best is None or cycles < best.cycles:
            best = Plan(layer, th, tw, tic, order, cycles)
    if best is None:
        raise PlanError(f"{layer.name}: no tiling fits the engine's buffers")
    return best


def utilization(layer, cfg, cycles):
    """Ideal cycles (MACs / (rows * cols * simd)) over measured or predicted cycles."""
    return layer.macs / cfg.macs_per_clock / cycles
