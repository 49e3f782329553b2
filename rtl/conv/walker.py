"""The walker: the element sequence of one tile, one element per clock.

For each output pixel in visiting order (:func:`~.descriptor.pixel_order`), the walker issues
the pixel's dot product: for ``ky``, ``kx``, ``v`` (``v`` fastest) the input-buffer vector
``addr = (iy * iw + ix) * vectors + v`` at ``iy = y * stride + ky + y_off``, ``ix = x * stride +
kx + x_off`` (or ``pad`` when that lies outside the loaded ``ih x iw`` region) and the weight
word ``k = (ky * kw + kx) * vectors + v``.

Every address comes from adders: along a kernel row the addresses are consecutive, a kernel
row down adds ``iw * vectors``, and the pixel origins step by ``stride * vectors`` and
``stride * iw * vectors`` (twice that between 2x2 blocks).  Addresses are kept modulo
``2**bits(input_depth)``: every real (non-pad) address lies in ``[0, input_depth)``, so the
modular sums are exact for them whatever the padding, and no signed address is needed.  The
only multiplication, ``iw * vectors``, and the first window's origin ``y_off * iw * vectors +
x_off * vectors`` (shifted adds: the offsets are 4-bit) happen once per tile, in the setup
clocks after ``start``.

The PE array needs a pixel's results ``cols`` clocks apart: when a dot product is shorter
(``L = kh * kw * vectors < cols``), ``cols - L`` clocks with ``valid`` low follow the
acceptance of each pixel's last element.  That count is kept across tiles, so a tile started
right after one with short pixels still keeps the spacing.
"""

from amaranth import Module, Mux, Shape, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .config import EngineConfig
from .descriptor import TileDescriptor

__all__ = ["Walker", "element_layout", "START_LATENCY"]

#: Clocks from the ``start`` pulse to the first element's ``valid``: two of setup, one to
#: place the cursor, one into the output register.
START_LATENCY = 4


def element_layout(cfg):
    return data.StructLayout({
        "addr": range(cfg.input_depth),     # input-buffer vector (0 when pad)
        "pad": 1,                           # the operand is zero padding
        "k": range(cfg.weight_depth),       # weight word of the PE
        "first": 1,                         # first / last element of the pixel's dot product
        "last": 1,
        "pixel": range(cfg.psum_depth),     # the pixel's index in visiting order
    })


class _Loop:
    """A loop's down counter, with its end flag kept in a register so that no ``== 0``
    comparison lies on the per-element path."""

    def __init__(self, like, name):
        self.last = Signal.like(like, name=f"{name}_last")      # iterations - 1
        self.single = Signal(name=f"{name}_single")             # one iteration
        self.left = Signal.like(like, name=f"{name}_left")
        self.done = Signal(name=f"{name}_done")                 # left == 0

    def setup(self, iterations):
        return [self.last.eq(iterations - 1), self.single.eq(iterations == 1)]

    def restart(self):
        return [self.left.eq(self.last), self.done.eq(self.single)]

    def step(self):
        return [self.left.eq(self.left - 1), self.done.eq(self.left == 1)]


def _times_offset(offset, value):
    """``offset * value`` for a short signed ``offset``, as shifted adds in logic (the DSPs
    are for the PE array)."""
    terms = [Mux(offset[i], value << i, 0) for i in range(len(offset) - 1)]
    return sum(terms[1:], terms[0]) - Mux(offset[-1], value << (len(offset) - 1), 0)


def _field_width(name):
    return Shape.cast(TileDescriptor[name].shape).width


class Walker(wiring.Component):
    """Turns a tile descriptor into the element sequence the array consumes (input address or
    pad, weight word), one element a clock from adders alone, so that the address path never
    holds the array up."""

    def __init__(self, cfg=EngineConfig()):
        self.cfg = cfg
        super().__init__({
            "desc": In(TileDescriptor),     # held constant while busy
            "start": In(1),                 # one-clock pulse while idle
            "busy": Out(1),
            "o": Out(stream.Signature(element_layout(cfg))),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        desc = self.desc
        layout = element_layout(cfg)
        addr_bits = Shape.cast(layout["addr"].shape).width
        # Input coordinates: up to 2 * (th - 1) + (kh - 1) + y_off, and as low as y_off.
        size_bits = max(_field_width(name) for name in ("th", "tw", "ih", "iw"))
        coord = signed(size_bits + 3)

        # ---- Per-tile setup, latched on start (desc is constant while busy) -------------------
        stride2 = desc.stride[1]                       # stride is 1 or 2
        pool = desc.pool
        row_pitch = Signal(addr_bits)                  # iw * vectors: one input row
        # The loops, innermost first; blocks are pixels, or 2x2 pixels when pooling.
        v_loop, kx_loop, ky_loop = (_Loop(desc.vectors, "v"), _Loop(desc.kw, "kx"),
                                    _Loop(desc.kh, "ky"))
        bx_loop, by_loop = _Loop(desc.tw, "bx"), _Loop(desc.th, "by")
        x_step = Signal(addr_bits)                     # next pixel to the right
        y_step = Signal(addr_bits)                     # next pixel row (second row of a block)
        bx_step = Signal(addr_bits)                    # next block to the right
        by_step = Signal(addr_bits)                    # next block row
        coord_step = Signal(3)                         # stride
        block_coord_step = Signal(3)                   # stride of blocks: stride << pool
        x_origin = Signal(addr_bits)                   # x_off * vectors
        origin = Signal(addr_bits)                     # the first pixel's window origin
        preparing = Signal()                           # the clock after start
        placing = Signal()                             # the clock after: the cursor is set
        running = Signal()                             # the cursor holds an element

        # (The shifts here are by 0..2 bits: muxes, not multipliers.)
        with m.If(self.start & ~self.busy):                # a start while busy is ignored
            m.d.sync += [
                self.busy.eq(1),
                preparing.eq(1),
                row_pitch.eq(desc.iw * desc.vectors),  # the walker's one multiplier
                x_origin.eq(_times_offset(desc.x_off, desc.vectors)),
                *v_loop.setup(desc.vectors),
                *kx_loop.setup(desc.kw),
                *ky_loop.setup(desc.kh),
                *bx_loop.setup(desc.tw >> pool),
                *by_loop.setup(desc.th >> pool),
                x_step.eq(desc.vectors << stride2),
                bx_step.eq(desc.vectors << (stride2 + pool)),
                coord_step.eq(desc.stride),
                block_coord_step.eq(desc.stride << pool),
            ]

        # ---- The cursor: the next element, with the origins it steps from ---------------------
        dx_left = Signal()                             # within a 2x2 block
        dy_left = Signal()
        k = Signal(range(cfg.weight_depth))
        first = Signal()
        pixel = Signal(range(cfg.psum_depth))
        iy = Signal(coord)                             # the element's input position
        ix = Signal(coord)
        addr = Signal(addr_bits)                       # modulo 2**addr_bits
        row_addr = Signal(addr_bits)                   # (iy, first kx, v = 0)
        pix_iy = Signal(coord)                         # the pixel's window origin
        pix_ix = Signal(coord)
        pix_addr = Signal(addr_bits)
        blk_iy = Signal(coord)                         # the block's window origin
        blk_ix = Signal(coord)
        blk_addr = Signal(addr_bits)
        blk_row_addr = Signal(addr_bits)               # the block row's (x = 0) origin

        pixel_done = v_loop.done & kx_loop.done & ky_loop.done
        tile_done = pixel_done & ~dx_left & ~dy_left & bx_loop.done & by_loop.done

        def begin_pixel(new_iy, new_ix, new_addr):
            m.d.sync += [pix_iy.eq(new_iy), pix_ix.eq(new_ix), pix_addr.eq(new_addr),
                         iy.eq(new_iy), ix.eq(new_ix), addr.eq(new_addr), row_addr.eq(new_addr),
                         *v_loop.restart(), *kx_loop.restart(), *ky_loop.restart(),
                         k.eq(0), first.eq(1)]

        def begin_block(new_iy, new_ix, new_addr):
            m.d.sync += [blk_iy.eq(new_iy), blk_ix.eq(new_ix), blk_addr.eq(new_addr),
                         dx_left.eq(pool), dy_left.eq(pool)]
            begin_pixel(new_iy, new_ix, new_addr)

        with m.If(preparing):
            m.d.sync += [
                preparing.eq(0),
                placing.eq(1),
                origin.eq(_times_offset(desc.y_off, row_pitch) + x_origin),
                y_step.eq(row_pitch << stride2),
                by_step.eq(row_pitch << (stride2 + pool)),
            ]
        with m.If(placing):
            m.d.sync += [
                placing.eq(0),
                running.eq(1),
                blk_row_addr.eq(origin),
                *bx_loop.restart(),
                *by_loop.restart(),
                pixel.eq(0),
            ]
            begin_block(desc.y_off, desc.x_off, origin)

        # ---- The output register, and the spacing between pixels -----------------------------
        out = self.o.payload
        out_tile_done = Signal()                       # o holds the tile's final element
        gap = Signal(range(max(cfg.cols, 2)))          # clocks with valid low still owed
        # With o: a last element of a short pixel (L = k + 1 < cols), and the gap it leaves
        # after the clock that takes it.
        out_short = Signal()
        out_gap = Signal.like(gap)
        accepted = self.o.valid & self.o.ready
        free = ~self.o.valid | self.o.ready
        advance = Signal()

        with m.If(accepted & out_short):
            m.d.sync += gap.eq(out_gap)
        with m.Elif(gap != 0):
            m.d.sync += gap.eq(gap - 1)
        with m.Elif(free & running):
            m.d.comb += advance.eq(1)

        with m.If(advance):
            pad = (iy < 0) | (iy >= desc.ih) | (ix < 0) | (ix >= desc.iw)
            m.d.sync += [self.o.valid.eq(1), out.pad.eq(pad), out.addr.eq(Mux(pad, 0, addr)),
                         out.k.eq(k), out.first.eq(first), out.last.eq(pixel_done),
                         out.pixel.eq(pixel), out_tile_done.eq(tile_done),
                         out_short.eq(pixel_done & (k < cfg.cols - 1)),
                         out_gap.eq(cfg.cols - 2 - k)]
        with m.Elif(free):
            m.d.sync += self.o.valid.eq(0)

        with m.If(accepted & out_tile_done):
            m.d.sync += self.busy.eq(0)

        # ---- Cursor steps ---------------------------------------------------------------------
        with m.If(advance):
            m.d.sync += [k.eq(k + 1), first.eq(0)]
            with m.If(~v_loop.done):
                m.d.sync += [*v_loop.step(), addr.eq(addr + 1)]
            with m.Elif(~kx_loop.done):
                m.d.sync += [*kx_loop.step(), *v_loop.restart(),
                             ix.eq(ix + 1), addr.eq(addr + 1)]
            with m.Elif(~ky_loop.done):
                next_row = row_addr + row_pitch
                m.d.sync += [*ky_loop.step(), *kx_loop.restart(), *v_loop.restart(),
                             iy.eq(iy + 1), ix.eq(pix_ix), addr.eq(next_row),
                             row_addr.eq(next_row)]
            # The pixel is done: the next pixel of the block, the next block, or the next
            # block row.
            with m.Elif(dx_left):
                m.d.sync += dx_left.eq(0)
                begin_pixel(pix_iy, pix_ix + coord_step, pix_addr + x_step)
            with m.Elif(dy_left):
                m.d.sync += [dy_left.eq(0), dx_left.eq(1)]
                begin_pixel(blk_iy + coord_step, blk_ix, blk_addr + y_step)
            with m.Elif(~bx_loop.done):
                m.d.sync += bx_loop.step()
                begin_block(blk_iy, blk_ix + block_coord_step, blk_addr + bx_step)
            with m.Elif(~by_loop.done):
                next_block_row = blk_row_addr + by_step
                m.d.sync += [*by_loop.step(), *bx_loop.restart(),
                             blk_row_addr.eq(next_block_row)]
                begin_block(blk_iy + block_coord_step, desc.x_off, next_block_row)
            with m.Else():
                m.d.sync += running.eq(0)
            with m.If(pixel_done):
                m.d.sync += pixel.eq(pixel + 1)
        return m
