"""Post-processing of the PE array's result beats: bias or partial sum, partial-sum buffer,
requantisation, residual, clamp/ReLU, 2x2 max pool, and the double-buffered output buffer
(see docs/conv-engine.md and the arithmetic contract in sim/models/conv_model.py).

A beat carries ``rows`` accumulators of one output pixel, channels ``col * rows + r``.  Lane
``r`` of every stage handles channel ``col * rows + r``, so the parameters live per lane (channel
``ch`` in lane ``ch % rows`` at index ``ch // rows``) and each lane reads one entry per beat.

The pipeline never stalls (the array cannot wait), one beat per clock:

====  ===========================================================================
S0    input: drop columns past the tile's channels, row counters, lane masks
S1    read addresses: partial sum, parameters
S2    ``value = acc + (first ? bias : psum)`` modulo ``2**acc_bits``
S3    partial-sum write (when not ``last``); the two partial products of ``value * m``
S4    the product, exact
S5    ``product >> (s - 1)``; residual read address
S6    ``q = (that + 1) >> 1`` (round half up), saturated to 9 bits; residual row selected
S7    ``y = clamp(q + residual, relu ? 0 : -128, 127)``, lanes past ``oc_count`` zeroed
S8    running 2x2 max, output buffer write
====  ===========================================================================

Saturating ``q`` to [-256, 255] before adding the int8 residual gives the same clamp as the
full-width sum (either side of the range is out of [-128, 127] whatever the residual), and
keeps the residual adder and the clamp 10 bits wide.  Rounding as ``((p >> (s-1)) + 1) >> 1``
equals ``(p + 2**(s-1)) >> s`` for floor shifts and needs no ``2**(s-1)`` decoder.

Tile settings are sampled with the beat as it enters and travel with it, so a setting that
changes while earlier beats are in flight does not reach them; the engine still waits for
``idle`` between tiles because the next tile reads the partial sums this one writes.

Rows (of ``rows`` values) of a tile are numbered in beat order, ``pixel * rows_per_pixel +
col`` with ``rows_per_pixel = ceil(oc_count / rows)``; counters follow the beats instead of a
multiplier, restarting on the tile's first beat (pixel 0, column 0).  The partial sums use the
same numbering: the slices of one output block share ``oc_count`` and the pixel order.
"""

from amaranth import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.hdl import Array
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .config import EngineConfig

__all__ = ["PostLanes", "POST_LATENCY", "post_beat_layout", "ParamLayout", "words_per_half"]

#: A beat on ``i`` in clock cycle ``t`` is in the output buffer from cycle ``t + POST_LATENCY``
#: on: an ``out_r_addr`` given in that cycle reads it (the write is at the edge ending cycle
#: ``t + POST_LATENCY - 1``), and ``idle`` is high from then if no later beat came.
POST_LATENCY = 9

_STAGES = POST_LATENCY - 1      # registered stages S1..S8

#: One parameter record as the loader writes it (``mult`` < 2**31, 1 <= ``shift`` <= 62).
ParamLayout = data.StructLayout({"bias": signed(32), "mult": 32, "shift": 6})

# As stored: ``shift - 1`` is what the rounding shift uses.
_StoredParams = data.StructLayout({"bias": signed(32), "mult": 31, "shift_m1": 6})

_MULT_SPLIT = 16                # low partial product takes m[0:16], high one m[16:31]


def post_beat_layout(cfg):
    """The array's result beat plus the pixel's index in the tile (visiting order)."""
    return data.StructLayout({
        "acc": data.ArrayLayout(signed(cfg.acc_bits), cfg.rows),
        "col": range(cfg.cols),
        "pixel": range(cfg.psum_depth),
    })


def words_per_half(cfg):
    """Link words in each half of the residual and of the output buffer."""
    rows_per_word = cfg.link_bytes // cfg.rows
    return -(-cfg.psum_depth * cfg.cols // rows_per_word)


def _control_layout(cfg):
    rows_in_tile = cfg.psum_depth * cfg.cols
    return data.StructLayout({
        "col": range(cfg.cols),
        "row": range(rows_in_tile),        # residual and partial-sum row
        "out_row": range(rows_in_tile),    # output row (pooled pixel numbering when pooling)
        "pos": 2,                          # pixel % 4: place in a 2x2 pool block
        "mask": cfg.rows,                  # lanes holding channels below oc_count
        "first": 1,
        "last": 1,
        "write": 1,                        # this beat writes the output buffer
        "relu": 1,
        "pool": 1,
        "residual": 1,
        "param_half": 1,
        "res_half": 1,
        "out_half": 1,
    })


class PostLanes(wiring.Component):
    """Result beats in, int8 outputs in a double-buffered output buffer; see the module."""

    def __init__(self, cfg=EngineConfig()):
        rows = cfg.rows
        if rows & (rows - 1) or cfg.link_bytes % rows:
            # EngineConfig already implies this (link_bytes is a power of two and a multiple
            # of rows); lane and bank indices are bit fields because of it.
            self._MustUse__silence = True
            raise ValueError(f"rows must be a power of two dividing link_bytes, got {rows}")
        self.cfg = cfg
        channels = cfg.rows * cfg.cols
        words = words_per_half(cfg)
        super().__init__({
            "i": In(stream.Signature(post_beat_layout(cfg), always_ready=True)),
            # Tile settings, held while the tile's beats flow.
            "first": In(1),
            "last": In(1),
            "relu": In(1),
            "pool": In(1),
            "residual": In(1),
            "oc_count": In(range(channels + 1)),
            "param_half": In(1),
            "res_half": In(1),
            "out_half": In(1),
            # Parameter loader (any time; the halves let it fill one while a tile reads the other).
            "param_we": In(1),
            "param_w_half": In(1),
            "param_channel": In(range(channels)),
            "param_data": In(ParamLayout),
            # Residual loader: one link word of link_bytes // rows rows per clock.
            "res_we": In(1),
            "res_w_half": In(1),
            "res_addr": In(range(words)),
            "res_data": In(8 * cfg.link_bytes),
            # Unloader: one link word per clock, one clock after its address.
            "out_r_half": In(1),
            "out_r_addr": In(range(words)),
            "out_r_data": Out(8 * cfg.link_bytes),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        R, C, A = cfg.rows, cfg.cols, cfg.acc_bits
        lane_bits = (R - 1).bit_length()
        rows_per_word = cfg.link_bytes // R
        bank_bits = (rows_per_word - 1).bit_length()
        words = words_per_half(cfg)
        rows_in_tile = cfg.psum_depth * C
        ctl_layout = _control_layout(cfg)
        int8_row = data.ArrayLayout(signed(8), R)

        def half_address(half, index):
            return Mux(half, index + words, index)

        # ---- Memories ------------------------------------------------------------------
        m.submodules.psum = psum = Memory(shape=data.ArrayLayout(signed(A), R),
                                          depth=rows_in_tile, init=[])
        psum_r, psum_w = psum.read_port(), psum.write_port()

        params_r = []
        param_lane = Signal(lane_bits)
        m.d.comb += param_lane.eq(self.param_channel)
        param_index = self.param_channel >> lane_bits
        for r in range(R):
            mem = Memory(shape=_StoredParams, depth=2 * C, init=[])
            m.submodules[f"params{r}"] = mem
            w = mem.write_port()
            m.d.comb += [
                w.addr.eq(Mux(self.param_w_half, param_index + C, param_index)),
                w.data.bias.eq(self.param_data.bias),
                w.data.mult.eq(self.param_data.mult),
                w.data.shift_m1.eq(self.param_data.shift - 1),
                w.en.eq(self.param_we & (param_lane == r)),
            ]
            params_r.append(mem.read_port())

        # Residual and output: bank j holds the rows j of every link word.
        res_r, out_w = [], []
        out_r_rows = []
        for j in range(rows_per_word):
            res = Memory(shape=8 * R, depth=2 * words, init=[])
            out = Memory(shape=8 * R, depth=2 * words, init=[])
            m.submodules[f"residual{j}"] = res
            m.submodules[f"out{j}"] = out
            w = res.write_port()
            m.d.comb += [w.addr.eq(half_address(self.res_w_half, self.res_addr)),
                         w.data.eq(self.res_data[8 * R * j:8 * R * (j + 1)]),
                         w.en.eq(self.res_we)]
            res_r.append(res.read_port())
            out_w.append(out.write_port())
            rp = out.read_port()
            m.d.comb += rp.addr.eq(half_address(self.out_r_half, self.out_r_addr))
            out_r_rows.append(rp.data)
        m.d.comb += self.out_r_data.eq(Cat(*out_r_rows))

        # ---- S0: which beats count, their rows ------------------------------------------
        beat = self.i.payload
        rows_per_pixel = Signal(range(C + 1))
        m.d.comb += rows_per_pixel.eq((self.oc_count + R - 1) >> lane_bits)
        kept = Signal()
        m.d.comb += kept.eq(self.i.valid & (beat.col < rows_per_pixel))
        tile_start = (beat.pixel == 0) & (beat.col == 0)

        ctl0 = Signal(ctl_layout)
        next_row = Signal(range(rows_in_tile + 1))
        next_out_row = Signal(range(rows_in_tile + 1))
        m.d.comb += [
            ctl0.col.eq(beat.col),
            ctl0.row.eq(Mux(tile_start, 0, next_row)),
            ctl0.out_row.eq(Mux(tile_start, 0, next_out_row)),
            ctl0.pos.eq(beat.pixel),
            ctl0.first.eq(self.first),
            ctl0.last.eq(self.last),
            ctl0.write.eq(self.last & (~self.pool | (ctl0.pos == 3))),
            ctl0.relu.eq(self.relu),
            ctl0.pool.eq(self.pool),
            ctl0.residual.eq(self.residual),
            ctl0.param_half.eq(self.param_half),
            ctl0.res_half.eq(self.res_half),
            ctl0.out_half.eq(self.out_half),
        ]
        for r in range(R):
            m.d.comb += ctl0.mask[r].eq(beat.col * R + r < self.oc_count)
        with m.If(kept):
            # Both counters take the tile start's restart, written or not.
            m.d.sync += [next_row.eq(ctl0.row + 1), next_out_row.eq(ctl0.out_row + ctl0.write)]

        # Control and validity travel down S1..S8.
        valid = [kept] + [Signal(name=f"valid{k}") for k in range(1, _STAGES + 1)]
        ctl = [ctl0] + [Signal(ctl_layout, name=f"ctl{k}") for k in range(1, _STAGES + 1)]
        for k in range(1, _STAGES + 1):
            m.d.sync += [valid[k].eq(valid[k - 1]), ctl[k].eq(ctl[k - 1])]
        busy = self.i.valid
        for v in valid[1:]:
            busy = busy | v
        m.d.comb += self.idle.eq(~busy)

        # ---- S1: read addresses -----------------------------------------------------------
        acc1 = Signal(data.ArrayLayout(signed(A), R))
        acc2 = Signal(data.ArrayLayout(signed(A), R))
        m.d.sync += [acc1.eq(beat.acc), acc2.eq(acc1)]
        m.d.comb += psum_r.addr.eq(ctl[1].row)
        for port in params_r:
            m.d.comb += port.addr.eq(Mux(ctl[1].param_half, ctl[1].col + C, ctl[1].col))

        # ---- S5: residual read address ----------------------------------------------------
        res_index = ctl[5].row >> bank_bits
        for port in res_r:
            m.d.comb += port.addr.eq(half_address(ctl[5].res_half, res_index))
        # S6: the residual row of this beat, registered for S7.
        res_row6 = Signal(8 * R)
        res_bank6 = Signal(bank_bits)
        m.d.comb += res_bank6.eq(ctl[6].row)
        with m.Switch(res_bank6):
            for j, port in enumerate(res_r):
                with m.Case(j):
                    m.d.comb += res_row6.eq(port.data)
        res7 = Signal(int8_row)
        m.d.sync += res7.eq(Mux(ctl[6].residual, res_row6, 0))

        # ---- S8 state: the running max of the pool block, per column and lane ----------
        floor7 = Mux(ctl[7].relu, Const(0, signed(8)), Const(-128, signed(8)))
        pool_start8 = ~ctl[8].pool | (ctl[8].pos == 0)
        out_row8 = Signal(int8_row)

        for r in range(R):
            # S2: bias or partial sum, wrapping at acc_bits.
            prm2 = params_r[r].data
            addend2 = Mux(ctl[2].first, prm2.bias, psum_r.data[r])
            value3 = Signal(signed(A), name=f"value3_l{r}")
            mult3 = Signal(unsigned(31), name=f"mult3_l{r}")
            shift3 = Signal(6, name=f"shift3_l{r}")
            m.d.sync += [value3.eq(acc2[r] + addend2), mult3.eq(prm2.mult),
                         shift3.eq(prm2.shift_m1)]

            # S3: partial-sum write; partial products (each fits a pair of DSP tiles).
            m.d.comb += psum_w.data[r].eq(value3)
            p_lo4 = Signal(signed(A + _MULT_SPLIT + 1), name=f"p_lo4_l{r}")
            p_hi4 = Signal(signed(A + 31 - _MULT_SPLIT + 1), name=f"p_hi4_l{r}")
            shift4 = Signal(6, name=f"shift4_l{r}")
            m.d.sync += [p_lo4.eq(value3 * mult3[:_MULT_SPLIT]),
                         p_hi4.eq(value3 * mult3[_MULT_SPLIT:]), shift4.eq(shift3)]

            # S4: |value * m| < 2**(A - 1) * 2**31, so A + 31 signed bits hold it exactly.
            product5 = Signal(signed(A + 31), name=f"product5_l{r}")
            shift5 = Signal(6, name=f"shift5_l{r}")
            m.d.sync += [product5.eq(p_lo4 + (p_hi4 << _MULT_SPLIT)), shift5.eq(shift4)]

            # S5: floor shift by s - 1.
            halved6 = Signal(signed(A + 31), name=f"halved6_l{r}")
            m.d.sync += halved6.eq(product5 >> shift5)

            # S6: round half up, then saturate to 9 bits (see the module docstring).
            rounded6 = Signal(signed(A + 31), name=f"rounded6_l{r}")
            m.d.comb += rounded6.eq((halved6 + 1) >> 1)
            q7 = Signal(signed(9), name=f"q7_l{r}")
            m.d.sync += q7.eq(Mux(rounded6 > 255, 255, Mux(rounded6 < -256, -256, rounded6)))

            # S7: residual, clamp, lanes past oc_count to zero.
            total7 = Signal(signed(10), name=f"total7_l{r}")
            m.d.comb += total7.eq(q7 + res7[r])
            y8 = Signal(signed(8), name=f"y8_l{r}")
            clamped7 = Mux(total7 > 127, 127, Mux(total7 < floor7, floor7, total7))
            m.d.sync += y8.eq(Mux(ctl[7].mask[r], clamped7, 0))

            # S8: running max over the 2x2 block (restarts each block; every pixel without
            # pooling).
            block_max = Array(Signal(signed(8), name=f"max_c{c}_l{r}") for c in range(C))
            seen = block_max[ctl[8].col]
            m.d.comb += out_row8[r].eq(Mux(pool_start8 | (y8 > seen), y8, seen))
            with m.If(valid[8]):
                m.d.sync += block_max[ctl[8].col].eq(out_row8[r])

        m.d.comb += [psum_w.addr.eq(ctl[3].row), psum_w.en.eq(valid[3] & ~ctl[3].last)]

        # S8: output write into the bank of the row.
        out_index = ctl[8].out_row >> bank_bits
        out_bank = Signal(bank_bits)
        m.d.comb += out_bank.eq(ctl[8].out_row)
        for j, port in enumerate(out_w):
            m.d.comb += [port.addr.eq(half_address(ctl[8].out_half, out_index)),
                         port.data.eq(out_row8),
                         port.en.eq(valid[8] & ctl[8].write & (out_bank == j))]
        return m
