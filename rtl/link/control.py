"""The link's control plane: link bytes in, response frames out, for the opcodes every device
answers itself — ``PING`` (echo), ``READ_REGS``, ``WRITE_REG`` — and an ``ERROR`` frame for
everything it must refuse: a payload whose CRC failed (status ``BAD_CRC``: nothing was done,
the host resends), an unknown opcode (``BAD_OPCODE``), a payload of the wrong size
(``BAD_REQUEST``).  An ``ERROR`` frame carries the request's tag, and one payload byte: the
request's opcode.

Frames whose opcode is in ``data_opcodes`` are not answered here: their beats leave on
``data`` (checked frames only) for the data path (decoder cores, convolution engine), which
answers through ``reply``; what the data path refuses after the checks here (a file's
frame out of sequence, ``Status.GAP``) comes back on ``refuse`` and is answered here too.  Every stream is ``link_bytes`` (W) bytes a beat; a reply's
payload is ``ceil(length / W)`` beats.  ``regs`` are the register values (``Register`` numbers index
them; unlisted registers read 0); ``reset`` pulses when 1 is written to ``Register.RESET``,
and every ``WRITE_REG`` shows on ``written``/``write_reg``/``write_value`` for a clock.
``data_start`` pulses when the header of a data frame arrives, ``data_sent`` when the last
beat of a data-path reply leaves: the device's own view of when work came and went (the
accelerator top's ``SPAN_START``/``SPAN_END`` registers).
"""

from amaranth import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .frame_rx import ErrorEvent, FrameHeader, FrameReceiver, rx_beat_layout
from .frame_tx import FrameSender
from .protocol import MAX_PAYLOAD, Opcode, Register, Status, payload_beats

__all__ = ["LinkControl", "REGISTERS", "MAX_READ"]

REGISTERS = 64          # register numbers 0..63
MAX_READ = 64           # registers per READ_REGS


class LinkControl(wiring.Component):
    """Answers what every device must answer whatever it carries (ping, registers, refusals), so
    that the host always gets a reply and the data path sees only checked frames meant for it."""

    def __init__(self, data_opcodes=(), max_payload=MAX_PAYLOAD, link_bytes=1):
        self.data_opcodes = tuple(int(op) for op in data_opcodes)
        self.max_payload, self.link_bytes = max_payload, link_bytes
        w = link_bytes
        super().__init__({
            "i": In(stream.Signature(8 * w)),
            "o": Out(stream.Signature(8 * w)),
            "data": Out(stream.Signature(rx_beat_layout(w))),
            "reply_header": In(stream.Signature(FrameHeader)),
            "reply": In(stream.Signature(8 * w)),
            "refuse": In(stream.Signature(ErrorEvent)),
            "regs": In(data.ArrayLayout(32, REGISTERS)),
            "reset": Out(1),
            "written": Out(1),
            "write_reg": Out(6),
            "write_value": Out(32),
            "data_start": Out(1),
            "data_sent": Out(1),
            "header_errors": Out(32),
            "crc_errors": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        w = self.link_bytes
        shift = (w - 1).bit_length()
        m.submodules.rx = rx = FrameReceiver(self.max_payload, w)
        m.submodules.tx = tx = FrameSender(w)
        wiring.connect(m, tx.o, wiring.flipped(self.o))
        m.d.comb += [rx.i.valid.eq(self.i.valid), rx.i.payload.eq(self.i.payload),
                     self.i.ready.eq(rx.i.ready),
                     self.header_errors.eq(rx.header_errors), self.crc_errors.eq(rx.crc_errors)]

        beat = rx.o.payload
        h = beat.header
        is_data = Signal()
        starts_data = Signal()
        for op in self.data_opcodes:
            with m.If(h.opcode == op):
                m.d.comb += is_data.eq(1)
            with m.If(rx.start_opcode == op):
                m.d.comb += starts_data.eq(1)
        m.d.comb += self.data_start.eq(rx.start & starts_data)

        request = Signal(FrameHeader)       # the frame being answered
        arg_beats = payload_beats(6, w)
        args = Signal(8 * w * arg_beats)    # READ_REGS / WRITE_REG payload bytes (the first 6)
        count = Signal(range(max(self.max_payload, 8) + 1))
        reg_index = Signal(6)
        reg_left = Signal(range(MAX_READ + 1))
        # READ_REGS answers: a register a clock into beats (W >= 4: W/4 registers a beat;
        # W = 1: a register is 4 beats)
        per_beat = max(w // 4, 1)
        beat_regs = Signal(32 * per_beat)
        slot = Signal(range(max(per_beat, 4)))
        error_status = Signal(8)
        error_opcode = Signal(8)
        reg_value = Signal(32)
        m.d.comb += reg_value.eq(self.regs[reg_index])

        # The sender is shared, a frame at a time, between the answers of this control plane
        # and the data path's replies.  The two sides are independent: a data frame waiting
        # for room in a core must not keep that core's replies (which free the room) from
        # going out.
        req_header = stream.Signature(FrameHeader).create(path=("req_header",))
        req_payload = stream.Signature(8 * w).create(path=("req_payload",))
        owner_left = Signal(32)             # payload beats of the frame still to pass
        data_reply = Signal()               # the sender's frame is the data path's
        m.d.comb += self.data_sent.eq(tx.done & data_reply)
        with m.FSM(name="sender"):
            with m.State("FREE"):
                with m.If(self.reply_header.valid):
                    wiring.connect(m, wiring.flipped(self.reply_header), tx.header)
                    with m.If(tx.header.ready):
                        m.d.sync += data_reply.eq(1)
                        m.d.sync += owner_left.eq(
                            (self.reply_header.payload.length + w - 1) >> shift)
                        with m.If(self.reply_header.payload.length != 0):
                            m.next = "REPLY"
                with m.Elif(req_header.valid):
                    wiring.connect(m, req_header, tx.header)
                    with m.If(tx.header.ready):
                        m.d.sync += data_reply.eq(0)
                        m.d.sync += owner_left.eq((req_header.payload.length + w - 1) >> shift)
                        with m.If(req_header.payload.length != 0):
                            m.next = "ANSWER"
            with m.State("REPLY"):
                wiring.connect(m, wiring.flipped(self.reply), tx.payload)
                with m.If(self.reply.valid & tx.payload.ready):
                    m.d.sync += owner_left.eq(owner_left - 1)
                    with m.If(owner_left == 1):     # (a constant compare: a short path)
                        m.next = "FREE"
            with m.State("ANSWER"):
                wiring.connect(m, req_payload, tx.payload)
                with m.If(req_payload.valid & tx.payload.ready):
                    m.d.sync += owner_left.eq(owner_left - 1)
                    with m.If(owner_left == 1):     # (a constant compare: a short path)
                        m.next = "FREE"

        def send_header(opcode, status, length):
            m.d.comb += [req_header.valid.eq(1), req_header.payload.opcode.eq(opcode),
                         req_header.payload.status.eq(status),
                         req_header.payload.tag.eq(request.tag),
                         req_header.payload.length.eq(length), req_header.payload.seq.eq(0)]

        with m.FSM(name="control"):
            with m.State("IDLE"):
                with m.If(rx.err.valid):
                    m.d.comb += rx.err.ready.eq(1)
                    m.d.sync += [request.tag.eq(rx.err.payload.tag),
                                 error_status.eq(rx.err.payload.status),
                                 error_opcode.eq(rx.err.payload.opcode)]
                    m.next = "ERROR_HEADER"
                with m.Elif(self.refuse.valid):
                    m.d.comb += self.refuse.ready.eq(1)
                    m.d.sync += [request.tag.eq(self.refuse.payload.tag),
                                 error_status.eq(self.refuse.payload.status),
                                 error_opcode.eq(self.refuse.payload.opcode)]
                    m.next = "ERROR_HEADER"
                with m.Elif(rx.o.valid):
                    m.d.sync += [request.eq(h), count.eq(0), args.eq(0)]
                    with m.If(is_data):
                        m.next = "DATA"
                    with m.Elif(h.opcode == Opcode.PING):
                        m.next = "PING_HEADER"
                    with m.Elif((h.opcode == Opcode.READ_REGS) | (h.opcode == Opcode.WRITE_REG)):
                        m.next = "ARGS"
                    with m.Else():
                        m.d.sync += [error_status.eq(Status.BAD_OPCODE), error_opcode.eq(h.opcode)]
                        m.next = "DRAIN"
            # A data frame goes on whole to the data path.
            with m.State("DATA"):
                wiring.connect(m, rx.o, wiring.flipped(self.data))
                with m.If(rx.o.valid & self.data.ready & beat.last):
                    m.next = "IDLE"
            # PING: the payload streams back as it arrives.
            with m.State("PING_HEADER"):
                send_header(Opcode.PING, Status.OK, request.length)
                with m.If(req_header.ready):
                    with m.If(request.length == 0):
                        m.d.comb += rx.o.ready.eq(1)            # the single empty beat
                        m.next = "IDLE"
                    with m.Else():
                        m.next = "PING"
            with m.State("PING"):
                m.d.comb += [req_payload.valid.eq(rx.o.valid), req_payload.payload.eq(beat.data),
                             rx.o.ready.eq(req_payload.ready)]
                with m.If(rx.o.valid & req_payload.ready & beat.last):
                    m.next = "IDLE"
            # READ_REGS (4 bytes: first, count) and WRITE_REG (6 bytes: register, value).
            with m.State("ARGS"):
                m.d.comb += rx.o.ready.eq(1)
                with m.If(rx.o.valid):
                    with m.If((request.length != 0) & (count < arg_beats)):
                        m.d.sync += [args.word_select(count[:max(arg_beats - 1, 1).bit_length()],
                                                      8 * w).eq(beat.data),
                                     count.eq(count + 1)]
                    with m.If(beat.last):
                        m.next = "EXECUTE"
            with m.State("EXECUTE"):
                # args holds the first six payload bytes, the first of them lowest.
                read_ok = (request.opcode == Opcode.READ_REGS) & (request.length == 4)
                write_ok = (request.opcode == Opcode.WRITE_REG) & (request.length == 6)
                first = args[:16]
                n = args[16:32]
                with m.If(read_ok & (n <= MAX_READ) & (first + n <= REGISTERS)):
                    m.d.sync += [reg_index.eq(first), reg_left.eq(n), slot.eq(0)]
                    m.next = "READ_HEADER"
                with m.Elif(write_ok):
                    register = args[:16]
                    value = args[16:48]
                    m.d.comb += [self.written.eq(register < REGISTERS),
                                 self.write_reg.eq(register), self.write_value.eq(value)]
                    with m.If((register == Register.RESET) & (value[0] == 1)):
                        m.d.comb += self.reset.eq(1)
                    m.next = "WRITE_HEADER"
                with m.Else():
                    m.d.sync += [error_status.eq(Status.BAD_REQUEST),
                                 error_opcode.eq(request.opcode)]
                    m.next = "ERROR_HEADER"
            with m.State("READ_HEADER"):
                send_header(Opcode.READ_REGS, Status.OK, reg_left << 2)
                with m.If(req_header.ready):
                    with m.If(reg_left == 0):
                        m.next = "IDLE"
                    with m.Else():
                        m.next = "READ"
            with m.State("READ"):
                if w == 1:
                    m.d.comb += [req_payload.valid.eq(1),
                                 req_payload.payload.eq(reg_value.word_select(slot[:2], 8))]
                    with m.If(req_payload.ready):
                        m.d.sync += slot.eq(slot + 1)
                        with m.If(slot == 3):
                            m.d.sync += [reg_index.eq(reg_index + 1),
                                         reg_left.eq(reg_left - 1)]
                            with m.If(reg_left == 1):
                                m.next = "IDLE"
                else:
                    # gather W/4 registers (or the last ones), then send the beat
                    gathered = Signal(32 * per_beat)
                    m.d.comb += gathered.eq(beat_regs)
                    m.d.comb += gathered.word_select(slot, 32).eq(reg_value)
                    done = (reg_left == 1) | (slot == per_beat - 1)
                    m.d.comb += [req_payload.valid.eq(done), req_payload.payload.eq(gathered)]
                    with m.If(~done | req_payload.ready):
                        m.d.sync += [beat_regs.eq(gathered), slot.eq(slot + 1),
                                     reg_index.eq(reg_index + 1), reg_left.eq(reg_left - 1)]
                        with m.If(done):
                            m.d.sync += [beat_regs.eq(0), slot.eq(0)]
                        with m.If(reg_left == 1):
                            m.next = "IDLE"
            with m.State("WRITE_HEADER"):
                send_header(Opcode.WRITE_REG, Status.OK, 0)
                with m.If(req_header.ready):
                    m.next = "IDLE"
            # Refusals: the payload is dropped, then one ERROR frame.
            with m.State("DRAIN"):
                m.d.comb += rx.o.ready.eq(1)
                with m.If(rx.o.valid & beat.last):
                    m.next = "ERROR_HEADER"
            with m.State("ERROR_HEADER"):
                send_header(Opcode.ERROR, error_status, 1)
                with m.If(req_header.ready):
                    m.next = "ERROR_BYTE"
            with m.State("ERROR_BYTE"):
                m.d.comb += [req_payload.valid.eq(1), req_payload.payload.eq(error_opcode)]
                with m.If(req_payload.ready):
                    m.next = "IDLE"
        return m
