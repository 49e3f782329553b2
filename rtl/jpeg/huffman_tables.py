"""Huffman tables for the decoder, built from DHT segment bodies as they stream in.

Eight tables: DC 0..3 are tables 0..3, AC 0..3 are tables 4..7.  For each table and code
length l (T.81 F.2.2.3):

* ``floor``: 2**l - (MAXCODE + 1), also for lengths without codes.  The next code has length
  l or less exactly when its first l bits, inverted, are at least ``floor[l]``: false for
  every l shorter than the code, true from its length on (a thermometer), so the decoding
  loop finds the length with sixteen independent comparators and no priority chain.  (The
  loop keeps its copy of the window's first bits inverted, hence the inverted form.)
* ``valoff``: VALPTR - MINCODE, mod 256: adds a code to its symbol's index (a synchronous
  memory, read in the decoder's pipeline).
* the symbols (a synchronous memory).
* the *fast tables*: per class (DC, AC) one small memory per length, indexed by the table id
  and the low four bits of the code (unique as long as the length has at most 16 codes).
  An entry holds what the decoding loop needs to move on without looking at the symbol: the
  bits the symbol takes (code and magnitude), its zero run and whether it is EOB.  A length
  with more than 16 codes (the 16-bit codes of the standard AC tables, rare in practice)
  holds *slow* entries (all zero): the decoder then looks the symbol up, ``patch``-es its
  entry in for one clock and writes the slow entry back after it.  Two classes of four
  tables each keep the memories' output multiplexers at 4:1.

The loader checks what the baseline loader checked, in the same way: a class above 1 or an
id above 3, a code space that overflows, more than 256 symbols, and a body that ends early
raise ``error``, which stays set.
"""

from types import SimpleNamespace

from amaranth import Module, Signal, Array, Cat, Const
from amaranth.lib import wiring, stream, data
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..small_ram import ram_style

__all__ = ["TABLES", "DhtLayout", "FastEntry", "DcEntry", "PatchLayout", "HuffmanTables"]

TABLES = 8
DhtLayout = data.StructLayout({"byte": 8, "last": 1})

#: What the decoding loop reads for one (table, length, code).
FastEntry = data.StructLayout({
    "total": 5,      # code length + magnitude size: the bits the symbol takes
    "run": 4,        # AC: the zero run (ZRL: 15); DC: 0
    "eob": 1,        # AC: an end of block
    "adv": 1,        # 1 for a usable entry, 0 for a slow one (everything else is 0 then)
})

#: A DC table's entry: no run and no end of block, so six bits (two LUT-RAM columns of four
#: where eleven take three: 56 fewer 16x4 RAMs in the DC class, some 340 LUT4 on the ECP5).
DcEntry = data.StructLayout({"total": 5, "adv": 1})


def _fast_index_bits(length):
    return min(length, 4)


#: The fast tables are addressed by FAST_GROUPS copies of the scan's next 16 bits, one per
#: group of tables, so that the register that addresses a table can sit beside it: one
#: register reaching all 32 tables was placed 50 to 75 columns from some of them, 5-7 ns of
#: the loop's clock (docs/studies/huffman_loop.md).
FAST_GROUPS = 3


def fast_group(ac, length):
    """The copy of the next bits that addresses the fast table of this class and length."""
    return 0 if not ac else (1 if length <= 8 else 2)


#: A write into a fast table by the decoder (tables locked): the slow-symbol patch.
PatchLayout = data.StructLayout({
    "ac": 1, "table": 2, "length": 5, "code": 4, "entry": FastEntry,
})


class HuffmanTables(wiring.Component):
    """Table storage and loader.  ``fast_dc``/``fast_ac`` are combinational from the table id
    of their class and ``fast_bits`` (the next 16 bits of the scan, first bit in bit 15, in
    one copy per group of tables: :func:`fast_group`);
    ``valoff`` and ``symbol`` are read one clock after their address."""

    dht: In(stream.Signature(DhtLayout))
    locked: In(1)                       # a scan (or a patch) is in progress: no loading
    idle: Out(1)                        # between tables
    error: Out(1)
    floor: Out(data.ArrayLayout(data.ArrayLayout(17, 16), TABLES),
               init=[[1 << l for l in range(1, 17)]] * TABLES)
    fast_dc_table: In(2)
    fast_ac_table: In(2)
    fast_bits: In(16).array(FAST_GROUPS)                 # the same bits, one copy per group
    fast_dc: Out(data.ArrayLayout(DcEntry, 16))         # element l - 1: codes of length l
    fast_ac: Out(data.ArrayLayout(FastEntry, 16))
    patch: In(PatchLayout)              # written when patch_en (tables locked)
    patch_en: In(1)
    patching: In(1)                     # a patch is in or going in: the write port is its
    valoff_addr: In(7)                                  # {table, length - 1}
    valoff: Out(8)
    symbol_addr: In(11)                                 # {table, index}
    symbol: Out(8)

    def __init__(self, small_ram="block"):
        self.small_ram = small_ram          # where the value offsets go (dlforge.rtl.small_ram)
        super().__init__()

    def elaborate(self, platform):
        m = Module()

        # ---- Storage ---------------------------------------------------------------------
        # Written only between scans (``locked`` holds the loader off) and read only during
        # one: a read never needs what a write of the same clock holds, so yosys need not
        # build a bypass for it (``no_rw_check``); the offsets take a block RAM (``small_ram``
        # "block") or 16 LUT RAMs.
        m.submodules.symbols = symbols = Memory(shape=8, depth=TABLES * 256, init=[],
                                                attrs={"no_rw_check": 1})
        sym_w = symbols.write_port()
        sym_r = symbols.read_port()
        m.submodules.valoffs = valoffs = Memory(shape=8, depth=TABLES * 16, init=[],
                                                attrs={"no_rw_check": 1,
                                                       "ram_style": ram_style(self.small_ram)})
        off_w = valoffs.write_port()
        off_r = valoffs.read_port()
        m.d.comb += [sym_r.addr.eq(self.symbol_addr), self.symbol.eq(sym_r.data),
                     off_r.addr.eq(self.valoff_addr), self.valoff.eq(off_r.data)]

        # Fast tables; the loader writes them between scans, the decoder's patch during one.
        fast_w = {}
        fast_addr = Signal(6)               # {table id, low code bits}
        fast_data = Signal(FastEntry)
        for cls, table_in, out in (("dc", self.fast_dc_table, self.fast_dc),
                                   ("ac", self.fast_ac_table, self.fast_ac)):
            for l in range(1, 17):
                ib = _fast_index_bits(l)
                shape = FastEntry if cls == "ac" else DcEntry
                mem = Memory(shape=shape, depth=4 << ib, init=[])
                m.submodules[f"fast_{cls}_l{l}"] = mem
                rd = mem.read_port(domain="comb")
                bits = self.fast_bits[fast_group(cls == "ac", l)]
                code = bits[16 - l:16]                       # the first l bits
                m.d.comb += [rd.addr.eq(Cat(code[:ib], table_in)), out[l - 1].eq(rd.data)]
                wr = mem.write_port()
                m.d.comb += wr.addr.eq(Cat(fast_addr[:ib], fast_addr[4:6]))
                if cls == "ac":
                    m.d.comb += wr.data.eq(fast_data)
                else:
                    m.d.comb += [wr.data.total.eq(fast_data.total),
                                 wr.data.adv.eq(fast_data.adv)]
                fast_w[cls, l] = wr
        # The loader's writes wait a clock in registers (``staged``): its logic, from the DHT
        # stream's handshake through its state to the write enables, then ends there instead
        # of at the memories' write ports (in a C-slowed pair that was the decoder's critical
        # path).  ``idle`` waits for them.
        staged = SimpleNamespace(
            off_addr=Signal(7), off_data=Signal(8), off_en=Signal(),
            sym_addr=Signal(11), sym_data=Signal(8), sym_en=Signal(),
            fast_addr=Signal(6), fast_data=Signal(FastEntry), fast_en=Signal(len(fast_w)))
        m.d.sync += [staged.off_en.eq(0), staged.sym_en.eq(0), staged.fast_en.eq(0)]
        m.d.comb += [off_w.addr.eq(staged.off_addr), off_w.data.eq(staged.off_data),
                     off_w.en.eq(staged.off_en), sym_w.addr.eq(staged.sym_addr),
                     sym_w.data.eq(staged.sym_data), sym_w.en.eq(staged.sym_en)]
        # The patch's port is chosen by ``patching`` (registers), not by ``patch_en``: in the
        # one-file decoder the restore's enable comes late in the clock, from the loop's
        # ``run``, and it then meets only the write enables, not the address multiplexers
        # ahead of their decoders (the two-file core's critical path in one placement).  While a patch is in, the
        # loader is locked out, so it has no write staged.
        with m.If(self.patching):
            p = self.patch
            m.d.comb += [fast_addr.eq(Cat(p.code, p.table)), fast_data.eq(p.entry)]
            for (cls, l), wr in fast_w.items():
                m.d.comb += wr.en.eq(self.patch_en & (p.length == l)
                                     & (p.ac if cls == "ac" else ~p.ac))
        with m.Else():
            m.d.comb += [fast_addr.eq(staged.fast_addr), fast_data.eq(staged.fast_data)]
            for i, wr in enumerate(fast_w.values()):
                m.d.comb += wr.en.eq(staged.fast_en[i])

        # ---- Loader --------------------------------------------------------------------
        ld_state = Signal(2)            # 0: table header, 1: counts, 2: symbols
        ld_table = Signal(3)
        ld_len = Signal(5)              # 1..16 while reading counts
        ld_code = Signal(18)            # first code of length ld_len
        ld_k = Signal(9)                # symbols announced so far
        ld_i = Signal(9)                # symbols stored so far
        # The lengths that have codes, in order, with their first code and count: the symbol
        # walker reads the next one by a counter (one index, not a chain of two).
        used = Array(Signal(data.StructLayout({"len": 5, "code": 4, "count": 8, "wide": 1}),
                            name=f"used{i}")
                     for i in range(16))
        n_used = Signal(5)              # lengths listed so far
        at_used = Signal(4)             # the walker's next list entry
        # The symbol walker: length, low code bits and codes left at the current length.
        cl = Signal(5)
        cl_code = Signal(4)
        cl_left = Signal(8)
        cl_wide = Signal()              # more than 16 codes at this length: slow entries

        m.d.comb += [self.dht.ready.eq(~self.locked),
                     # (a fast-table write is staged only beside a symbol's: its enables
                     # need no test of their own, which kept four LUTs on the way from
                     # them through ``idle`` to the decoder's ``scan.ready``)
                     self.idle.eq((ld_state == 0) & ~staged.off_en & ~staged.sym_en)]
        byte = self.dht.payload.byte
        last = self.dht.payload.last
        is_ac = ld_table[2]

        def start_length(entry, at):
            m.d.sync += [cl.eq(entry.len), cl_code.eq(entry.code), cl_left.eq(entry.count),
                         cl_wide.eq(entry.wide), at_used.eq(at)]

        with m.If(self.dht.valid & self.dht.ready):
            with m.Switch(ld_state):
                with m.Case(0):
                    m.d.sync += [ld_table.eq(Cat(byte[0:2], byte[4])), ld_len.eq(1),
                                 ld_code.eq(0), ld_k.eq(0), ld_i.eq(0), ld_state.eq(1),
                                 n_used.eq(0)]
                    with m.If((byte[4:8] > 1) | (byte[0:4] > 3) | last):
                        m.d.sync += [self.error.eq(1), ld_state.eq(0)]
                with m.Case(1):
                    count = byte
                    for t in range(TABLES):
                        for l in range(16):
                            with m.If((ld_table == t) & (ld_len == l + 1)):
                                m.d.sync += self.floor[t][l].eq(
                                    (1 << (l + 1)) - (ld_code + count))
                    m.d.sync += [staged.off_addr.eq(Cat((ld_len - 1)[:4], ld_table)),
                                 staged.off_data.eq(ld_k - ld_code), staged.off_en.eq(1)]
                    listed = Signal.like(used[0])
                    m.d.comb += [listed.len.eq(ld_len), listed.code.eq(ld_code[:4]),
                                 listed.count.eq(count), listed.wide.eq(count > 16)]
                    with m.If(count != 0):
                        m.d.sync += [used[n_used[:4]].eq(listed), n_used.eq(n_used + 1)]
                    m.d.sync += [ld_code.eq((ld_code + count) << 1), ld_k.eq(ld_k + count),
                                 ld_len.eq(ld_len + 1)]
                    with m.If((ld_code + count) >= (Const(1, 18) << ld_len)):
                        # The code space overflows, or the all-ones code is used (jdhuff.c).
                        m.d.sync += self.error.eq(1)
                    with m.If(ld_len == 16):
                        total = ld_k + count
                        with m.If(total > 256):
                            m.d.sync += [self.error.eq(1), ld_state.eq(0)]
                        with m.Elif(total == 0):
                            m.d.sync += ld_state.eq(0)
                        with m.Else():
                            m.d.sync += ld_state.eq(2)
                        # The walker starts at the first length with codes.
                        with m.If(n_used == 0):
                            start_length(listed, 0)
                        with m.Else():
                            start_length(used[0], 1)
                    # A table without symbols may end its segment with its 16th count.
                    complete = (ld_len == 16) & (ld_k + count == 0)
                    with m.If(last & ~complete):
                        m.d.sync += [self.error.eq(1), ld_state.eq(0)]
                with m.Case(2):
                    m.d.sync += [staged.sym_addr.eq(Cat(ld_i[:8], ld_table)),
                                 staged.sym_data.eq(byte), staged.sym_en.eq(1)]
                    size, run = byte[0:4], byte[4:8]
                    entry = Signal(FastEntry)
                    with m.If(~cl_wide):
                        m.d.comb += [entry.total.eq(cl + size), entry.adv.eq(1)]
                        with m.If(is_ac):
                            m.d.comb += [entry.run.eq(run),
                                         entry.eob.eq((size == 0) & (run != 15))]
                    m.d.sync += [staged.fast_addr.eq(Cat(cl_code, ld_table[:2])),
                                 staged.fast_data.eq(entry),
                                 staged.fast_en.eq(Cat(*[(cl == l) & (is_ac if cls == "ac"
                                                                      else ~is_ac)
                                                         for cls, l in fast_w]))]
                    with m.If(cl_left == 1):
                        start_length(used[at_used], at_used + 1)
                    with m.Else():
                        m.d.sync += [cl_code.eq(cl_code + 1), cl_left.eq(cl_left - 1)]
                    m.d.sync += ld_i.eq(ld_i + 1)
                    with m.If(ld_i + 1 == ld_k):
                        m.d.sync += ld_state.eq(0)
                    with m.Elif(last):
                        m.d.sync += [self.error.eq(1), ld_state.eq(0)]
        return m
