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

from types import SimpleNamespace

from amaranth import Module, Signal, Cat, Const, Mux, signed
from amaranth.lib import wiring, stream, data
from amaranth.lib.wiring import In, Out

from .coefficient_buffer import DqtLayout
from .frame import FrameLayout, ResultLayout
from .huffman_decoder import DhtLayout, DoneLayout, MAX_COMPONENTS, ScanLayout
from .limits import DEFAULT_MAX_HEIGHT, DEFAULT_MAX_WIDTH, LIMIT_MAX_HEIGHT, LIMIT_MAX_WIDTH
from .status import JpegStatus as S
from .syntax import FRAME_TYPE_STATUS, Marker
from .unstuff import ByteLayout

__all__ = ["MarkerParser"]

# Frame types other than SOF0/SOF1, and their statuses.
_SOF_KIND = FRAME_TYPE_STATUS

# Table sub-parser states (DQT and DHT bodies).
_T_HDR, _T_CNT, _T_DATA = 0, 1, 2


class _Steps:
    """The FSM's shared moves (end the file, go on unless the packet ended, note a fault), so
    that every state spells them the same way."""

    def __init__(self, m, status, perr, marker, trailer):
        self.m = m
        self.status, self.perr, self.marker, self.trailer = status, perr, marker, trailer

    def finish(self, code):
        self.m.d.sync += self.status.eq(code)
        self.m.next = "DRAIN"

    def goto(self, state, is_last, trunc=S.TRUNCATED):
        with self.m.If(is_last):
            self.finish(trunc)
        with self.m.Else():
            self.m.next = state

    def flag(self, code):
        self.m.d.sync += self.perr.eq(code)

    @staticmethod
    def no_length(c):
        """Markers without a length: SOI, EOI, RSTn, TEM."""
        return ((c == Marker.SOI) | (c == Marker.EOI) | (c[3:8] == Marker.RST0 >> 3)
                | (c == Marker.TEM))

    def header_marker(self, c, is_last):
        m = self.m
        with m.If(self.no_length(c)):
            self.finish(S.UNEXPECTED_MARKER)
        with m.Else():
            m.d.sync += self.marker.eq(c)
            self.goto("LEN_HI", is_last)

    def trailer_marker(self, c, is_last):
        """check_trailer: only EOI ends the file well; other segments are skipped."""
        m = self.m
        with m.If(c == Marker.EOI):
            self.finish(S.OK)
        with m.Elif(c == Marker.SOS):
            self.finish(S.UNSUPPORTED_MULTISCAN)
        with m.Elif(c == Marker.DNL):
            self.finish(S.UNSUPPORTED_DNL)
        with m.Elif(self.no_length(c)):
            self.finish(S.UNEXPECTED_MARKER)
        with m.Else():
            m.d.sync += [self.marker.eq(c), self.trailer.eq(1)]
            self.goto("LEN_HI", is_last)


class MarkerParser(wiring.Component):
    """Ports: ``i`` (one file per packet), ``dqt``/``dht`` (table bodies), ``quant_select``,
    ``scan`` and ``frame`` (one beat each per accepted SOS), ``entropy`` (the bytes after
    the SOS header, until ``done``), ``done`` (the entropy decoder's verdict), ``result``
    (one beat per file, after its last byte) and ``result_failed`` (its status is not OK: a
    register beside it, so that the core's test of it is one gate, not a comparison behind
    which the raster's output stalls: docs/studies/huffman_loop.md)."""

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
            "result_failed": Out(1),
        })

    def _too_large(self, width, height):
        # Only the limits below what the 16-bit fields can hold need a comparator.
        checks = [field > limit for field, limit in ((width, self.max_width),
                                                     (height, self.max_height))
                  if limit < 0xFFFF]
        return Cat(*checks).any() if checks else Const(0)

    def elaborate(self, platform):
        m = Module()
        take = Signal()                  # an input byte is consumed (by us or by `entropy`)
        m.d.comb += take.eq(self.i.valid & self.i.ready)
        # Each state's registers see the byte taken as that state's own ``ready`` makes it
        # (``valid`` where it is 1), not through ``take``: the scan's ``ready`` is the
        # entropy decoder's, and through ``take`` it reached every register of the parser
        # (the two-file core's critical path in two of three placements, from the state
        # through the unstuffer's ``ready`` and back).
        valid = self.i.valid

        f = self._per_file_state()
        seg = self._segment_state()
        fr = self._frame_state()
        kind = self._marker_kind(m, seg.marker)
        fwd = self._hold_outputs(m, f.trailer, kind)
        steps = _Steps(m, f.status, seg.perr, seg.marker, f.trailer)
        refused = self._refusals(m, f, fr)
        self._sof_count(m, seg, fr)

        with m.FSM():
            self._elaborate_marker_states(m, steps, valid, f)
            self._elaborate_length_states(m, steps, valid, f, seg, kind)
            self._elaborate_body_state(m, steps, valid & ~fwd.stall, f, seg, fr, kind, fwd)
            self._elaborate_segment_end(m, steps, f, seg, fr, kind, refused)
            self._elaborate_scan_states(m, steps, f, fr)
            self._elaborate_file_end(m, valid & ~f.pkt_over, f)

        # After the FSM: the packet's end wins over the per-file reset of the same clock
        # (they cannot coincide: CLEAR reads nothing).
        with m.If(take & self.i.payload.last):
            m.d.sync += f.pkt_over.eq(1)
        return m

    # ---- State ------------------------------------------------------------------------------

    @staticmethod
    def _per_file_state():
        """What one file sets up for itself: cleared the clock after its result is taken."""
        f = SimpleNamespace()
        f.status = Signal(8)
        f.pkt_over = Signal()            # the packet's last byte has been consumed
        f.trailer = Signal()             # after the scan: check_trailer's rules
        f.quant_def, f.dc_def, f.ac_def = Signal(4), Signal(4), Signal(4)  # defined in this file
        f.dc_big = Signal(4)             # DC tables with a symbol above 15 (libjpeg refuses)
        f.frame_seen = Signal()
        f.jfif, f.adobe, f.adobe_t = Signal(), Signal(), Signal(8)
        f.restart = Signal(16)
        f.synth = Signal()               # the made-up FF/last beat for an empty scan is due
        f.all = [f.status, f.pkt_over, f.trailer, f.quant_def, f.dc_def, f.ac_def, f.dc_big,
                 f.frame_seen, f.jfif, f.adobe, f.adobe_t, f.restart, f.synth]
        return f

    @staticmethod
    def _segment_state():
        """What the segment being read needs: its marker, length, position and pending fault."""
        seg = SimpleNamespace()
        seg.marker = Signal(8)
        seg.len_hi = Signal(8)
        seg.blen = Signal(16)            # body length (segment length - 2)
        seg.remaining = Signal(16)       # body bytes left, the current one included
        seg.bpos = Signal(5)             # body position, saturating
        seg.seg_last = Signal()          # the segment's final byte was the packet's last
        seg.perr = Signal(8)             # the first fault found inside this segment
        seg.app_match, seg.app_t = Signal(), Signal(8)
        seg.tstate = Signal(2)
        seg.tleft = Signal(9)            # table data bytes left
        seg.tcnt = Signal(4)             # DHT: which of the 16 counts
        seg.total = Signal(12)           # DHT: symbols announced so far
        # DHT's checks as room left, so that each count byte meets one comparator: the
        # code space left at this length (jdhuff.c's check), the symbols left before 256,
        # and the segment's bytes left after the symbols announced so far.
        seg.code_room = Signal(18)
        seg.sym_room = Signal(signed(13))
        seg.seg_room = Signal(signed(17))
        seg.total_zero = Signal()
        seg.dht_bad = Signal()           # DHT: a count byte failed its checks last clock
        seg.sos_n = Signal(8)            # SOS: the component count its length allows
        seg.sos_n_ok = Signal()          # (if there is one: the length is 6 + 2n)
        seg.cur_dc, seg.cur_th = Signal(), Signal(2)     # DHT: the table being read
        return seg

    @staticmethod
    def _frame_state():
        """The SOF and SOS fields that the scan's checks and its output beats are made of."""
        fr = SimpleNamespace()
        fr.width, fr.height = Signal(16), Signal(16)
        fr.ncomp = Signal(8)
        fr.prec8 = Signal()
        fr.ident = [Signal(8, name=f"ident{c}") for c in range(MAX_COMPONENTS)]
        fr.hf = [Signal(3, name=f"h{c}") for c in range(MAX_COMPONENTS)]
        fr.vf = [Signal(3, name=f"v{c}") for c in range(MAX_COMPONENTS)]
        fr.tq = [Signal(2, name=f"tq{c}") for c in range(MAX_COMPONENTS)]
        fr.td = [Signal(2, name=f"td{c}") for c in range(MAX_COMPONENTS)]
        fr.ta = [Signal(2, name=f"ta{c}") for c in range(MAX_COMPONENTS)]
        fr.h2, fr.v2 = Signal(), Signal()        # the MCU is 2 luma blocks across / down
        fr.mcux, fr.mcuy = Signal(10), Signal(14)
        fr.mul_a, fr.mul_b, fr.acc = Signal(24), Signal(14), Signal(24)
        fr.sof_n = Signal(8)             # the component count the SOF's length allows
        fr.sof_n_ok = Signal()           # (if there is one: the length is 6 + 3n)
        fr.sof_pre = Signal(8)           # precision, height and width's verdict (byte 4)
        return fr

    @staticmethod
    def _sof_count(m, seg, fr):
        """The component count a SOF segment's length allows, ``(blen - 6) / 3``, worked out
        in three free-running register stages while the body's first five bytes go by (the
        length is fixed from the clock after LEN_LO, the count is read at body byte 5, six
        clocks on at the earliest).  Checking ``blen == 6 + 3 * count`` at byte 5 itself put
        an adder and a 16-bit comparison behind the input byte, ahead of the verdict's
        priority chain: the two-file core's critical path in two of three placements.  Now
        byte 5 is compared with ``sof_n``, eight bits."""
        x, fits = Signal(10), Signal()          # blen - 6, if 0 <= blen - 6 <= 3 * 255
        m.d.sync += [x.eq(seg.blen - 6), fits.eq((seg.blen >= 6) & (seg.blen <= 6 + 3 * 255))]
        # x / 3 as x * 171 / 512, exact where x is a multiple of 3 below 768 (the error,
        # x / 1536, stays under 1/2), in shifts and adds rather than a multiplier.
        # (``x`` is fixed a clock after ``blen``, so ``q`` meets the ``x`` it came from.)
        q = Signal(9)
        m.d.sync += q.eq((x + (x << 1) + (x << 3) + (x << 5) + (x << 7)) >> 9)
        m.d.sync += [fr.sof_n.eq(q), fr.sof_n_ok.eq(fits & (q + (q << 1) == x))]

    @staticmethod
    def _marker_kind(m, marker):
        """Decode the segment's marker once: every state asks which kind of segment it is."""
        kind = SimpleNamespace()
        kind.dqt = marker == Marker.DQT
        kind.dht = marker == Marker.DHT
        kind.sof = (marker[4:8] == Marker.SOF0 >> 4) & ~kind.dht & (marker != Marker.DAC)
        kind.sos = marker == Marker.SOS
        kind.dri = marker == Marker.DRI
        kind.sof_kind = sof_kind = Signal(8)
        with m.Switch(marker):
            for sof, status in _SOF_KIND.items():
                with m.Case(sof):
                    m.d.comb += sof_kind.eq(status)
        return kind

    def _hold_outputs(self, m, trailer, kind):
        """Output beats stay valid until taken; a table body waits for its loader to take each
        byte before the next is read."""
        for out in (self.dqt, self.dht, self.scan, self.frame):
            with m.If(out.ready):
                m.d.sync += out.valid.eq(0)
        fwd = SimpleNamespace()
        fwd.q = ~trailer & kind.dqt
        fwd.h = ~trailer & kind.dht
        fwd.stall = ((fwd.q & self.dqt.valid & ~self.dqt.ready)
                     | (fwd.h & self.dht.valid & ~self.dht.ready))
        return fwd

    # ---- FSM states -------------------------------------------------------------------------

    def _elaborate_marker_states(self, m, steps, take, f):
        """SOI, then one marker after another (FF fill allowed): the file's segment framing."""
        byte, last = self.i.payload.byte, self.i.payload.last
        with m.State("SOI0"):
            m.d.comb += self.i.ready.eq(1)
            with m.If(take):
                with m.If((byte == 0xFF) & ~last):
                    m.next = "SOI1"
                with m.Else():
                    steps.finish(S.NO_SOI)

        with m.State("SOI1"):
            m.d.comb += self.i.ready.eq(1)
            with m.If(take):
                with m.If(byte == Marker.SOI):
                    steps.goto("MARK", last)
                with m.Else():
                    steps.finish(S.NO_SOI)

        with m.State("MARK"):
            m.d.comb += self.i.ready.eq(1)
            with m.If(take):
                with m.If(byte != 0xFF):
                    steps.finish(S.UNEXPECTED_MARKER)
                with m.Else():
                    steps.goto("FILL", last)

        with m.State("FILL"):                          # FF seen; more FF are fill
            m.d.comb += self.i.ready.eq(1)
            with m.If(take):
                with m.If(byte == 0xFF):
                    with m.If(last):
                        steps.finish(S.TRUNCATED)
                with m.Elif(f.trailer):
                    steps.trailer_marker(byte, last)
                with m.Else():
                    steps.header_marker(byte, last)

    def _elaborate_length_states(self, m, steps, take, f, seg, kind):
        """The segment length, and the faults the model finds from the marker and length
        alone (before it looks inside the body)."""
        byte, last = self.i.payload.byte, self.i.payload.last
        marker, flag = seg.marker, steps.flag
        with m.State("LEN_HI"):
            m.d.comb += self.i.ready.eq(1)
            with m.If(take):
                m.d.sync += seg.len_hi.eq(byte)
                steps.goto("LEN_LO", last)

        with m.State("LEN_LO"):
            m.d.comb += self.i.ready.eq(1)
            length = Cat(byte, seg.len_hi)
            with m.If(take):
                m.d.sync += [seg.blen.eq(length - 2), seg.remaining.eq(length - 2),
                             seg.bpos.eq(0), seg.tstate.eq(_T_HDR), seg.app_match.eq(1),
                             seg.perr.eq(0), seg.seg_last.eq(last), seg.dht_bad.eq(0),
                             # SOS byte 0 is checked against these (see _parse_sos)
                             seg.sos_n.eq((length - 6)[1:9]),
                             seg.sos_n_ok.eq((length >= 6) & ~(length - 6)[0]
                                             & ((length - 6)[9:] == 0))]
                # Faults the model finds from the marker and length alone.
                with m.If(~f.trailer):
                    with m.If(kind.dqt | kind.dht):
                        with m.If(length == 2):
                            flag(S.BAD_TABLE)
                    with m.Elif(marker == Marker.DAC):
                        flag(S.UNSUPPORTED_ARITHMETIC)
                    with m.Elif((marker == Marker.DHP) | (marker == Marker.EXP)):
                        flag(S.UNSUPPORTED_HIERARCHICAL)
                    with m.Elif(kind.dri):
                        with m.If(length != 4):
                            flag(S.BAD_MARKER_LENGTH)
                    with m.Elif(marker == Marker.DNL):
                        flag(S.UNSUPPORTED_DNL)
                    with m.Elif(kind.sof):
                        with m.If(f.frame_seen):
                            flag(S.UNEXPECTED_MARKER)
                        with m.Elif(kind.sof_kind != 0):
                            flag(kind.sof_kind)
                        with m.Elif(length < 8):
                            flag(S.BAD_FRAME_HEADER)
                    with m.Elif(kind.sos):
                        with m.If(~f.frame_seen):
                            flag(S.UNEXPECTED_MARKER)
                        with m.Elif(length == 2):
                            flag(S.BAD_SCAN_HEADER)
                with m.If(length < 2):
                    steps.finish(S.BAD_MARKER_LENGTH)
                with m.Elif(length == 2):
                    m.next = "SEG_END"
                with m.Else():
                    steps.goto("BODY", last, S.TRUNCATED)

    def _elaborate_body_state(self, m, steps, take, f, seg, fr, kind, fwd):
        """One body byte a clock: forwarded to the table loaders and checked as the model
        checks it, the fault held in ``perr`` until the segment's end."""
        byte, last = self.i.payload.byte, self.i.payload.last
        with m.State("BODY"):
            m.d.comb += self.i.ready.eq(~fwd.stall)
            final = seg.remaining == 1
            # A DHT count byte's fault lands a clock late (see _parse_dht), here, ahead of
            # this clock's parse (a new count's verdict wins).  Every fault a DHT segment can
            # have is BAD_TABLE, so the byte parsed meanwhile changes nothing the file's
            # verdict shows; SEG_END reads the pending fault as well.
            with m.If(seg.dht_bad):
                m.d.sync += seg.dht_bad.eq(0)
                with m.If(seg.perr == 0):
                    steps.flag(S.BAD_TABLE)
            with m.If(take):
                m.d.sync += [seg.remaining.eq(seg.remaining - 1), seg.seg_last.eq(last)]
                with m.If(seg.bpos != 31):
                    m.d.sync += seg.bpos.eq(seg.bpos + 1)
                for out, on in ((self.dqt, fwd.q), (self.dht, fwd.h)):
                    with m.If(on):
                        m.d.sync += [out.valid.eq(1), out.payload.byte.eq(byte),
                                     out.payload.last.eq(final | last)]
                with m.If(~f.trailer & (seg.perr == 0)):
                    self._parse_body(m, steps.flag, f, seg, fr, kind)
                with m.If(final):
                    m.next = "SEG_END"
                with m.Elif(last):
                    steps.finish(S.TRUNCATED)

    def _refusals(self, m, f, fr):
        """Why a frame header (``sof``) or a scan header (``sos``) is refused at its segment's
        end (a status, 0 for none), registered every clock.  What they are computed from (the
        frame's and the scan's fields, the tables defined, the APP tags) was all written at
        least two clocks before that end: the last bytes of SOF and SOS are a component's
        quantisation table id and Ah/Al, which these do not read.  So the registers hold the
        complete segment's verdicts there, and their logic (a priority chain over the
        components' table lookups) ends at registers of its own rather than at the status
        and the state (in the two-file core that was the critical path, 13 LUTs deep)."""
        hf, vf = fr.hf, fr.vf
        ncomp, ident, tq, td, ta = fr.ncomp, fr.ident, fr.tq, fr.td, fr.ta
        luma_ok = (hf[0] <= 2) & (vf[0] <= 2)          # 1 and 4 checked already
        chroma_ok = (hf[1] == 1) & (vf[1] == 1) & (hf[2] == 1) & (vf[2] == 1)
        missing = Signal(8)
        for c in reversed(range(MAX_COMPONENTS)):   # the first component with a gap wins
            no_q = ~f.quant_def.bit_select(tq[c], 1)
            no_h = ~f.dc_def.bit_select(td[c], 1) | ~f.ac_def.bit_select(ta[c], 1)
            with m.If((c < ncomp) & (no_q | no_h)):
                m.d.comb += missing.eq(Mux(no_q, S.MISSING_QUANT_TABLE,
                                           S.MISSING_HUFFMAN_TABLE))
        big_dc = Cat((c < ncomp) & f.dc_big.bit_select(td[c], 1)
                     for c in range(MAX_COMPONENTS)).any()
        rgb_ids = Cat(ident[0], ident[1], ident[2]) == int.from_bytes(b"RGB", "little")
        rgb = Mux(f.adobe, f.adobe_t == 0, rgb_ids)               # jdapimin.c's guess
        refused = SimpleNamespace(sof=Signal(8, name="sof_refused"),
                                  sos=Signal(8, name="sos_refused"))
        m.d.sync += [
            refused.sof.eq(Mux((ncomp == 3) & ~(luma_ok & chroma_ok), S.UNSUPPORTED_SAMPLING,
                               Mux(self._too_large(fr.width, fr.height), S.TOO_LARGE, 0))),
            refused.sos.eq(Mux(missing != 0, missing,
                               Mux(big_dc, S.BAD_TABLE,
                                   Mux((ncomp == 3) & ~f.jfif & rgb,
                                       S.UNSUPPORTED_COLORSPACE, 0)))),
        ]
        return refused

    def _elaborate_segment_end(self, m, steps, f, seg, fr, kind, refused):
        """A segment's verdict once all of it was read: its pending fault, or what it sets up
        (the frame's MCU grid, JFIF/Adobe, an accepted scan)."""
        hf, vf = fr.hf, fr.vf
        with m.State("SEG_END"):
            with m.If(f.trailer):
                steps.goto("MARK", seg.seg_last)
            with m.Elif(seg.perr != 0):
                steps.finish(seg.perr)
            with m.Elif(seg.dht_bad):
                steps.finish(S.BAD_TABLE)
            with m.Elif(kind.sof):
                with m.If(refused.sof != 0):
                    steps.finish(refused.sof)
                with m.Else():
                    wide = (fr.ncomp == 3) & (hf[0] == 2)
                    tall = (fr.ncomp == 3) & (vf[0] == 2)
                    m.d.sync += [
                        f.frame_seen.eq(1), fr.h2.eq(wide), fr.v2.eq(tall),
                        fr.mcux.eq(Mux(wide, (fr.width + 15) >> 4, (fr.width + 7) >> 3)),
                        fr.mcuy.eq(Mux(tall, (fr.height + 15) >> 4, (fr.height + 7) >> 3)),
                    ]
                    steps.goto("MARK", seg.seg_last)
            with m.Elif(kind.sos):
                self._accept_scan(m, steps, f, seg, fr, refused.sos)
            with m.Else():
                with m.If((seg.marker == Marker.APP0) & (seg.blen >= 14) & seg.app_match):
                    m.d.sync += f.jfif.eq(1)
                with m.If((seg.marker == Marker.APP14) & (seg.blen >= 12) & seg.app_match):
                    m.d.sync += [f.adobe.eq(1), f.adobe_t.eq(seg.app_t)]
                steps.goto("MARK", seg.seg_last)

    def _elaborate_scan_states(self, m, steps, f, fr):
        """The scan: its MCU count, its beat to the decoder, then its bytes straight through
        to ``entropy`` until the decoder's verdict."""
        last = self.i.payload.last
        with m.State("MUL"):                             # mcus = mcux * mcuy
            with m.If(fr.mul_b == 0):
                m.d.sync += [self.scan.valid.eq(1), self.scan.payload.mcus.eq(fr.acc),
                             self.frame.valid.eq(1)]
                m.next = "EMIT"
            with m.Else():
                m.d.sync += [fr.acc.eq(fr.acc + Mux(fr.mul_b[0], fr.mul_a, 0)),
                             fr.mul_a.eq(fr.mul_a << 1), fr.mul_b.eq(fr.mul_b >> 1)]

        with m.State("EMIT"):                            # the decoder takes the scan beat
            with m.If(self.scan.ready):
                m.next = "SCAN"

        with m.State("SCAN"):
            # Straight through, one byte per clock; `valid` never waits for `ready`.  The
            # payload is the input's but for the made-up FF/last of an empty scan.
            synth, pkt_over = f.synth, f.pkt_over
            m.d.comb += [
                self.entropy.valid.eq(Mux(synth, 1, self.i.valid & ~pkt_over)),
                self.entropy.payload.byte.eq(self.i.payload.byte | Mux(synth, 0xFF, 0)),
                self.entropy.payload.last.eq(last | synth),
                self.i.ready.eq(self.entropy.ready & ~synth & ~pkt_over),
                self.done.ready.eq(1),
            ]
            with m.If(synth & self.entropy.ready):
                m.d.sync += synth.eq(0)
            with m.If(self.done.valid):
                with m.If(self.done.payload.status != S.OK):
                    steps.finish(self.done.payload.status)
                with m.Else():
                    # The unstuffer has read the FF(s) and the marker code itself, a clock
                    # or more ago (its END token had to reach the decoder's verdict), and
                    # has taken nothing since: ``pkt_over`` already says whether that code
                    # was the packet's last byte.  (Through ``take`` the unstuffer's
                    # ``ready`` reached the status: the two-file core's critical path in
                    # one placement.)
                    steps.trailer_marker(self.done.payload.marker, pkt_over)

    def _elaborate_file_end(self, m, take, f):
        """Drop the rest of the packet, then hand out the result once every other output was
        taken, so that the next file starts clean."""
        with m.State("DRAIN"):
            m.d.comb += self.i.ready.eq(~f.pkt_over)
            with m.If(f.pkt_over | (take & self.i.payload.last)):
                m.next = "RESULT"

        with m.State("RESULT"):
            idle = ~(self.dqt.valid | self.dht.valid | self.scan.valid | self.frame.valid)
            with m.If(self.result.valid & self.result.ready):
                m.d.sync += self.result.valid.eq(0)
                m.next = "CLEAR"
            with m.Elif(idle):
                m.d.sync += [self.result.valid.eq(1), self.result.payload.status.eq(f.status),
                             self.result_failed.eq(f.status != S.OK)]

        # The file's state is cleared a clock after its result is taken, not in that clock:
        # the result's ``ready`` (the core's test of its status) then reaches the state
        # register only, not the 55 registers of ``f.all`` (the two-file core's critical
        # path in one of three placements).  The next file waits that clock.
        with m.State("CLEAR"):
            m.d.sync += [s.eq(s.init) for s in f.all]
            m.next = "SOI0"

    # ---- Segment bodies ---------------------------------------------------------------------

    def _parse_body(self, m, flag, f, seg, fr, kind):
        """The checks of one header body byte, in the model's order (no fault yet)."""
        with m.If(kind.dqt):
            self._parse_dqt(m, flag, f, seg)
        with m.Elif(kind.dht):
            self._parse_dht(m, flag, f, seg)
        with m.Elif(kind.sof):
            self._parse_sof(m, flag, seg, fr)
        with m.Elif(kind.sos):
            self._parse_sos(m, flag, seg, fr)
        with m.Elif(kind.dri):
            byte = self.i.payload.byte
            with m.If(seg.bpos == 0):
                m.d.sync += f.restart[8:16].eq(byte)
            with m.Else():
                m.d.sync += f.restart[0:8].eq(byte)
        with m.Elif((seg.marker == Marker.APP0) | (seg.marker == Marker.APP14)):
            self._parse_app(m, seg)

    @staticmethod
    def _table_data(m, seg):
        """A table's data bytes are only counted: the loaders check and store them."""
        m.d.sync += seg.tleft.eq(seg.tleft - 1)
        with m.If(seg.tleft == 1):
            m.d.sync += seg.tstate.eq(_T_HDR)

    def _parse_dqt(self, m, flag, f, seg):
        """_parse_dqt's checks: which tables the file defines, and none running past the
        segment."""
        byte = self.i.payload.byte
        with m.Switch(seg.tstate):
            with m.Case(_T_HDR):
                pq, tid = byte[4:8], byte[0:4]
                size = Mux(pq[0], 128, 64)
                with m.If((pq > 1) | (tid > 3)):
                    flag(S.BAD_TABLE)
                with m.Elif(seg.remaining <= size):             # runs past the segment
                    flag(S.BAD_TABLE)
                with m.Else():
                    m.d.sync += [f.quant_def.eq(f.quant_def | (Const(1, 4) << tid[:2])),
                                 seg.tleft.eq(size), seg.tstate.eq(_T_DATA)]
            with m.Case(_T_DATA):
                self._table_data(m, seg)

    def _parse_dht(self, m, flag, f, seg):
        """_parse_dht's checks: the counts must make a valid canonical code that fits the
        segment, and libjpeg refuses DC symbols above 15.  The running sums are kept as the
        room each check has left, so the count byte is compared with a register: summing it
        first and comparing the sum (with a shift by the count's index) put ten levels of
        logic behind the input byte, the two-file core's critical path in two placements."""
        byte = self.i.payload.byte
        tcnt, total = seg.tcnt, seg.total
        with m.Switch(seg.tstate):
            with m.Case(_T_HDR):
                tc, th = byte[4:8], byte[0:4]
                with m.If((seg.remaining < 17) | (tc > 1) | (th > 3)):
                    flag(S.BAD_TABLE)
                with m.Else():
                    bit = Const(1, 4) << th[:2]
                    with m.If(tc[0]):
                        m.d.sync += f.ac_def.eq(f.ac_def | bit)
                    with m.Else():                  # a new table replaces the old
                        m.d.sync += [f.dc_def.eq(f.dc_def | bit), f.dc_big.eq(f.dc_big & ~bit)]
                    m.d.sync += [tcnt.eq(0), total.eq(0), seg.tstate.eq(_T_CNT),
                                 seg.code_room.eq(2), seg.sym_room.eq(256),
                                 seg.seg_room.eq(seg.remaining - 1), seg.total_zero.eq(1),
                                 seg.cur_dc.eq(~tc[0]), seg.cur_th.eq(th[:2])]
            with m.Case(_T_CNT):
                total_new = total + byte
                # tleft is read only in _T_DATA, so it takes the sum at every count byte:
                # under the checks below, the byte's comparators reached its 9 bits too.
                m.d.sync += [total.eq(total_new), tcnt.eq(tcnt + 1), seg.tleft.eq(total_new),
                             seg.code_room.eq((seg.code_room - byte) << 1),
                             seg.sym_room.eq(seg.sym_room - byte),
                             seg.seg_room.eq(seg.seg_room - 1 - byte),
                             seg.total_zero.eq(seg.total_zero & (byte == 0))]
                # The codes must fit their lengths and none may be all ones
                # (code + byte >= 2 << tcnt, with code_room = (2 << tcnt) - code); after the
                # last count, total + byte > 256, or total + byte >= the bytes left.  The
                # verdict is a register (``dht_bad``), taken into ``perr`` next clock: from
                # the input byte through these comparators and the priority of every other
                # check to ``perr`` was the two-file core's critical path.
                m.d.sync += seg.dht_bad.eq(
                    (byte >= seg.code_room)
                    | ((tcnt == 15) & ((byte > seg.sym_room) | (byte >= seg.seg_room))))
                with m.If(tcnt == 15):
                    with m.If(seg.total_zero & (byte == 0)):
                        m.d.sync += seg.tstate.eq(_T_HDR)
                    with m.Else():
                        m.d.sync += seg.tstate.eq(_T_DATA)
            with m.Case(_T_DATA):
                self._table_data(m, seg)
                with m.If(seg.cur_dc & (byte > 15)):
                    m.d.sync += f.dc_big.eq(f.dc_big | (Const(1, 4) << seg.cur_th))

    def _parse_sof(self, m, flag, seg, fr):
        """_parse_sof's checks, and the frame fields the scan needs later."""
        byte = self.i.payload.byte
        with m.Switch(seg.bpos):
            with m.Case(0):
                m.d.sync += fr.prec8.eq(byte == 8)
            with m.Case(1):
                m.d.sync += fr.height[8:16].eq(byte)
            with m.Case(2):
                m.d.sync += fr.height[0:8].eq(byte)
            with m.Case(3):
                m.d.sync += fr.width[8:16].eq(byte)
            with m.Case(4):
                m.d.sync += [
                    fr.width[0:8].eq(byte),
                    # The verdicts that do not need byte 5, a clock early (see _sof_count).
                    fr.sof_pre.eq(Mux(~fr.prec8, S.UNSUPPORTED_PRECISION,
                                      Mux(fr.height == 0, S.UNSUPPORTED_DNL,
                                          Mux((fr.width[8:16] == 0) & (byte == 0),
                                              S.BAD_FRAME_HEADER, 0)))),
                ]
            with m.Case(5):                 # the counts and sizes, in the model's order
                m.d.sync += fr.ncomp.eq(byte)
                with m.If(~fr.sof_n_ok | (byte != fr.sof_n)):     # blen != 6 + 3 * byte
                    flag(S.BAD_FRAME_HEADER)
                with m.Elif(fr.sof_pre != 0):
                    flag(fr.sof_pre)
                with m.Elif((byte != 1) & (byte != 3)):
                    flag(S.UNSUPPORTED_COMPONENTS)
            for c in range(MAX_COMPONENTS):
                with m.Case(6 + 3 * c):
                    m.d.sync += fr.ident[c].eq(byte)
                    for j in range(c):
                        with m.If(fr.ident[j] == byte):
                            flag(S.BAD_FRAME_HEADER)        # an id twice
                with m.Case(7 + 3 * c):
                    h, v = byte[4:8], byte[0:4]
                    m.d.sync += [fr.hf[c].eq(h), fr.vf[c].eq(v)]
                    with m.If((h < 1) | (h > 4) | (v < 1) | (v > 4)):
                        flag(S.BAD_FRAME_HEADER)
                with m.Case(8 + 3 * c):
                    m.d.sync += fr.tq[c].eq(byte)
                    with m.If(byte > 3):
                        flag(S.BAD_FRAME_HEADER)

    def _parse_sos(self, m, flag, seg, fr):
        """_parse_sos's checks: one scan holding every component of the frame, sequential
        DCT, and which Huffman tables each component uses."""
        byte, bpos = self.i.payload.byte, seg.bpos
        with m.If(bpos == 0):
            with m.If(~seg.sos_n_ok | (byte != seg.sos_n)):     # blen != 4 + 2 * byte
                flag(S.BAD_SCAN_HEADER)
            with m.Elif(byte != fr.ncomp):
                flag(S.UNSUPPORTED_MULTISCAN)
        for n in (1, 3):                    # past byte 0 the count is the frame's
            with m.Elif(fr.ncomp == n):
                with m.Switch(bpos):
                    for c in range(n):
                        with m.Case(1 + 2 * c):
                            with m.If(byte != fr.ident[c]):
                                flag(S.BAD_SCAN_HEADER)
                        with m.Case(2 + 2 * c):
                            m.d.sync += [fr.td[c].eq(byte[4:8]), fr.ta[c].eq(byte[0:4])]
                            with m.If((byte[4:8] > 3) | (byte[0:4] > 3)):
                                flag(S.BAD_SCAN_HEADER)
                    for k, want in enumerate((0, 63, 0)):   # Ss, Se, Ah/Al
                        with m.Case(1 + 2 * n + k):
                            with m.If(byte != want):
                                flag(S.BAD_SCAN_HEADER)

    def _parse_app(self, m, seg):
        """JFIF / Adobe: their tags and Adobe's transform decide the colour space."""
        byte, bpos, marker = self.i.payload.byte, seg.bpos, seg.marker
        for k in range(5):
            with m.If(bpos == k):
                want = Mux(marker == Marker.APP0, b"JFIF\0"[k], b"Adobe"[k])
                with m.If(byte != want):
                    m.d.sync += seg.app_match.eq(0)
        with m.If(bpos == 11):
            m.d.sync += seg.app_t.eq(byte)

    def _accept_scan(self, m, steps, f, seg, fr, refused):
        """SOS complete and well formed: refused for its tables or colours (``refused``, see
        _refusals), or the scan."""
        ncomp, tq, td, ta = fr.ncomp, fr.tq, fr.td, fr.ta
        with m.If(refused != 0):
            steps.finish(refused)
        with m.Else():
            color = ncomp == 3
            scan, frame = self.scan.payload, self.frame.payload
            hl, vl = Mux(fr.h2, 2, 1), Mux(fr.v2, 2, 1)
            m.d.sync += [
                scan.components.eq(ncomp), scan.restart_interval.eq(f.restart),
                scan.h[0].eq(hl), scan.v[0].eq(vl),
                frame.width.eq(fr.width), frame.height.eq(fr.height),
                frame.components.eq(ncomp), frame.h.eq(hl), frame.v.eq(vl),
                frame.mcux.eq(fr.mcux), frame.mcuy.eq(fr.mcuy),
                fr.mul_a.eq(fr.mcux), fr.mul_b.eq(fr.mcuy), fr.acc.eq(0),
                f.synth.eq(seg.seg_last),
            ]
            for c in range(MAX_COMPONENTS):
                present = 1 if c == 0 else color
                m.d.sync += [self.quant_select[c].eq(Mux(present, tq[c], 0)),
                             scan.td[c].eq(Mux(present, td[c], 0)),
                             scan.ta[c].eq(Mux(present, ta[c], 0))]
                if c:
                    m.d.sync += [scan.h[c].eq(color), scan.v[c].eq(color)]
            m.next = "MUL"
