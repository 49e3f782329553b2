"""The convolution engine: link words in, tiles computed, result words out.

Three units run at once (docs/conv-engine.md):

* the **loader** takes a descriptor word, checks it (a refused descriptor sets ``error`` and
  ``error_code``; the loader then drops its input until reset, so it never hangs), waits for
  the halves it will fill to be free, and writes the tile's parameters, weights, inputs and
  residual into them, one link word per clock (parameters: one channel per clock); then it
  queues the tile;
* the **compute** unit takes queued tiles in order once the post-processing has drained the
  tile before: the walker issues one element per clock, the input buffer and the weight banks
  read it, the PE array accumulates, and the post-processing lanes add the bias or partial
  sums, requantise and write the results into an output half;
* the **unloader** sends each finished output half as result words, ``last`` on the tile's
  final word.

Counters (the same registers in simulation and on a board): ``cycles`` counts clocks while
any unit has work, ``array_cycles`` clocks in which an element entered the array, ``tiles``
finished tiles; ``load_stalls`` clocks the loader waited for a free half, ``output_stalls``
clocks a result word waited for the link.
"""

from types import SimpleNamespace

from amaranth import Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from .config import EngineConfig
from .descriptor import TileDescriptor, DescriptorError as E, MAGIC, PARAM_RECORD_BYTES
from .input_buffer import InputBuffer
from .pe_array import PeArray
from .post import PostLanes
from .walker import Walker
from .weight_banks import WeightBanks

__all__ = ["ConvEngine", "output_layout"]


def output_layout(cfg):
    return data.StructLayout({"data": 8 * cfg.link_bytes, "last": 1})


#: One output channel's parameters on the link (PARAM_RECORD_BYTES bytes, zeros after these).
_ParamRecord = data.StructLayout({"bias": signed(32), "mult": 32, "shift": 8})


def _log2(n):
    assert n & (n - 1) == 0, n
    return n.bit_length() - 1


class ConvEngine(wiring.Component):
    """The convolution accelerator as one component on the link: tiles are described, loaded,
    computed and unloaded by three units that overlap through double buffers, so that the
    PE array stays busy while the link moves the next tile's data (see the module docstring
    and docs/conv-engine.md)."""

    def __init__(self, cfg=EngineConfig()):
        self.cfg = cfg
        super().__init__({
            "i": In(stream.Signature(8 * cfg.link_bytes)),
            "o": Out(stream.Signature(output_layout(cfg))),
            "busy": Out(1),
            "error": Out(1),
            "error_code": Out(8),
            "cycles": Out(32),
            "array_cycles": Out(32),
            "tiles": Out(32),
            "load_stalls": Out(32),
            "output_stalls": Out(32),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        lb = cfg.link_bytes
        per_word = SimpleNamespace(vectors=lb // cfg.vector_bytes, rows=lb // cfg.rows,
                                   records=max(1, lb // PARAM_RECORD_BYTES))

        m.submodules.walker = walker = Walker(cfg)
        m.submodules.inputs = inputs = InputBuffer(cfg)
        m.submodules.weights = weights = WeightBanks(cfg)
        m.submodules.array = array = PeArray(cfg)
        m.submodules.post = post = PostLanes(cfg)

        q = self._tile_queue(m)
        ld = self._loader_state(m, q, per_word)
        with m.FSM(name="loader"):
            self._check_descriptor(m, ld, per_word)
            self._load_params(m, q, ld, post, per_word)
            self._load_weights(m, q, ld, weights, per_word)
            self._load_inputs_and_residual(m, q, ld, inputs, post, per_word)
            self._queue_tile(m, q, ld, per_word)

        cs = self._compute_state(m, q, walker, post)
        self._feed_array(m, cs, walker, inputs, weights, array, post)
        with m.FSM(name="compute"):
            self._elaborate_compute_fsm(m, q, cs, walker, array, post)
        unloader_busy = self._unloader(m, cs, post)

        # ---- Activity ---------------------------------------------------------------------------
        m.d.comb += self.busy.eq(ld.loader_busy | q.queue.r_rdy | cs.compute_busy | unloader_busy)
        with m.If(self.busy):
            m.d.sync += self.cycles.eq(self.cycles + 1)
        return m

    @staticmethod
    def _tile_queue(m):
        """The tile queue between loader and compute, and per half of each double buffer the
        tiles that still need it: a half is loaded only when none does."""
        Queued = data.StructLayout({"desc": TileDescriptor, "w_half": 1, "i_half": 1,
                                    "p_half": 1, "r_half": 1,
                                    "result_words": 24})     # link words of results (last)
        m.submodules.queue = queue = SyncFIFOBuffered(width=Queued.size, depth=4)
        # Tiles queued or computing per half of each double buffer.
        users = {name: [Signal(3, name=f"{name}_users{h}") for h in range(2)]
                 for name in ("w", "i", "p", "r")}
        current = {name: Signal(init=1, name=f"{name}_current") for name in users}
        pushed = Signal(Queued)
        finished = Signal(Queued)
        push = Signal()
        done = Signal()
        for name, counts in users.items():
            for h in range(2):
                inc = push & (pushed[f"{name}_half"] == h)
                dec = done & (finished[f"{name}_half"] == h)
                with m.If(inc & ~dec):
                    m.d.sync += counts[h].eq(counts[h] + 1)
                with m.Elif(dec & ~inc):
                    m.d.sync += counts[h].eq(counts[h] - 1)
        return SimpleNamespace(Queued=Queued, queue=queue, users=users, current=current,
                               pushed=pushed, finished=finished, push=push, done=done)

    def _loader_state(self, m, q, per_word):
        """The loader's registers: the descriptor, the sizes derived from it, and where in
        the current part it is."""
        cfg = self.cfg
        desc = Signal(TileDescriptor)
        words_left = Signal(32)
        k = Signal(range(cfg.weight_depth + 1))          # weight word being loaded
        word_in_k = Signal(range(cfg.channels // per_word.vectors + 2))
        words_per_k = Signal(range(cfg.channels // per_word.vectors + 2))
        addr = Signal(32)                                  # word address within a half
        channel = Signal(range(cfg.channels + per_word.records + 1))
        record = Signal(range(per_word.records + 1))
        kk = Signal(6)
        area = Signal(24)
        pixels = Signal(24)
        weight_words = Signal(24)
        input_vectors = Signal(36)
        result_rows = Signal(range(cfg.channels // cfg.rows + 2))     # rows of R per pixel
        residual_rows = Signal(36)
        error_code = Signal(8)
        m.d.comb += [self.error.eq(error_code != 0), self.error_code.eq(error_code)]
        loader_busy = Signal()
        target = {name: ~q.current[name] for name in q.users}
        return SimpleNamespace(desc=desc, word=self.i.payload, words_left=words_left, k=k,
                               word_in_k=word_in_k, words_per_k=words_per_k, addr=addr,
                               channel=channel, record=record, kk=kk, area=area, pixels=pixels,
                               weight_words=weight_words, input_vectors=input_vectors,
                               result_rows=result_rows, residual_rows=residual_rows,
                               error_code=error_code, loader_busy=loader_busy, target=target)

    @staticmethod
    def _refuse(m, ld, code):
        """A refused descriptor: the error code, and the loader drops its input from now on."""
        m.d.sync += ld.error_code.eq(code)
        m.next = "ERROR"

    def _wait_for_half(self, m, q, ld, name, state, wanted, skip_to, setup):
        """A part's ``_WAIT`` state: skip the part, or wait until no tile needs its half."""
        with m.State(f"{state}_WAIT"):
            m.d.comb += ld.loader_busy.eq(1)
            with m.If(~wanted):
                m.next = skip_to
            with m.Elif(Mux(ld.target[name], q.users[name][1], q.users[name][0]) == 0):
                m.d.sync += setup
                m.next = state
            with m.Else():
                m.d.sync += self.load_stalls.eq(self.load_stalls + 1)

    def _take_words(self, m, q, ld, name, state, writes, then):
        """``words_left`` words written at ``addr``, ``addr + 1``, ... of the half."""
        with m.State(state):
            m.d.comb += [ld.loader_busy.eq(1), self.i.ready.eq(1)] + writes
            with m.If(self.i.valid):
                m.d.sync += [ld.addr.eq(ld.addr + 1), ld.words_left.eq(ld.words_left - 1)]
                with m.If(ld.words_left == 1):
                    m.d.sync += q.current[name].eq(ld.target[name])
                    m.next = then

    def _check_descriptor(self, m, ld, per_word):
        """DESC, CHECK1-3: take a descriptor and refuse it before anything is written if it
        does not fit this engine, so that a bad one cannot hang or corrupt the engine."""
        cfg, desc = self.cfg, ld.desc
        kk, area, pixels, result_rows = ld.kk, ld.area, ld.pixels, ld.result_rows

        def refuse(code):
            self._refuse(m, ld, code)

        with m.State("DESC"):
            m.d.comb += self.i.ready.eq(1)
            with m.If(self.i.valid):
                m.d.sync += desc.eq(ld.word[:TileDescriptor.size])
                m.next = "CHECK1"
        with m.State("CHECK1"):
            m.d.comb += ld.loader_busy.eq(1)
            m.d.sync += [kk.eq(desc.kh * desc.kw), area.eq(desc.ih * desc.iw),
                         pixels.eq(desc.th * desc.tw),
                         result_rows.eq((desc.oc_count + cfg.rows - 1) // cfg.rows),
                         ld.words_per_k.eq((desc.oc_count + per_word.vectors - 1)
                                           >> _log2(per_word.vectors))]
            with m.If(desc.magic != MAGIC):
                refuse(E.BAD_MAGIC)
            with m.Elif((desc.kh == 0) | (desc.kw == 0)):
                refuse(E.BAD_KERNEL)
            with m.Elif((desc.stride == 0) | (desc.stride == 3)):
                refuse(E.BAD_STRIDE)
            with m.Elif((desc.vectors == 0) | (desc.ih == 0) | (desc.iw == 0)
                        | (desc.th == 0) | (desc.tw == 0)):
                refuse(E.ZERO_SIZE)
            with m.Elif((desc.oc_count == 0) | (desc.oc_count > cfg.channels)):
                refuse(E.BAD_CHANNELS)
            with m.Elif(desc.pool & (desc.th[0] | desc.tw[0])):
                refuse(E.BAD_POOL)
            with m.Elif((desc.y_off > 0) | (desc.x_off > 0)):
                refuse(E.BAD_OFFSET)
            with m.Else():
                m.next = "CHECK2"
        with m.State("CHECK2"):
            m.d.comb += ld.loader_busy.eq(1)
            m.d.sync += [ld.weight_words.eq(kk * desc.vectors),
                         ld.input_vectors.eq(area * desc.vectors),
                         ld.residual_rows.eq(pixels * result_rows)]
            m.next = "CHECK3"
        with m.State("CHECK3"):
            m.d.comb += ld.loader_busy.eq(1)
            with m.If(ld.weight_words > cfg.weight_depth):
                refuse(E.WEIGHTS_TOO_BIG)
            with m.Elif(ld.input_vectors > cfg.input_depth):
                refuse(E.INPUTS_TOO_BIG)
            with m.Elif(pixels > cfg.psum_depth):
                refuse(E.PIXELS_TOO_BIG)
            with m.Else():
                m.next = "PARAMS_WAIT"

    def _load_params(self, m, q, ld, post, per_word):
        """PARAMS: one output channel's bias and requantisation a clock, into the
        post-processing lanes (only a tile's first pass brings them)."""
        # Each part waits for its target half to be free, then takes its words.
        desc, channel, record = ld.desc, ld.channel, ld.record
        self._wait_for_half(m, q, ld, "p", "PARAMS", desc.first, "WEIGHTS_WAIT",
                            [channel.eq(0), record.eq(0)])
        with m.State("PARAMS"):
            m.d.comb += ld.loader_busy.eq(1)
            this = _ParamRecord(ld.word.word_select(record, 8 * PARAM_RECORD_BYTES)
                                [:_ParamRecord.size])
            m.d.comb += [post.param_w_half.eq(ld.target["p"]), post.param_channel.eq(channel),
                         post.param_data.bias.eq(this.bias),
                         post.param_data.mult.eq(this.mult),
                         post.param_data.shift.eq(this.shift)]
            last_record = ((record == per_word.records - 1)
                           | (channel + 1 == desc.oc_count))
            with m.If(self.i.valid):
                m.d.comb += post.param_we.eq(channel < desc.oc_count)
                m.d.sync += [channel.eq(channel + 1), record.eq(record + 1)]
                with m.If(last_record):
                    m.d.comb += self.i.ready.eq(1)
                    m.d.sync += record.eq(0)
                    with m.If(channel + 1 >= desc.oc_count):
                        m.d.sync += q.current["p"].eq(ld.target["p"])
                        m.next = "WEIGHTS_WAIT"

    def _load_weights(self, m, q, ld, weights, per_word):
        """WEIGHTS: the tile's weights, kernel position by kernel position, into the banks."""
        k, word_in_k = ld.k, ld.word_in_k
        self._wait_for_half(m, q, ld, "w", "WEIGHTS", ld.desc.load_weights, "INPUTS_WAIT",
                            [k.eq(0), word_in_k.eq(0)])
        with m.State("WEIGHTS"):
            m.d.comb += [ld.loader_busy.eq(1), self.i.ready.eq(1),
                         weights.w_en.eq(self.i.valid), weights.w_half.eq(ld.target["w"]),
                         weights.w_k.eq(k),
                         weights.w_channel.eq(word_in_k << _log2(per_word.vectors)),
                         weights.w_data.eq(ld.word)]
            with m.If(self.i.valid):
                m.d.sync += word_in_k.eq(word_in_k + 1)
                with m.If(word_in_k + 1 == ld.words_per_k):
                    m.d.sync += [word_in_k.eq(0), k.eq(k + 1)]
                    with m.If(k + 1 == ld.weight_words):
                        m.d.sync += q.current["w"].eq(ld.target["w"])
                        m.next = "INPUTS_WAIT"

    def _load_inputs_and_residual(self, m, q, ld, inputs, post, per_word):
        """INPUTS and RESIDUAL: the input tile into the input buffer, and for a last pass with
        a residual the values to add into the post-processing lanes."""
        desc, addr, word = ld.desc, ld.addr, ld.word
        self._wait_for_half(m, q, ld, "i", "INPUTS", desc.load_inputs, "RESIDUAL_WAIT", [
            addr.eq(0),
            ld.words_left.eq((ld.input_vectors + per_word.vectors - 1)
                             >> _log2(per_word.vectors))])
        self._take_words(m, q, ld, "i", "INPUTS",
                         [inputs.w_en.eq(self.i.valid), inputs.w_half.eq(ld.target["i"]),
                          inputs.w_addr.eq(addr), inputs.w_data.eq(word)],
                         then="RESIDUAL_WAIT")
        self._wait_for_half(m, q, ld, "r", "RESIDUAL", desc.last & desc.residual, "QUEUE", [
            addr.eq(0),
            ld.words_left.eq((ld.residual_rows + per_word.rows - 1) >> _log2(per_word.rows))])
        self._take_words(m, q, ld, "r", "RESIDUAL",
                         [post.res_we.eq(self.i.valid), post.res_w_half.eq(ld.target["r"]),
                          post.res_addr.eq(addr), post.res_data.eq(word)],
                         then="QUEUE")

    def _queue_tile(self, m, q, ld, per_word):
        """QUEUE: the loaded tile joins the queue with the halves it uses; ERROR: after a
        refusal the link is out of step, so everything is dropped until reset."""
        pushed, current = q.pushed, q.current
        with m.State("QUEUE"):
            # The tile's result words: ceil(output pixels * rows per pixel / rows per word)
            # (pooled tiles have whole 2x2 blocks, a quarter of the pixels).
            result_rows_out = Mux(ld.desc.pool, ld.residual_rows >> 2, ld.residual_rows)
            m.d.comb += [ld.loader_busy.eq(1), q.queue.w_en.eq(1), q.queue.w_data.eq(pushed),
                         pushed.desc.eq(ld.desc), pushed.w_half.eq(current["w"]),
                         pushed.i_half.eq(current["i"]), pushed.p_half.eq(current["p"]),
                         pushed.r_half.eq(current["r"]),
                         pushed.result_words.eq((result_rows_out + per_word.rows - 1)
                                                >> _log2(per_word.rows))]
            with m.If(q.queue.w_rdy):
                m.d.comb += q.push.eq(1)
                m.next = "DESC"
        with m.State("ERROR"):
            m.d.comb += self.i.ready.eq(1)          # drop everything: the link is out of step

    @staticmethod
    def _compute_state(m, q, walker, post):
        """The tile being computed, the output halves' state, and the tile's settings as the
        walker and the post-processing lanes see them."""
        tile = Signal(q.Queued)
        out_full = [Signal(name=f"out_full{h}") for h in range(2)]
        out_words = [Signal(32, name=f"out_words{h}") for h in range(2)]
        out_next = Signal()                                  # half the next last tile fills
        out_half = Signal()
        pixels_issued = Signal(24)
        pixels_done = Signal(24)
        beat_pixel = Signal(24)
        compute_busy = Signal()
        head = q.Queued(q.queue.r_data)
        m.d.comb += [walker.desc.eq(tile.desc), q.finished.eq(tile),
                     post.first.eq(tile.desc.first), post.last.eq(tile.desc.last),
                     post.relu.eq(tile.desc.relu), post.pool.eq(tile.desc.pool),
                     post.residual.eq(tile.desc.residual), post.oc_count.eq(tile.desc.oc_count),
                     post.param_half.eq(tile.p_half), post.res_half.eq(tile.r_half),
                     post.out_half.eq(out_half)]
        return SimpleNamespace(tile=tile, out_full=out_full, out_words=out_words,
                               out_next=out_next, out_half=out_half, pixels_issued=pixels_issued,
                               pixels_done=pixels_done, beat_pixel=beat_pixel,
                               compute_busy=compute_busy, head=head)

    def _feed_array(self, m, cs, walker, inputs, weights, array, post):
        """Walker -> buffers (read) -> array -> post-processing, counting pixels in and out so
        that compute knows when a tile has drained."""
        # One clock of read latency between the walker and the array.
        tile = cs.tile
        element = walker.o.payload
        m.d.comb += [walker.o.ready.eq(1),
                     inputs.r_half.eq(tile.i_half), inputs.r_addr.eq(element.addr),
                     inputs.r_pad.eq(element.pad),
                     weights.r_half.eq(tile.w_half), weights.r_k.eq(element.k)]
        if hasattr(inputs, "r_en"):
            m.d.comb += inputs.r_en.eq(1)
        step_valid = Signal()
        step_first = Signal()
        step_last = Signal()
        m.d.sync += [step_valid.eq(walker.o.valid), step_first.eq(element.first),
                     step_last.eq(element.last)]
        m.d.comb += [array.i.valid.eq(step_valid), array.i.payload.first.eq(step_first),
                     array.i.payload.last.eq(step_last), array.i.payload.x.eq(inputs.r_data),
                     array.w.eq(weights.w)]
        with m.If(walker.o.valid):
            m.d.sync += self.array_cycles.eq(self.array_cycles + 1)
            with m.If(element.last):
                m.d.sync += cs.pixels_issued.eq(cs.pixels_issued + 1)

        # Array -> post-processing, each beat with its pixel's index in the tile.
        m.d.comb += [post.i.valid.eq(array.o.valid), post.i.payload.acc.eq(array.o.payload.acc),
                     post.i.payload.col.eq(array.o.payload.col),
                     post.i.payload.pixel.eq(cs.beat_pixel)]
        with m.If(array.o.valid & (array.o.payload.col == self.cfg.cols - 1)):
            m.d.sync += [cs.beat_pixel.eq(cs.beat_pixel + 1),
                         cs.pixels_done.eq(cs.pixels_done + 1)]

    def _elaborate_compute_fsm(self, m, q, cs, walker, array, post):
        """Compute one queued tile at a time, in order, once the post-processing has drained
        the tile before and (for a last pass) an output half is free."""
        tile, out_full = cs.tile, cs.out_full
        with m.State("IDLE"):
            last_tile = cs.head.desc.last
            free = ~Mux(cs.out_next, out_full[1], out_full[0])
            with m.If(q.queue.r_rdy & post.idle & (~last_tile | free)):
                m.d.comb += q.queue.r_en.eq(1)
                m.d.sync += [tile.eq(cs.head), cs.out_half.eq(cs.out_next),
                             cs.pixels_issued.eq(0), cs.pixels_done.eq(0), cs.beat_pixel.eq(0)]
                m.next = "START"
        with m.State("START"):
            m.d.comb += [cs.compute_busy.eq(1), walker.start.eq(1)]
            m.next = "RUN"
        with m.State("RUN"):
            m.d.comb += cs.compute_busy.eq(1)
            with m.If(~walker.busy & ~walker.start):
                m.next = "DRAIN"
        with m.State("DRAIN"):
            m.d.comb += cs.compute_busy.eq(1)
            with m.If((cs.pixels_done == cs.pixels_issued) & post.idle & ~array.o.valid):
                m.d.comb += q.done.eq(1)
                m.d.sync += self.tiles.eq(self.tiles + 1)
                with m.If(tile.desc.last):
                    m.d.sync += cs.out_next.eq(~cs.out_next)
                    for h in range(2):
                        with m.If(cs.out_half == h):
                            m.d.sync += [out_full[h].eq(1),
                                         cs.out_words[h].eq(tile.result_words)]
                m.next = "IDLE"

    def _unloader(self, m, cs, post):
        """Send each finished output half as result words, ``last`` on the tile's final one,
        through a small FIFO so that a slow link only stalls the unloader; returns its busy."""
        cfg, out_full, out_words = self.cfg, cs.out_full, cs.out_words
        m.submodules.out_fifo = out_fifo = SyncFIFOBuffered(width=output_layout(cfg).size, depth=4)
        u_half = Signal()
        u_addr = Signal(32)
        in_flight = Signal()                 # a read issued last clock
        in_flight_last = Signal()
        reading = Mux(u_half, out_full[1], out_full[0])
        u_words = Mux(u_half, out_words[1], out_words[0])
        # (a word read now lands next clock: counting it, the FIFO never overflows and passes a
        # word a clock)
        room = out_fifo.level + in_flight < 4
        issue = reading & (u_addr < u_words) & room
        m.d.comb += [post.out_r_half.eq(u_half), post.out_r_addr.eq(u_addr)]
        m.d.sync += [in_flight.eq(issue), in_flight_last.eq(issue & (u_addr + 1 == u_words))]
        with m.If(issue):
            m.d.sync += u_addr.eq(u_addr + 1)
            with m.If(u_addr + 1 == u_words):
                m.d.sync += [u_addr.eq(0), u_half.eq(~u_half)]
                for h in range(2):
                    with m.If(u_half == h):
                        m.d.sync += out_full[h].eq(0)
        out_beat = output_layout(cfg)(out_fifo.w_data)
        m.d.comb += [out_fifo.w_en.eq(in_flight), out_beat.data.eq(post.out_r_data),
                     out_beat.last.eq(in_flight_last)]
        m.d.comb += [self.o.valid.eq(out_fifo.r_rdy), self.o.payload.eq(out_fifo.r_data),
                     out_fifo.r_en.eq(self.o.ready)]
        with m.If(self.o.valid & ~self.o.ready):
            m.d.sync += self.output_stalls.eq(self.output_stalls + 1)
        return reading | in_flight | out_fifo.r_rdy
