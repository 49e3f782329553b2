"""The JPEG marker parser: a whole file in, tables, the scan and the file's status out.

It walks the file exactly as the golden model does (``sim/jpeg_parse.parse_headers``, then
``sim/jpeg_model.check_trailer`` after the scan) and gives the same :class:`JpegStatus` for
every file: the first error the model would raise, or OK.  One input byte per clock in every
state that reads; a segment costs one extra clock at its end, an accepted scan about 16 (the
MCU count is a shift-and-add), and the scan's bytes go straight through to ``entropy``.

The model checks a segment's length against the end of the data before it looks inside, so
any fault found inside a segment is only *pending* (``perr``) until the segment's last byte:
a file that ends first is TRUNCATED instead.

Table bodies: every byte of a DQT/DHT segment body is forwarded to ``dqt``/``dht`` as it is
read, with ``last`` on the segment's final byte.  A bad table does not stop the forwarding:
the rest of the segment still goes out, so the loader always gets its ``last`` (both loaders
go back to their idle state on any ``last`` beat, flagging an error if it came early).  If the
packet ends inside a body, the packet's final byte is forwarded with ``last`` set.  Nothing is
forwarded for an empty body, nor for tables after the scan (``check_trailer`` skips them).

Drain: once the status is known the rest of the packet is read and dropped up to its ``last``
byte, unless that byte was already read, by the parser or by the entropy decoder through
``entropy``.  ``result`` then goes out, after every other output of the file was taken, and
the next packet starts from a clean state: tables, frame, DRI, JFIF/Adobe are per file.

A scan whose SOS header ends on the packet's final byte still starts the entropy decoder: it
gets one made-up beat, FF with ``last`` (a fill byte at the end of the data), so it reports
what the model's ``decode_scan`` reports for an empty scan instead of waiting for bytes.
"""

from amaranth import Module, Signal, Cat, Const, Mux
from amaranth.lib import wiring, stream, data
from amaranth.lib.wiring import In, Out

from .coefficient_buffer import DqtLayout
from .frame import FrameLayout, ResultLayout
from .huffman_decoder import DhtLayout, DoneLayout, MAX_COMPONENTS, ScanLayout
from .limits import DEFAULT_MAX_HEIGHT, DEFAULT_MAX_WIDTH, LIMIT_MAX_HEIGHT, LIMIT_MAX_WIDTH
from .status import FRAME_TYPE_STATUS, JpegStatus as S
from .unstuff import ByteLayout

__all__ = ["MarkerParser"]

# Frame types other than SOF0/SOF1, and their statuses.
_SOF_KIND = FRAME_TYPE_STATUS

# Table sub-parser states (DQT and DHT bodies).
_T_HDR, _T_CNT, _T_DATA = 0, 1, 2


class MarkerParser(wiring.Component):
    """Ports: ``i`` (one file per packet), ``dqt``/``dht`` (table bodies), ``quant_select``,
    ``scan`` and ``frame`` (one beat each per accepted SOS), ``entropy`` (the bytes after
    the SOS header, until ``done``), ``done`` (the entropy decoder's verdict) and ``result``
    (one beat per file, after its last byte)."""

    def __init__(self, max_width=DEFAULT_MAX_WIDTH, max_height=DEFAULT_MAX_HEIGHT):
        # mcux is 10 bits and mcuy 14 bits in FrameLayout (see limits.py).
        if not (1 <= max_width <= LIMIT_MAX_WIDTH and 1 <= max_height <= LIMIT_MAX_HEIGHT):
            self._MustUse__silence = True
            raise ValueError(f"limits {max_width}x{max_height} outside "
                             f"1..{LIMIT_MAX_WIDTH} x 1..{LIMIT_MAX_HEIGHT}")
        self.max_width, self.max_height = max_width, max_height
        super().__init__({
            "i": In(stream.Signature(ByteLayout)),
            "dqt": Out(stream.Signature(DqtLayout)),
            "dht": Out(stream.Signature(DhtLayout)),
            "quant_select": Out(data.ArrayLayout(2, MAX_COMPONENTS)),
            "scan": Out(stream.Signature(ScanLayout)),
            "frame": Out(stream.Signature(FrameLayout)),
            "entropy": Out(stream.Signature(ByteLayout)),
            "done": In(stream.Signature(DoneLayout)),
            "result": Out(stream.Signature(ResultLayout)),
        })

    def _too_large(self, width, height):
        # Only the limits below what the 16-bit fields can hold need a comparator.
        checks = [field > limit for field, limit in ((width, self.max_width),
                                                     (height, self.max_height))
                  if limit < 0xFFFF]
        return Cat(*checks).any() if checks else Const(0)

    def elaborate(self, platform):
        m = Module()
        byte, last = self.i.payload.byte, self.i.payload.last
        take = Signal()                  # an input byte is consumed (by us or by `entropy`)
        m.d.comb += take.eq(self.i.valid & self.i.ready)

        # ---- Per-file state (cleared when the result is taken) --------------------------
        status = Signal(8)
        pkt_over = Signal()              # the packet's last byte has been consumed
        trailer = Signal()               # after the scan: check_trailer's rules
        quant_def, dc_def, ac_def = Signal(4), Signal(4), Signal(4)   # defined in this file
        dc_big = Signal(4)               # DC tables with a symbol above 15 (libjpeg refuses)
        frame_seen = Signal()
        jfif, adobe, adobe_t = Signal(), Signal(), Signal(8)
        restart = Signal(16)
        synth = Signal()                 # the made-up FF/last beat for an empty scan is due
        per_file = [status, pkt_over, trailer, quant_def, dc_def, ac_def, dc_big, frame_seen,
                    jfif, adobe, adobe_t, restart, synth]

        # ---- Segment state ------------------------------------------------------------
        marker = Signal(8)
        len_hi = Signal(8)
        blen = Signal(16)                # body length (segment length - 2)
        remaining = Signal(16)           # body bytes left, the current one included
        bpos = Signal(5)                 # body position, saturating
        seg_last = Signal()              # the segment's final byte was the packet's last
        perr = Signal(8)                 # the first fault found inside this segment
        app_match, app_t = Signal(), Signal(8)
        tstate = Signal(2)
        tleft = Signal(9)                # table data bytes left
        tcnt = Signal(4)                 # DHT: which of the 16 counts
        total = Signal(12)               # DHT: symbols announced so far
        code = Signal(18)                # DHT: canonical code space used (jdhuff.c check)
        cur_dc, cur_th = Signal(), Signal(2)     # DHT: the table being read

        # ---- Frame and scan ---------------------------------------------------------------
        width, height = Signal(16), Signal(16)
        ncomp = Signal(8)
        prec8 = Signal()
        ident = [Signal(8, name=f"ident{c}") for c in range(MAX_COMPONENTS)]
        hf = [Signal(3, name=f"h{c}") for c in range(MAX_COMPONENTS)]
        vf = [Signal(3, name=f"v{c}") for c in range(MAX_COMPONENTS)]
        tq = [Signal(2, name=f"tq{c}") for c in range(MAX_COMPONENTS)]
        td = [Signal(2, name=f"td{c}") for c in range(MAX_COMPONENTS)]
        ta = [Signal(2, name=f"ta{c}") for c in range(MAX_COMPONENTS)]
        h2, v2 = Signal(), Signal()      # the MCU is 2 luma blocks across / down
        mcux, mcuy = Signal(10), Signal(14)
        mul_a, mul_b, acc = Signal(24), Signal(14), Signal(24)

        is_dqt = marker == 0xDB
        is_dht = marker == 0xC4
        is_sof = (marker[4:8] == 0xC) & ~is_dht & (marker != 0xCC)
        is_sos = marker == 0xDA
        is_dri = marker == 0xDD
        sof_kind = Signal(8)
        with m.Switch(marker):
            for sof, kind in _SOF_KIND.items():
                with m.Case(sof):
                    m.d.comb += sof_kind.eq(kind)

        # ---- Output streams: valid held until taken ------------------------------------
        for out in (self.dqt, self.dht, self.scan, self.frame):
            with m.If(out.ready):
                m.d.sync += out.valid.eq(0)
        fwd_q = ~trailer & is_dqt
        fwd_h = ~trailer & is_dht
        fwd_stall = ((fwd_q & self.dqt.valid & ~self.dqt.ready)
                     | (fwd_h & self.dht.valid & ~self.dht.ready))

        def finish(code):
            m.d.sync += status.eq(code)
            m.next = "DRAIN"

        def goto(state, is_last, trunc=S.TRUNCATED):
            with m.If(is_last):
                finish(trunc)
            with m.Else():
                m.next = state

        def no_length(c):
            """Markers without a length: SOI, EOI, RSTn, TEM."""
            return (c == 0xD8) | (c == 0xD9) | (c[3:8] == 0b11010) | (c == 0x01)

        def header_marker(c, is_last):
            with m.If(no_length(c)):
                finish(S.UNEXPECTED_MARKER)
            with m.Else():
                m.d.sync += marker.eq(c)
                goto("LEN_HI", is_last)

        def trailer_marker(c, is_last):
            """check_trailer: only EOI ends the file well; other segments are skipped."""
            with m.If(c == 0xD9):
                finish(S.OK)
            with m.Elif(c == 0xDA):
                finish(S.UNSUPPORTED_MULTISCAN)
            with m.Elif(c == 0xDC):
                finish(S.UNSUPPORTED_DNL)
            with m.Elif(no_length(c)):
                finish(S.UNEXPECTED_MARKER)
            with m.Else():
                m.d.sync += [marker.eq(c), trailer.eq(1)]
                goto("LEN_HI", is_last)

        def flag(code):
            m.d.sync += perr.eq(code)

        premature = S.TRUNCATED

        def table_data():
            m.d.sync += tleft.eq(tleft - 1)
            with m.If(tleft == 1):
                m.d.sync += tstate.eq(_T_HDR)

        def parse_body():
            """The checks of one header body byte, in the model's order (no fault yet)."""
            with m.If(is_dqt):                                      # _parse_dqt
                with m.Switch(tstate):
                    with m.Case(_T_HDR):
                        pq, tid = byte[4:8], byte[0:4]
                        size = Mux(pq[0], 128, 64)
                        with m.If((pq > 1) | (tid > 3)):
                            flag(S.BAD_TABLE)
                        with m.Elif(remaining <= size):             # runs past the segment
                            flag(S.BAD_TABLE)
                        with m.Else():
                            m.d.sync += [quant_def.eq(quant_def | (Const(1, 4) << tid[:2])),
                                         tleft.eq(size), tstate.eq(_T_DATA)]
                    with m.Case(_T_DATA):
                        table_data()

            with m.Elif(is_dht):                                    # _parse_dht
                with m.Switch(tstate):
                    with m.Case(_T_HDR):
                        tc, th = byte[4:8], byte[0:4]
                        with m.If((remaining < 17) | (tc > 1) | (th > 3)):
                            flag(S.BAD_TABLE)
                        with m.Else():
                            bit = Const(1, 4) << th[:2]
                            with m.If(tc[0]):
                                m.d.sync += ac_def.eq(ac_def | bit)
                            with m.Else():                  # a new table replaces the old
                                m.d.sync += [dc_def.eq(dc_def | bit), dc_big.eq(dc_big & ~bit)]
                            m.d.sync += [tcnt.eq(0), total.eq(0), code.eq(0), tstate.eq(_T_CNT),
                                         cur_dc.eq(~tc[0]), cur_th.eq(th[:2])]
                    with m.Case(_T_CNT):
                        code_new = code + byte
                        total_new = total + byte
                        m.d.sync += [code.eq(code_new << 1), total.eq(total_new),
                                     tcnt.eq(tcnt + 1)]
                        # The codes must fit their lengths and none may be all ones.
                        with m.If(code_new >= (Const(2, 18) << tcnt)):
                            flag(S.BAD_TABLE)
                        with m.Elif(tcnt == 15):
                            with m.If((total_new > 256) | (total_new >= remaining)):
                                flag(S.BAD_TABLE)
                            with m.Elif(total_new == 0):
                                m.d.sync += tstate.eq(_T_HDR)
                            with m.Else():
                                m.d.sync += [tleft.eq(total_new), tstate.eq(_T_DATA)]
                    with m.Case(_T_DATA):
                        table_data()
                        with m.If(cur_dc & (byte > 15)):
                            m.d.sync += dc_big.eq(dc_big | (Const(1, 4) << cur_th))

            with m.Elif(is_sof):                                    # _parse_sof
                with m.Switch(bpos):
                    with m.Case(0):
                        m.d.sync += prec8.eq(byte == 8)
                    with m.Case(1):
                        m.d.sync += height[8:16].eq(byte)
                    with m.Case(2):
                        m.d.sync += height[0:8].eq(byte)
                    with m.Case(3):
                        m.d.sync += width[8:16].eq(byte)
                    with m.Case(4):
                        m.d.sync += width[0:8].eq(byte)
                    with m.Case(5):                 # the counts and sizes, in the model's order
                        m.d.sync += ncomp.eq(byte)
                        with m.If(blen != 6 + byte + (byte << 1)):
                            flag(S.BAD_FRAME_HEADER)
                        with m.Elif(~prec8):
                            flag(S.UNSUPPORTED_PRECISION)
                        with m.Elif(height == 0):
                            flag(S.UNSUPPORTED_DNL)
                        with m.Elif(width == 0):
                            flag(S.BAD_FRAME_HEADER)
                        with m.Elif((byte != 1) & (byte != 3)):
                            flag(S.UNSUPPORTED_COMPONENTS)
                    for c in range(MAX_COMPONENTS):
                        with m.Case(6 + 3 * c):
                            m.d.sync += ident[c].eq(byte)
                            for j in range(c):
                                with m.If(ident[j] == byte):
                                    flag(S.BAD_FRAME_HEADER)        # an id twice
                        with m.Case(7 + 3 * c):
                            h, v = byte[4:8], byte[0:4]
                            m.d.sync += [hf[c].eq(h), vf[c].eq(v)]
                            with m.If((h < 1) | (h > 4) | (v < 1) | (v > 4)):
                                flag(S.BAD_FRAME_HEADER)
                        with m.Case(8 + 3 * c):
                            m.d.sync += tq[c].eq(byte)
                            with m.If(byte > 3):
                                flag(S.BAD_FRAME_HEADER)

            with m.Elif(is_sos):                                    # _parse_sos
                with m.If(bpos == 0):
                    with m.If(blen != 4 + (byte << 1)):
                        flag(S.BAD_SCAN_HEADER)
                    with m.Elif(byte != ncomp):
                        flag(S.UNSUPPORTED_MULTISCAN)
                for n in (1, 3):                    # past byte 0 the count is the frame's
                    with m.Elif(ncomp == n):
                        with m.Switch(bpos):
                            for c in range(n):
                                with m.Case(1 + 2 * c):
                                    with m.If(byte != ident[c]):
                                        flag(S.BAD_SCAN_HEADER)
                                with m.Case(2 + 2 * c):
                                    m.d.sync += [td[c].eq(byte[4:8]), ta[c].eq(byte[0:4])]
                                    with m.If((byte[4:8] > 3) | (byte[0:4] > 3)):
                                        flag(S.BAD_SCAN_HEADER)
                            for k, want in enumerate((0, 63, 0)):   # Ss, Se, Ah/Al
                                with m.Case(1 + 2 * n + k):
                                    with m.If(byte != want):
                                        flag(S.BAD_SCAN_HEADER)

            with m.Elif(is_dri):
                with m.If(bpos == 0):
                    m.d.sync += restart[8:16].eq(byte)
                with m.Else():
                    m.d.sync += restart[0:8].eq(byte)

            with m.Elif((marker == 0xE0) | (marker == 0xEE)):       # JFIF / Adobe
                for k in range(5):
                    with m.If(bpos == k):
                        want = Mux(marker == 0xE0, b"JFIF\0"[k], b"Adobe"[k])
                        with m.If(byte != want):
                            m.d.sync += app_match.eq(0)
                with m.If(bpos == 11):
                    m.d.sync += app_t.eq(byte)

        def accept_scan():
            """SOS complete and well formed: the table and colour checks, then the scan."""
            missing = Signal(8)
            for c in reversed(range(MAX_COMPONENTS)):   # the first component with a gap wins
                no_q = ~quant_def.bit_select(tq[c], 1)
                no_h = ~dc_def.bit_select(td[c], 1) | ~ac_def.bit_select(ta[c], 1)
                with m.If((c < ncomp) & (no_q | no_h)):
                    m.d.comb += missing.eq(Mux(no_q, S.MISSING_QUANT_TABLE,
                                               S.MISSING_HUFFMAN_TABLE))
            big_dc = Cat((c < ncomp) & dc_big.bit_select(td[c], 1)
                         for c in range(MAX_COMPONENTS)).any()
            rgb_ids = Cat(ident[0], ident[1], ident[2]) == int.from_bytes(b"RGB", "little")
            rgb = Mux(adobe, adobe_t == 0, rgb_ids)               # jdapimin.c's guess
            with m.If(missing != 0):
                finish(missing)
            with m.Elif(big_dc):
                finish(S.BAD_TABLE)
            with m.Elif((ncomp == 3) & ~jfif & rgb):
                finish(S.UNSUPPORTED_COLORSPACE)
            with m.Else():
                color = ncomp == 3
                scan, frame = self.scan.payload, self.frame.payload
                hl, vl = Mux(h2, 2, 1), Mux(v2, 2, 1)
                m.d.sync += [
                    scan.components.eq(ncomp), scan.restart_interval.eq(restart),
                    scan.h[0].eq(hl), scan.v[0].eq(vl),
                    frame.width.eq(width), frame.height.eq(height), frame.components.eq(ncomp),
                    frame.h.eq(hl), frame.v.eq(vl), frame.mcux.eq(mcux), frame.mcuy.eq(mcuy),
                    mul_a.eq(mcux), mul_b.eq(mcuy), acc.eq(0), synth.eq(seg_last),
                ]
                for c in range(MAX_COMPONENTS):
                    present = 1 if c == 0 else color
                    m.d.sync += [self.quant_select[c].eq(Mux(present, tq[c], 0)),
                                 scan.td[c].eq(Mux(present, td[c], 0)),
                                 scan.ta[c].eq(Mux(present, ta[c], 0))]
                    if c:
                        m.d.sync += [scan.h[c].eq(color), scan.v[c].eq(color)]
                m.next = "MUL"

        with m.FSM():
            with m.State("SOI0"):
                m.d.comb += self.i.ready.eq(1)
                with m.If(take):
                    with m.If((byte == 0xFF) & ~last):
                        m.next = "SOI1"
                    with m.Else():
                        finish(S.NO_SOI)

            with m.State("SOI1"):
                m.d.comb += self.i.ready.eq(1)
                with m.If(take):
                    with m.If(byte == 0xD8):
                        goto("MARK", last)
                    with m.Else():
                        finish(S.NO_SOI)

            with m.State("MARK"):
                m.d.comb += self.i.ready.eq(1)
                with m.If(take):
                    with m.If(byte != 0xFF):
                        finish(S.UNEXPECTED_MARKER)
                    with m.Else():
                        goto("FILL", last)

            with m.State("FILL"):                          # FF seen; more FF are fill
                m.d.comb += self.i.ready.eq(1)
                with m.If(take):
                    with m.If(byte == 0xFF):
                        with m.If(last):
                            finish(S.TRUNCATED)
                    with m.Elif(trailer):
                        trailer_marker(byte, last)
                    with m.Else():
                        header_marker(byte, last)

            with m.State("LEN_HI"):
                m.d.comb += self.i.ready.eq(1)
                with m.If(take):
                    m.d.sync += len_hi.eq(byte)
                    goto("LEN_LO", last)

            with m.State("LEN_LO"):
                m.d.comb += self.i.ready.eq(1)
                length = Cat(byte, len_hi)
                with m.If(take):
                    m.d.sync += [blen.eq(length - 2), remaining.eq(length - 2), bpos.eq(0),
                                 tstate.eq(_T_HDR), app_match.eq(1), perr.eq(0), seg_last.eq(last)]
                    # Faults the model finds from the marker and length alone.
                    with m.If(~trailer):
                        with m.If(is_dqt | is_dht):
                            with m.If(length == 2):
                                flag(S.BAD_TABLE)
                        with m.Elif(marker == 0xCC):
                            flag(S.UNSUPPORTED_ARITHMETIC)
                        with m.Elif((marker == 0xDE) | (marker == 0xDF)):
                            flag(S.UNSUPPORTED_HIERARCHICAL)
                        with m.Elif(is_dri):
                            with m.If(length != 4):
                                flag(S.BAD_MARKER_LENGTH)
                        with m.Elif(marker == 0xDC):
                            flag(S.UNSUPPORTED_DNL)
                        with m.Elif(is_sof):
                            with m.If(frame_seen):
                                flag(S.UNEXPECTED_MARKER)
                            with m.Elif(sof_kind != 0):
                                flag(sof_kind)
                            with m.Elif(length < 8):
                                flag(S.BAD_FRAME_HEADER)
                        with m.Elif(is_sos):
                            with m.If(~frame_seen):
                                flag(S.UNEXPECTED_MARKER)
                            with m.Elif(length == 2):
                                flag(S.BAD_SCAN_HEADER)
                    with m.If(length < 2):
                        finish(S.BAD_MARKER_LENGTH)
                    with m.Elif(length == 2):
                        m.next = "SEG_END"
                    with m.Else():
                        goto("BODY", last, premature)

            with m.State("BODY"):
                m.d.comb += self.i.ready.eq(~fwd_stall)
                final = remaining == 1
                with m.If(take):
                    m.d.sync += [remaining.eq(remaining - 1), seg_last.eq(last)]
                    with m.If(bpos != 31):
                        m.d.sync += bpos.eq(bpos + 1)
                    for out, fwd in ((self.dqt, fwd_q), (self.dht, fwd_h)):
                        with m.If(fwd):
                            m.d.sync += [out.valid.eq(1), out.payload.byte.eq(byte),
                                         out.payload.last.eq(final | last)]
                    with m.If(~trailer & (perr == 0)):
                        parse_body()
                    with m.If(final):
                        m.next = "SEG_END"
                    with m.Elif(last):
                        finish(premature)

            with m.State("SEG_END"):
                with m.If(trailer):
                    goto("MARK", seg_last)
                with m.Elif(perr != 0):
                    finish(perr)
                with m.Elif(is_sof):
                    luma_ok = (hf[0] <= 2) & (vf[0] <= 2)          # 1 and 4 checked already
                    chroma_ok = (hf[1] == 1) & (vf[1] == 1) & (hf[2] == 1) & (vf[2] == 1)
                    with m.If((ncomp == 3) & ~(luma_ok & chroma_ok)):
                        finish(S.UNSUPPORTED_SAMPLING)
                    with m.Elif(self._too_large(width, height)):
                        finish(S.TOO_LARGE)
                    with m.Else():
                        wide = (ncomp == 3) & (hf[0] == 2)
                        tall = (ncomp == 3) & (vf[0] == 2)
                        m.d.sync += [
                            frame_seen.eq(1), h2.eq(wide), v2.eq(tall),
                            mcux.eq(Mux(wide, (width + 15) >> 4, (width + 7) >> 3)),
                            mcuy.eq(Mux(tall, (height + 15) >> 4, (height + 7) >> 3)),
                        ]
                        goto("MARK", seg_last)
                with m.Elif(is_sos):
                    accept_scan()
                with m.Else():
                    with m.If((marker == 0xE0) & (blen >= 14) & app_match):
                        m.d.sync += jfif.eq(1)
                    with m.If((marker == 0xEE) & (blen >= 12) & app_match):
                        m.d.sync += [adobe.eq(1), adobe_t.eq(app_t)]
                    goto("MARK", seg_last)

            with m.State("MUL"):                             # mcus = mcux * mcuy
                with m.If(mul_b == 0):
                    m.d.sync += [self.scan.valid.eq(1), self.scan.payload.mcus.eq(acc),
                                 self.frame.valid.eq(1)]
                    m.next = "EMIT"
                with m.Else():
                    m.d.sync += [acc.eq(acc + Mux(mul_b[0], mul_a, 0)), mul_a.eq(mul_a << 1),
                                 mul_b.eq(mul_b >> 1)]

            with m.State("EMIT"):                            # the decoder takes the scan beat
                with m.If(self.scan.ready):
                    m.next = "SCAN"

            with m.State("SCAN"):
                # Straight through, one byte per clock; `valid` never waits for `ready`.  The
                # payload is the input's but for the made-up FF/last of an empty scan.
                m.d.comb += [
                    self.entropy.valid.eq(Mux(synth, 1, self.i.valid & ~pkt_over)),
                    self.entropy.payload.byte.eq(byte | Mux(synth, 0xFF, 0)),
                    self.entropy.payload.last.eq(last | synth),
                    self.i.ready.eq(self.entropy.ready & ~synth & ~pkt_over),
                    self.done.ready.eq(1),
                ]
                with m.If(synth & self.entropy.ready):
                    m.d.sync += synth.eq(0)
                with m.If(self.done.valid):
                    with m.If(self.done.payload.status != S.OK):
                        finish(self.done.payload.status)
                    with m.Else():
                        # The unstuffer has read the FF(s) and the marker code itself.
                        trailer_marker(self.done.payload.marker, pkt_over | (take & last))

            with m.State("DRAIN"):
                m.d.comb += self.i.ready.eq(~pkt_over)
                with m.If(pkt_over | (take & last)):
                    m.next = "RESULT"

            with m.State("RESULT"):
                idle = ~(self.dqt.valid | self.dht.valid | self.scan.valid | self.frame.valid)
                with m.If(self.result.valid & self.result.ready):
                    m.d.sync += self.result.valid.eq(0)
                    m.d.sync += [s.eq(s.init) for s in per_file]
                    m.next = "SOI0"
                with m.Elif(idle):
                    m.d.sync += [self.result.valid.eq(1), self.result.payload.status.eq(status)]

        # After the FSM: the packet's end wins over the per-file reset of the same clock
        # (they cannot coincide: RESULT reads nothing).
        with m.If(take & last):
            m.d.sync += pkt_over.eq(1)
        return m
