"""The post-processing lanes: output blocks run as several input-channel slices with random
gaps, random and extreme parameters, every combination of ReLU, pool and residual; the whole
output buffer (both halves) is read back through the unloader port and compared with
sim/models/conv_model.py's requantize and max_pool2; plus the documented latency and ``idle``."""

import itertools
import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from dlforge.rtl.conv.config import EngineConfig
from dlforge.rtl.conv.descriptor import pixel_order
from dlforge.rtl.conv.post import POST_LATENCY, PostLanes, words_per_half
from dlforge.sim.models.conv_model import max_pool2, requantize

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
M_MAX = (1 << 31) - 1


def _wrap(value, bits):
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _requantize_ints(values, mult, shift, residual, relu):
    """requantize in Python integers, for accumulators too wide for the model's int64."""
    out = np.empty(values.shape, dtype=np.int8)
    for idx in np.ndindex(values.shape):
        ch = idx[1]
        m, s = int(mult[ch]), int(shift[ch])
        q = (int(values[idx]) * m + (1 << (s - 1))) >> s
        if residual is not None:
            q += int(residual[idx])
        out[idx] = min(max(q, 0 if relu else -128), 127)
    return out


def _signed_byte(value):
    return value - 256 if value & 0x80 else value


class Block:
    """One output block: its tile settings, slices' accumulators, parameters and the int8
    result the contract gives (``expected``: (channels, output pixels) in visiting order)."""

    def __init__(self, cfg, rng, relu, pool, residual, oc_count, load_half):
        R, C, A = cfg.rows, cfg.cols, cfg.acc_bits
        self.relu, self.pool, self.residual, self.oc_count = relu, pool, residual, oc_count
        self.rows_per_pixel = -(-oc_count // R)
        while True:
            th, tw = rng.randint(1, 5), rng.randint(1, 5)
            if pool:
                th, tw = 2 * ((th + 1) // 2), 2 * ((tw + 1) // 2)
            if th * tw <= cfg.psum_depth:
                break
        self.th, self.tw = th, tw
        order = pixel_order(th, tw, pool)
        self.pixels = len(order)
        # The loaders fill load_half (parameters and residual) while the block before reads
        # the other one.
        self.param_half = self.res_half = load_half
        self.out_half = rng.randrange(2)

        # Magnitude of the sums: small to the full accumulator (where the sum wraps).
        scale = rng.choice([6, 12, 20, 28, A - 2, A + 2])
        self.slices = rng.randint(1, 3)
        amp = 1 << min(scale, A - 1)
        self.acc = [[[_wrap(rng.randint(-amp, amp - 1), A) for _ in range(R * C)]
                     for _ in range(self.pixels)] for _ in range(self.slices)]

        # Parameters for every channel (those past oc_count too: they must not matter).
        self.bias, self.mult, self.shift = [], [], []
        for ch in range(R * C):
            kind = rng.randrange(6)
            mb = rng.randint(1, 31)
            m = rng.randint(1 << (mb - 1), (1 << mb) - 1)          # mb bits, at most M_MAX
            s = min(max(min(scale, A) + mb - 8 + rng.randint(-3, 3), 1), 62)
            b = rng.randint(-min(amp, 1 << 31), min(amp, 1 << 31) - 1)
            if kind == 0:
                m, s = 1, 1
            elif kind == 1:
                m, s = M_MAX, 62
            elif kind == 2:
                b = rng.choice([INT32_MIN, INT32_MAX])
            elif kind == 3:
                m, s = M_MAX, 1
            self.bias.append(b)
            self.mult.append(m)
            self.shift.append(s)

        # int8 residual per pixel (visiting order) and channel; past oc_count it is junk that
        # the lanes must ignore.
        self.res = [[rng.randint(-128, 127) for _ in range(R * C)] for _ in range(self.pixels)]

        oc = oc_count
        values = np.zeros((1, oc, th, tw), dtype=object)
        res_img = np.zeros((1, oc, th, tw), dtype=np.int8)
        self.wrapped = False        # some sum left the accumulator's range (and wrapped)
        for p, (y, x) in enumerate(order):
            for ch in range(oc):
                total = self.bias[ch] + sum(sl[p][ch] for sl in self.acc)
                values[0, ch, y, x] = _wrap(total, A)
                self.wrapped |= values[0, ch, y, x] != total
                res_img[0, ch, y, x] = self.res[p][ch]
        res_arg = res_img if residual else None
        m_arr = np.array(self.mult[:oc], dtype=np.int64)
        s_arr = np.array(self.shift[:oc], dtype=np.int64)
        if A <= 32:                  # |value| < 2**31, m < 2**31: the model's int64 is exact
            img = requantize(values.astype(np.int64), m_arr, s_arr, res_arg, relu)
        else:
            img = _requantize_ints(values, m_arr, s_arr, res_arg, relu)
        # Outputs inside the clamps from accumulators beyond int32 (wide operands only).
        self.wide_unsaturated = int(np.sum((np.abs(values) >= 1 << 31) & (img > -128)
                                           & (img < 127)))
        if pool:
            img = max_pool2(img)
            out_order = pixel_order(th // 2, tw // 2, False)
        else:
            out_order = order
        self.expected = [[int(img[0, ch, y, x]) for (y, x) in out_order] for ch in range(oc)]

    def output_rows(self, R):
        """Rows the block writes: {row index within the half: R signed bytes}."""
        rows = {}
        for o in range(len(self.expected[0])):
            for col in range(self.rows_per_pixel):
                rows[o * self.rows_per_pixel + col] = [
                    self.expected[col * R + r][o] if col * R + r < self.oc_count else 0
                    for r in range(R)]
        return rows

    def residual_words(self, cfg):
        """The residual as the loader writes it: link words of link_bytes // rows rows."""
        R = cfg.rows
        per_word = cfg.link_bytes // R
        rows = [self.res[p][col * R:(col + 1) * R]
                for p in range(self.pixels) for col in range(self.rows_per_pixel)]
        words = []
        for w in range(0, len(rows), per_word):
            word = 0
            for j, row in enumerate(rows[w:w + per_word]):
                for r, byte in enumerate(row):
                    word |= (byte & 0xFF) << (8 * (j * R + r))
            words.append(word)
        return words


def run_blocks(cfg, blocks, gap_prob, seed):
    """Drive the blocks through PostLanes; return the buffer read back after each block and,
    per tile, the clocks waited for ``idle`` after its last beat with those expected.

    As in the engine, the loaders fill the next block's parameters and residual into the
    other halves while a block's tiles run."""
    rng = random.Random(seed)
    R, C = cfg.rows, cfg.cols
    dut = PostLanes(cfg)
    words = words_per_half(cfg)
    per_word = cfg.link_bytes // R
    snapshots, drain_clocks = [], []
    param_queue, res_queue = [], []

    def queue_loads(block):
        param_queue.extend((block.param_half, ch, {"bias": block.bias[ch],
                                                   "mult": block.mult[ch],
                                                   "shift": block.shift[ch]})
                           for ch in rng.sample(range(R * C), R * C))
        if block.residual:
            res_queue.extend((block.res_half, w, word)
                             for w, word in enumerate(block.residual_words(cfg)))

    async def clock(ctx):
        """One clock, with a write from each loader that has one queued."""
        ctx.set(dut.param_we, bool(param_queue))
        if param_queue:
            half, ch, record = param_queue.pop(0)
            ctx.set(dut.param_w_half, half)
            ctx.set(dut.param_channel, ch)
            ctx.set(dut.param_data, record)
        ctx.set(dut.res_we, bool(res_queue))
        if res_queue:
            half, addr, word = res_queue.pop(0)
            ctx.set(dut.res_w_half, half)
            ctx.set(dut.res_addr, addr)
            ctx.set(dut.res_data, word)
        await ctx.tick()

    async def read_buffer(ctx):
        """Both halves as {half: [row of R signed bytes, ...]}, through the read port."""
        halves = {}
        for half in (0, 1):
            rows = []
            for w in range(words):
                ctx.set(dut.out_r_half, half)
                ctx.set(dut.out_r_addr, w)
                await clock(ctx)
                data = ctx.get(dut.out_r_data)
                for j in range(per_word):
                    rows.append([_signed_byte((data >> (8 * (j * R + r))) & 0xFF)
                                 for r in range(R)])
            halves[half] = rows
        return halves

    async def bench(ctx):
        queue_loads(blocks[0])
        for n, block in enumerate(blocks):
            while param_queue or res_queue:       # this block's loads, if not done yet
                await clock(ctx)
            if n + 1 < len(blocks):
                queue_loads(blocks[n + 1])
            for k, accs in enumerate(block.acc):
                for name in ("relu", "pool", "residual", "oc_count", "param_half", "res_half",
                             "out_half"):
                    ctx.set(getattr(dut, name), getattr(block, name))
                ctx.set(dut.first, k == 0)
                ctx.set(dut.last, k == block.slices - 1)
                since_kept = 0          # clocks since the last beat PostLanes keeps
                for p in range(block.pixels):
                    for col in range(C):
                        while rng.random() < gap_prob:
                            ctx.set(dut.i.valid, 0)
                            await clock(ctx)
                            since_kept += 1
                        # Lanes past oc_count and dropped columns carry junk.
                        lanes = [accs[p][col * R + r] if col * R + r < block.oc_count
                                 else _wrap(rng.getrandbits(cfg.acc_bits), cfg.acc_bits)
                                 for r in range(R)]
                        ctx.set(dut.i.valid, 1)
                        ctx.set(dut.i.payload, {"acc": lanes, "col": col, "pixel": p})
                        await clock(ctx)
                        since_kept = 1 if col < block.rows_per_pixel else since_kept + 1
                ctx.set(dut.i.valid, 0)
                # idle rises POST_LATENCY clocks after the last kept beat, or the clock after
                # a dropped one that came later still.
                expected_wait = max(POST_LATENCY - since_kept, 0)
                waited = 0
                while not ctx.get(dut.idle):
                    await clock(ctx)
                    waited += 1
                    assert waited <= 2 * POST_LATENCY, "idle never rose"
                drain_clocks.append((waited, expected_wait))
                # The settings change in this very clock: idle must have meant it.
            snapshots.append(await read_buffer(ctx))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return snapshots, drain_clocks


def make_blocks(cfg, rng, rounds=2):
    """Every ReLU/pool/residual combination ``rounds`` times (in random order), with oc_count
    covering a full array, a single channel and counts that are not multiples of rows."""
    combos = list(itertools.product((0, 1), repeat=3)) * rounds
    rng.shuffle(combos)
    channels = cfg.rows * cfg.cols
    counts = [channels, 1] + [rng.randint(1, channels) for _ in combos]
    if cfg.rows > 1:
        counts[2] = rng.choice([c for c in range(1, channels + 1) if c % cfg.rows])
    blocks = []
    for n, ((relu, pool, residual), oc) in enumerate(zip(combos, counts)):
        blocks.append(Block(cfg, rng, relu, pool, residual, oc, load_half=n % 2))
    return blocks


CONFIGS = {
    "2x2": (EngineConfig(rows=2, cols=2, simd=2, psum_depth=16, link_bytes=16), 0.3),
    "4x3": (EngineConfig(rows=4, cols=3, simd=4, psum_depth=16, link_bytes=16), 0.0),
    "1x1": (EngineConfig(rows=1, cols=1, simd=1, psum_depth=12, link_bytes=16), 0.3),
    "2x3-16bit": (EngineConfig(rows=2, cols=3, simd=4, operand_bits=16, psum_depth=16,
                               link_bytes=16), 0.2),
    "8x2-link32": (EngineConfig(rows=8, cols=2, simd=2, psum_depth=16, link_bytes=32), 0.1),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_blocks_match_the_contract(name):
    cfg, gap_prob = CONFIGS[name]
    rng = random.Random(name)
    blocks = make_blocks(cfg, rng)
    snapshots, drain_clocks = run_blocks(cfg, blocks, gap_prob, seed=rng.random())

    rows_per_half = words_per_half(cfg) * (cfg.link_bytes // cfg.rows)
    buffer = {half: [[0] * cfg.rows for _ in range(rows_per_half)] for half in (0, 1)}
    for n, (block, got) in enumerate(zip(blocks, snapshots)):
        for row, lanes in block.output_rows(cfg.rows).items():
            buffer[block.out_half][row] = lanes
        for half in (0, 1):
            assert got[half] == buffer[half], (
                f"block {n} (relu {block.relu}, pool {block.pool}, residual "
                f"{block.residual}, oc_count {block.oc_count}, {block.slices} slices): "
                f"half {half} differs")
    # idle rises exactly the documented latency after each tile's last kept beat.
    assert all(waited == expected for waited, expected in drain_clocks), drain_clocks


@pytest.mark.parametrize("name", list(CONFIGS))
def test_the_blocks_reach_the_corners(name):
    """The random blocks reach both clamps, the middle of the range, wrapping sums and (with
    16-bit operands) unsaturated results of accumulators beyond int32; else the comparisons
    above would prove little."""
    cfg, _ = CONFIGS[name]
    blocks = make_blocks(cfg, random.Random(name))       # those of the test above
    values = [v for b in blocks for ch in b.expected for v in ch]
    assert 127 in values and -128 in values and 0 in values
    assert sum(-120 < v < 120 and v != 0 for v in values) > len(values) // 10
    assert any(b.wrapped for b in blocks)
    if cfg.acc_bits > 32:
        assert sum(b.wide_unsaturated for b in blocks) >= 5


def test_integer_reference_matches_the_model():
    """The Python-integer requantize used for wide accumulators is the model's, on int32."""
    rng = np.random.default_rng(1)
    acc = rng.integers(INT32_MIN, INT32_MAX, size=(1, 4, 3, 5), endpoint=True)
    acc[0, 0, 0, :2] = INT32_MIN, INT32_MAX
    mult = np.array([1, M_MAX, 12345, 1 << 30])
    shift = np.array([1, 62, 20, 40])
    res = rng.integers(-128, 127, size=acc.shape, endpoint=True).astype(np.int8)
    for relu, residual in itertools.product((False, True), (None, res)):
        assert np.array_equal(_requantize_ints(acc.astype(object), mult, shift, residual, relu),
                              requantize(acc, mult, shift, residual, relu))


def test_latency_and_idle_are_exact():
    """A single beat is readable exactly POST_LATENCY clocks after it entered, and idle is
    low exactly until then."""
    cfg = EngineConfig(rows=2, cols=1, simd=1, psum_depth=2, link_bytes=16)
    dut = PostLanes(cfg)
    seen, idle_trace = [], []

    async def bench(ctx):
        ctx.set(dut.param_we, 1)
        for ch in range(2):
            ctx.set(dut.param_channel, ch)
            ctx.set(dut.param_data, {"bias": 0, "mult": 1, "shift": 1})
            await ctx.tick()
        ctx.set(dut.param_we, 0)
        for name, value in (("first", 1), ("last", 1), ("oc_count", 2)):
            ctx.set(getattr(dut, name), value)
        await ctx.tick()
        assert ctx.get(dut.idle)
        ctx.set(dut.i.valid, 1)
        ctx.set(dut.i.payload, {"acc": [10, -7], "col": 0, "pixel": 0})
        for _ in range(POST_LATENCY + 2):
            idle_trace.append(ctx.get(dut.idle))
            await ctx.tick()            # reads the row addressed in the clock just ended
            ctx.set(dut.i.valid, 0)
            seen.append(ctx.get(dut.out_r_data) & 0xFFFF)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    # (10 + 1) >> 1 = 5, (-7 + 1) >> 1 = -3; the read in clock t + k is seen[k].
    written = 5 | (0xFD << 8)
    assert seen == [0] * POST_LATENCY + [written] * 2
    assert idle_trace == [0] * POST_LATENCY + [1] * 2
