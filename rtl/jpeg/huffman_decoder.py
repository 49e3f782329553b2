"""Huffman decoding of one interleaved baseline scan: tokens in, coefficients out.

Tables arrive as the bodies of DHT segments (the bytes after the length) and are turned into
the canonical decoding tables of T.81 F.2.2.3 as they stream in: for each code length L the
largest code (MAXCODE) and the offset from a code to its symbol's index (VALPTR - MINCODE),
plus the symbols themselves.  Decoding then resolves one symbol per clock: the next 16 bits
are compared with all sixteen MAXCODE values at once, the first length that fits selects the
symbol, and its magnitude bits are taken in the same clock.

Output: one beat per coefficient written (DC always, AC when nonzero; ``zz`` is the zigzag
index) and ``end`` on the beat that closes a block; a block closed by EOB after its last
nonzero coefficient gets an extra beat with ``write`` low.  Each scan ends with one ``done``
beat: the status (:class:`JpegStatus`) and the marker that ended the scan.
"""

from amaranth import Module, Signal, Array, Mux, Cat, Const, signed
from amaranth.lib import wiring, stream, data
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .status import JpegStatus as S
from .unstuff import TokenKind, TokenLayout

__all__ = ["HuffmanDecoder", "ScanLayout", "CoefficientLayout", "DoneLayout", "DhtLayout"]

MAX_COMPONENTS = 3

ScanLayout = data.StructLayout({
    "components": 2,                                   # 1 or 3
    "h": data.ArrayLayout(2, MAX_COMPONENTS),          # blocks per MCU, across (1 or 2)
    "v": data.ArrayLayout(2, MAX_COMPONENTS),          # blocks per MCU, down
    "td": data.ArrayLayout(2, MAX_COMPONENTS),         # DC table of each component
    "ta": data.ArrayLayout(2, MAX_COMPONENTS),         # AC table
    "mcus": 24,                                        # MCUs in the scan
    "restart_interval": 16,                            # MCUs per restart interval, 0 = none
})
CoefficientLayout = data.StructLayout({
    "value": signed(16), "zz": 6, "component": 2, "write": 1, "end": 1,
})
DoneLayout = data.StructLayout({"status": 8, "marker": 8})
DhtLayout = data.StructLayout({"byte": 8, "last": 1})

_BUF = 64          # bit buffer width
_NONE = -1         # MAXCODE of a length with no codes


class HuffmanDecoder(wiring.Component):
    dht: In(stream.Signature(DhtLayout))
    scan: In(stream.Signature(ScanLayout))
    tokens: In(stream.Signature(TokenLayout))
    coef: Out(stream.Signature(CoefficientLayout))
    done: Out(stream.Signature(DoneLayout))
    busy: Out(1)
    symbols_decoded: Out(32)      # counter: Huffman symbols resolved since reset

    def elaborate(self, platform):
        m = Module()
        tables = 8                      # DC 0..3, AC 0..3
        maxcode = [[Signal(signed(18), init=_NONE, name=f"maxcode_t{t}_l{l + 1}")
                    for l in range(16)] for t in range(tables)]
        valoff = [[Signal(signed(18), name=f"valoff_t{t}_l{l + 1}") for l in range(16)]
                  for t in range(tables)]
        m.submodules.symbols = symbols = Memory(shape=8, depth=tables * 256, init=[])
        sym_w = symbols.write_port()
        sym_r = symbols.read_port(domain="comb")
        table_error = Signal()

        # ---- Table loading (only between scans) ---------------------------------------
        ld_state = Signal(2)            # 0: table header, 1: counts, 2: symbols
        ld_table = Signal(3)
        ld_len = Signal(5)              # 1..16 while reading counts
        ld_code = Signal(18)
        ld_k = Signal(9)                # symbols announced so far
        ld_i = Signal(9)                # symbols stored so far
        scanning = Signal()
        finishing = Signal()                # result decided, waiting for the output to drain
        m.d.comb += self.dht.ready.eq(~scanning)     # tables change only between scans
        byte = self.dht.payload.byte
        with m.If(self.dht.valid & self.dht.ready):
            with m.Switch(ld_state):
                with m.Case(0):
                    m.d.sync += [ld_table.eq(Cat(byte[0:2], byte[4])), ld_len.eq(1),
                                 ld_code.eq(0), ld_k.eq(0), ld_i.eq(0), ld_state.eq(1)]
                    with m.If((byte[4:8] > 1) | (byte[0:4] > 3) | self.dht.payload.last):
                        m.d.sync += [table_error.eq(1), ld_state.eq(0)]
                with m.Case(1):
                    count = byte
                    for t in range(tables):
                        for l in range(16):
                            with m.If((ld_table == t) & (ld_len == l + 1)):
                                m.d.sync += [
                                    maxcode[t][l].eq(Mux(count == 0, _NONE, ld_code + count - 1)),
                                    valoff[t][l].eq(ld_k - ld_code),
                                ]
                    m.d.sync += [ld_code.eq((ld_code + count) << 1), ld_k.eq(ld_k + count),
                                 ld_len.eq(ld_len + 1)]
                    with m.If((ld_code + count) > (Const(1, 18) << ld_len)):
                        m.d.sync += table_error.eq(1)          # the code space overflows
                    with m.If(ld_len == 16):
                        total = ld_k + count
                        with m.If(total > 256):
                            m.d.sync += [table_error.eq(1), ld_state.eq(0)]
                        with m.Elif(total == 0):
                            m.d.sync += ld_state.eq(0)
                        with m.Else():
                            m.d.sync += ld_state.eq(2)
                    with m.If(self.dht.payload.last):
                        m.d.sync += [table_error.eq(1), ld_state.eq(0)]
                with m.Case(2):
                    m.d.comb += [sym_w.addr.eq(Cat(ld_i[:8], ld_table)), sym_w.data.eq(byte),
                                 sym_w.en.eq(1)]
                    m.d.sync += ld_i.eq(ld_i + 1)
                    with m.If(ld_i + 1 == ld_k):
                        m.d.sync += ld_state.eq(0)
                    with m.Elif(self.dht.payload.last):
                        m.d.sync += [table_error.eq(1), ld_state.eq(0)]

        # ---- Scan state ------------------------------------------------------------------
        cfg = Signal(ScanLayout)
        bitbuf = Signal(_BUF)               # next bit is bit 63
        nbits = Signal(range(_BUF + 1))
        comp = Signal(2)
        blk = Signal(2)                     # block within the component's part of the MCU
        k = Signal(7)                       # next coefficient (zigzag), 0 = DC
        preds = Array(Signal(16, name=f"pred{c}") for c in range(MAX_COMPONENTS))
        mcus_left = Signal(24)
        in_interval = Signal(16)
        rst_next = Signal(3)
        phase = Signal(2)                   # 0: decode, 1: restart check, 2: end check
        m.d.comb += [self.scan.ready.eq(~scanning & ~finishing & ~self.done.valid & (ld_state == 0)),
                     self.busy.eq(scanning)]

        with m.If(self.done.valid & self.done.ready):
            m.d.sync += self.done.valid.eq(0)
        with m.If(self.coef.valid & self.coef.ready):
            m.d.sync += self.coef.valid.eq(0)

        # The done beat follows the last coefficient beat, never overtakes it.

        def finish(status, marker=0):
            m.d.sync += [scanning.eq(0), finishing.eq(1),
                         self.done.payload.status.eq(status), self.done.payload.marker.eq(marker)]

        with m.If(finishing & ~self.coef.valid):
            m.d.sync += [finishing.eq(0), self.done.valid.eq(1)]

        with m.If(self.scan.valid & self.scan.ready):
            m.d.sync += [cfg.eq(self.scan.payload), scanning.eq(1), bitbuf.eq(0), nbits.eq(0),
                         comp.eq(0), blk.eq(0), k.eq(0), mcus_left.eq(self.scan.payload.mcus),
                         in_interval.eq(0), rst_next.eq(0), phase.eq(0)]
            m.d.sync += [p.eq(0) for p in preds]
            with m.If(table_error):
                finish(S.BAD_TABLE)

        # ---- One symbol per clock ------------------------------------------------------------
        is_dc = k == 0
        tsel = Mux(is_dc, cfg.td[comp], Cat(cfg.ta[comp], Const(1, 1)))
        peek = bitbuf[_BUF - 16:]
        hit = Signal()
        length = Signal(5)
        index = Signal(18)
        max_now = [Array(maxcode[t][l] for t in range(tables))[tsel] for l in range(16)]
        off_now = [Array(valoff[t][l] for t in range(tables))[tsel] for l in range(16)]
        for l in reversed(range(16)):           # the shortest matching length wins
            code = peek[16 - (l + 1):]
            with m.If((max_now[l] >= 0) & (code <= max_now[l].as_unsigned()[:17])):
                m.d.comb += [hit.eq(1), length.eq(l + 1), index.eq(code + off_now[l])]
        m.d.comb += sym_r.addr.eq(Cat(index[:8], tsel))
        symbol = sym_r.data
        size = symbol[0:4]             # a DC symbol is its size (checked below to be <= 11)
        run = symbol[4:8]
        bad_category = Mux(is_dc, symbol > 11, symbol[0:4] > 10)
        after = (bitbuf << length)[_BUF - 16:_BUF]     # the 16 bits after the code
        magnitude = Signal(16)
        unused_bits = Signal(5)
        top_bit = Signal(4)
        m.d.comb += [unused_bits.eq(16 - size), top_bit.eq(size - 1),
                     magnitude.eq(after >> unused_bits)]
        value = Signal(signed(17))
        with m.If(size == 0):
            m.d.comb += value.eq(0)
        with m.Elif(magnitude.bit_select(top_bit, 1)):
            m.d.comb += value.eq(magnitude)
        with m.Else():
            m.d.comb += value.eq(magnitude - (Const(1, 17) << size) + 1)
        need = length + size
        enough = need <= nbits
        head = self.tokens.payload
        segment_over = self.tokens.valid & (head.kind != TokenKind.DATA)

        # Which beat this symbol produces, if any.
        zrl = ~is_dc & (size == 0) & (run == 15)
        eob = ~is_dc & (size == 0) & (run != 15)
        position = k + run
        new_k = Signal(7)
        block_done = Signal()
        emits = Signal()
        with m.If(is_dc):
            m.d.comb += [new_k.eq(1), emits.eq(1)]
        with m.Elif(eob):
            m.d.comb += [block_done.eq(1), emits.eq(1)]
        with m.Elif(zrl):
            m.d.comb += [new_k.eq(k + 16), block_done.eq(k + 16 == 64), emits.eq(k + 16 == 64)]
        with m.Else():
            m.d.comb += [new_k.eq(position + 1), block_done.eq(position == 63), emits.eq(1)]
        too_many = ~is_dc & ((zrl & (k + 16 > 64)) | (~zrl & ~eob & (position > 63)))
        out_free = ~self.coef.valid | self.coef.ready
        consumed = Signal(range(_BUF + 1))
        decode = scanning & (phase == 0) & ~self.done.valid

        trunc_status = Mux(head.kind == TokenKind.RESTART, S.BAD_RESTART, S.TRUNCATED)
        with m.If(decode):
            # The same order of checks as the golden model (sim/jpeg_entropy.py).
            with m.If(~hit):
                with m.If((nbits >= 16) | segment_over):
                    finish(S.BAD_HUFFMAN_CODE)
            with m.Elif(length > nbits):
                with m.If(segment_over):
                    finish(trunc_status)
            with m.Elif(too_many):
                finish(S.TOO_MANY_COEFFICIENTS)
            with m.Elif(bad_category):
                finish(S.BAD_COEFFICIENT)
            with m.Elif(~enough):
                with m.If(segment_over):
                    finish(trunc_status)
            with m.Elif(out_free | ~emits):
                m.d.comb += consumed.eq(need)
                m.d.sync += self.symbols_decoded.eq(self.symbols_decoded + 1)
                pred_new = (preds[comp] + value)[:16]
                with m.If(emits):
                    m.d.sync += [self.coef.valid.eq(1), self.coef.payload.component.eq(comp),
                                 self.coef.payload.end.eq(block_done)]
                    with m.If(is_dc):
                        m.d.sync += [preds[comp].eq(pred_new), self.coef.payload.value.eq(pred_new),
                                     self.coef.payload.zz.eq(0), self.coef.payload.write.eq(1)]
                    with m.Elif(eob | zrl):
                        m.d.sync += [self.coef.payload.value.eq(0), self.coef.payload.zz.eq(0),
                                     self.coef.payload.write.eq(0)]
                    with m.Else():
                        m.d.sync += [self.coef.payload.value.eq(value[:16]),
                                     self.coef.payload.zz.eq(position[:6]),
                                     self.coef.payload.write.eq(1)]
                m.d.sync += k.eq(new_k)
                with m.If(block_done):
                    m.d.sync += k.eq(0)
                    blocks_here = cfg.h[comp] * cfg.v[comp]
                    with m.If(blk + 1 < blocks_here):
                        m.d.sync += blk.eq(blk + 1)
                    with m.Else():
                        m.d.sync += blk.eq(0)
                        with m.If(comp + 1 < cfg.components):
                            m.d.sync += comp.eq(comp + 1)
                        with m.Else():
                            m.d.sync += [comp.eq(0), mcus_left.eq(mcus_left - 1),
                                         in_interval.eq(in_interval + 1)]
                            with m.If(mcus_left == 1):
                                m.d.sync += phase.eq(2)
                            with m.Elif((cfg.restart_interval != 0)
                                        & (in_interval + 1 == cfg.restart_interval)):
                                m.d.sync += phase.eq(1)

        # ---- Segment boundaries: restart markers and the end of the scan --------------------
        checking = scanning & (phase != 0) & ~self.done.valid
        take_token = Signal()
        with m.If(checking):
            with m.If(nbits >= 8):
                finish(S.EXCESS_ENTROPY_DATA)
            with m.Elif(self.tokens.valid):
                with m.Switch(head.kind):
                    with m.Case(TokenKind.DATA):
                        finish(S.EXCESS_ENTROPY_DATA)
                    with m.Case(TokenKind.EOF):
                        finish(S.TRUNCATED)
                    with m.Case(TokenKind.RESTART):
                        with m.If((phase == 1) & (head.value[:3] == rst_next)):
                            m.d.comb += take_token.eq(1)
                            m.d.sync += [phase.eq(0), in_interval.eq(0), rst_next.eq(rst_next + 1),
                                         bitbuf.eq(0), nbits.eq(0)]
                            m.d.sync += [p.eq(0) for p in preds]
                        with m.Else():
                            finish(S.BAD_RESTART)
                    with m.Case(TokenKind.END):
                        with m.If(phase == 2):
                            m.d.comb += take_token.eq(1)
                            finish(S.OK, head.value)
                        with m.Else():
                            finish(S.BAD_RESTART)

        # ---- Bit buffer: consume, then refill one byte --------------------------------------
        left = Signal(range(_BUF + 1))
        m.d.comb += left.eq(nbits - consumed)
        shifted = Signal(_BUF)
        m.d.comb += shifted.eq(bitbuf << consumed)
        refill = (scanning & (phase == 0) & self.tokens.valid & (head.kind == TokenKind.DATA)
                  & (left <= _BUF - 8))
        with m.If(refill):
            m.d.comb += take_token.eq(1)
        gap = Signal(range(_BUF))           # where the new byte lands below the valid bits
        m.d.comb += gap.eq(_BUF - 8 - left)
        with m.If(scanning & (phase == 0)):
            m.d.sync += [bitbuf.eq(shifted | Mux(refill, head.value << gap, 0)),
                         nbits.eq(left + Mux(refill, 8, 0))]
        m.d.comb += self.tokens.ready.eq(take_token)
        return m
