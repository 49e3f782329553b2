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
        vectors_per_word = lb // cfg.vector_bytes
        rows_per_word = lb // cfg.rows
        records_per_word = max(1, lb // PARAM_RECORD_BYTES)

        m.submodules.walker = walker = Walker(cfg)
        m.submodules.inputs = inputs = InputBuffer(cfg)
        m.submodules.weights = weights = WeightBanks(cfg)
        m.submodules.array = array = PeArray(cfg)
        m.submodules.post = post = PostLanes(cfg)

        # ---- The tile queue between loader and compute ----------------------------------------
        Queued = data.StructLayout({"desc": TileDescriptor, "w_half": 1, "i_half": 1,
                                    "p_half": 1, "r_half": 1,
                                    "result_words": 24})     # link words of results (last)
        m.submodules.queue = queue = SyncFIFOBuffered(width=Queued.size, depth=4)
        # Tiles queued or computing per half of each double buffer; a half is loaded only
        # when no tile still needs it.
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

        # ---- Loader ---------------------------------------------------------------------------
        desc = Signal(TileDescriptor)
        word = self.i.payload
        words_left = Signal(32)
        k = Signal(range(cfg.weight_depth + 1))          # weight word being loaded
        word_in_k = Signal(range(cfg.channels // vectors_per_word + 2))
        words_per_k = Signal(range(cfg.channels // vectors_per_word + 2))
        addr = Signal(32)                                  # word address within a half
        channel = Signal(range(cfg.channels + records_per_word + 1))
        record = Signal(range(records_per_word + 1))
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
        target = {name: ~current[name] for name in users}

        def refuse(code):
            m.d.sync += error_code.eq(code)
            m.next = "ERROR"

        def wait_for_half(name, state, wanted, skip_to, setup):
            with m.State(f"{state}_WAIT"):
                m.d.comb += loader_busy.eq(1)
                with m.If(~wanted):
                    m.next = skip_to
                with m.Elif(Mux(target[name], users[name][1], users[name][0]) == 0):
                    m.d.sync += setup
                    m.next = state
                with m.Else():
                    m.d.sync += self.load_stalls.eq(self.load_stalls + 1)

        def take_words(name, state, writes, then):
            """``words_left`` words written at ``addr``, ``addr + 1``, ... of the half."""
            with m.State(state):
                m.d.comb += [loader_busy.eq(1), self.i.ready.eq(1)] + writes
                with m.If(self.i.valid):
                    m.d.sync += [addr.eq(addr + 1), words_left.eq(words_left - 1)]
                    with m.If(words_left == 1):
                        m.d.sync += current[name].eq(target[name])
                        m.next = then

        with m.FSM(name="loader"):
            with m.State("DESC"):
                m.d.comb += self.i.ready.eq(1)
                with m.If(self.i.valid):
                    m.d.sync += desc.eq(word[:TileDescriptor.size])
                    m.next = "CHECK1"
            with m.State("CHECK1"):
                m.d.comb += loader_busy.eq(1)
                m.d.sync += [kk.eq(desc.kh * desc.kw), area.eq(desc.ih * desc.iw),
                             pixels.eq(desc.th * desc.tw),
                             result_rows.eq((desc.oc_count + cfg.rows - 1) // cfg.rows),
                             words_per_k.eq((desc.oc_count + vectors_per_word - 1)
                                            >> _log2(vectors_per_word))]
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
                m.d.comb += loader_busy.eq(1)
                m.d.sync += [weight_words.eq(kk * desc.vectors),
                             input_vectors.eq(area * desc.vectors),
                             residual_rows.eq(pixels * result_rows)]
                m.next = "CHECK3"
            with m.State("CHECK3"):
                m.d.comb += loader_busy.eq(1)
                with m.If(weight_words > cfg.weight_depth):
                    refuse(E.WEIGHTS_TOO_BIG)
                with m.Elif(input_vectors > cfg.input_depth):
                    refuse(E.INPUTS_TOO_BIG)
                with m.Elif(pixels > cfg.psum_depth):
                    refuse(E.PIXELS_TOO_BIG)
                with m.Else():
                    m.next = "PARAMS_WAIT"
            # Each part waits for its target half to be free, then takes its words.
            wait_for_half("p", "PARAMS", desc.first, "WEIGHTS_WAIT",
                          [channel.eq(0), record.eq(0)])
            with m.State("PARAMS"):
                m.d.comb += loader_busy.eq(1)
                this = _ParamRecord(word.word_select(record, 8 * PARAM_RECORD_BYTES)
                                    [:_ParamRecord.size])
                m.d.comb += [post.param_w_half.eq(target["p"]), post.param_channel.eq(channel),
                             post.param_data.bias.eq(this.bias),
                             post.param_data.mult.eq(this.mult),
                             post.param_data.shift.eq(this.shift)]
                last_record = (record == records_per_word - 1) | (channel + 1 == desc.oc_count)
                with m.If(self.i.valid):
                    m.d.comb += post.param_we.eq(channel < desc.oc_count)
                    m.d.sync += [channel.eq(channel + 1), record.eq(record + 1)]
                    with m.If(last_record):
                        m.d.comb += self.i.ready.eq(1)
                        m.d.sync += record.eq(0)
                        with m.If(channel + 1 >= desc.oc_count):
                            m.d.sync += current["p"].eq(target["p"])
                            m.next = "WEIGHTS_WAIT"
            wait_for_half("w", "WEIGHTS", desc.load_weights, "INPUTS_WAIT",
                          [k.eq(0), word_in_k.eq(0)])
            with m.State("WEIGHTS"):
                m.d.comb += [loader_busy.eq(1), self.i.ready.eq(1),
                             weights.w_en.eq(self.i.valid), weights.w_half.eq(target["w"]),
                             weights.w_k.eq(k),
                             weights.w_channel.eq(word_in_k << _log2(vectors_per_word)),
                             weights.w_data.eq(word)]
                with m.If(self.i.valid):
                    m.d.sync += word_in_k.eq(word_in_k + 1)
                    with m.If(word_in_k + 1 == words_per_k):
                        m.d.sync += [word_in_k.eq(0), k.eq(k + 1)]
                        with m.If(k + 1 == weight_words):
                            m.d.sync += current["w"].eq(target["w"])
                            m.next = "INPUTS_WAIT"
            wait_for_half("i", "INPUTS", desc.load_inputs, "RESIDUAL_WAIT", [
                addr.eq(0),
                words_left.eq((input_vectors + vectors_per_word - 1) >> _log2(vectors_per_word))])
            take_words("i", "INPUTS", [inputs.w_en.eq(self.i.valid), inputs.w_half.eq(target["i"]),
                                       inputs.w_addr.eq(addr), inputs.w_data.eq(word)],
                       then="RESIDUAL_WAIT")
            wait_for_half("r", "RESIDUAL", desc.last & desc.residual, "QUEUE", [
                addr.eq(0),
                words_left.eq((residual_rows + rows_per_word - 1) >> _log2(rows_per_word))])
            take_words("r", "RESIDUAL", [post.res_we.eq(self.i.valid),
                                         post.res_w_half.eq(target["r"]),
                                         post.res_addr.eq(addr), post.res_data.eq(word)],
                       then="QUEUE")
            with m.State("QUEUE"):
                # The tile's result words: ceil(output pixels * rows per pixel / rows per word)
                # (pooled tiles have whole 2x2 blocks, a quarter of the pixels).
                result_rows_out = Mux(desc.pool, residual_rows >> 2, residual_rows)
                m.d.comb += [loader_busy.eq(1), queue.w_en.eq(1), queue.w_data.eq(pushed),
                             pushed.desc.eq(desc), pushed.w_half.eq(current["w"]),
                             pushed.i_half.eq(current["i"]), pushed.p_half.eq(current["p"]),
                             pushed.r_half.eq(current["r"]),
                             pushed.result_words.eq((result_rows_out + rows_per_word - 1)
                                                    >> _log2(rows_per_word))]
                with m.If(queue.w_rdy):
                    m.d.comb += push.eq(1)
                    m.next = "DESC"
            with m.State("ERROR"):
                m.d.comb += self.i.ready.eq(1)          # drop everything: the link is out of step

        # ---- Compute --------------------------------------------------------------------------
        tile = Signal(Queued)
        out_full = [Signal(name=f"out_full{h}") for h in range(2)]
        out_words = [Signal(32, name=f"out_words{h}") for h in range(2)]
        out_next = Signal()                                  # half the next last tile fills
        out_half = Signal()
        pixels_issued = Signal(24)
        pixels_done = Signal(24)
        beat_pixel = Signal(24)
        compute_busy = Signal()
        head = Queued(queue.r_data)
        m.d.comb += [walker.desc.eq(tile.desc), finished.eq(tile),
                     post.first.eq(tile.desc.first), post.last.eq(tile.desc.last),
                     post.relu.eq(tile.desc.relu), post.pool.eq(tile.desc.pool),
                     post.residual.eq(tile.desc.residual), post.oc_count.eq(tile.desc.oc_count),
                     post.param_half.eq(tile.p_half), post.res_half.eq(tile.r_half),
                     post.out_half.eq(out_half)]

        # Walker -> buffers (read) -> array, one clock of read latency.
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
                m.d.sync += pixels_issued.eq(pixels_issued + 1)

        # Array -> post-processing, each beat with its pixel's index in the tile.
        m.d.comb += [post.i.valid.eq(array.o.valid), post.i.payload.acc.eq(array.o.payload.acc),
                     post.i.payload.col.eq(array.o.payload.col),
                     post.i.payload.pixel.eq(beat_pixel)]
        with m.If(array.o.valid & (array.o.payload.col == cfg.cols - 1)):
            m.d.sync += [beat_pixel.eq(beat_pixel + 1), pixels_done.eq(pixels_done + 1)]

        with m.FSM(name="compute"):
            with m.State("IDLE"):
                last_tile = head.desc.last
                free = ~Mux(out_next, out_full[1], out_full[0])
                with m.If(queue.r_rdy & post.idle & (~last_tile | free)):
                    m.d.comb += queue.r_en.eq(1)
                    m.d.sync += [tile.eq(head), out_half.eq(out_next), pixels_issued.eq(0),
                                 pixels_done.eq(0), beat_pixel.eq(0)]
                    m.next = "START"
            with m.State("START"):
                m.d.comb += [compute_busy.eq(1), walker.start.eq(1)]
                m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += compute_busy.eq(1)
                with m.If(~walker.busy & ~walker.start):
                    m.next = "DRAIN"
            with m.State("DRAIN"):
                m.d.comb += compute_busy.eq(1)
                with m.If((pixels_done == pixels_issued) & post.idle & ~array.o.valid):
                    m.d.comb += done.eq(1)
                    m.d.sync += self.tiles.eq(self.tiles + 1)
                    with m.If(tile.desc.last):
                        m.d.sync += out_next.eq(~out_next)
                        for h in range(2):
                            with m.If(out_half == h):
                                m.d.sync += [out_full[h].eq(1),
                                             out_words[h].eq(tile.result_words)]
                    m.next = "IDLE"

        # ---- Unloader -------------------------------------------------------------------------
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
        unloader_busy = reading | in_flight | out_fifo.r_rdy

        # ---- Activity ---------------------------------------------------------------------------
        m.d.comb += self.busy.eq(loader_busy | queue.r_rdy | compute_busy | unloader_busy)
        with m.If(self.busy):
            m.d.sync += self.cycles.eq(self.cycles + 1)
        return m
