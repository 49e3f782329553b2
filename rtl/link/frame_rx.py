"""The frame receiver: link beats in (``link_bytes`` W bytes a clock), checked frames out
(store and forward).

A frame's payload goes into one of two slots while its CRC-32 runs; only when the CRC matches
is the slot handed on, so nothing downstream ever acts on a damaged frame, and the next frame
is received while the previous one is replayed.  A frame whose payload CRC fails is reported
on ``err`` with its tag (the host resends it).  The header is checked in a window of its
beats that slides one beat at a time: a window without the magic, with a bad CRC-16 or with a
length above ``max_payload`` is not a frame start, so after any damage the receiver finds the
next frame at the next beat where one begins.  Frame layout and the padding of wide links:
:mod:`.protocol`.

Output beats carry W payload bytes (the last beat of a frame holds ``length % W`` real bytes
when that is not 0, the rest padding), ``last`` on the frame's final beat, and the frame's
header with every beat.  A frame without payload is one beat with ``length`` 0.
"""

from amaranth import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .crc import CRC16, CRC32, Crc, crc_of
from .protocol import (CHECKED_FIELDS, FIELDS_AT, FIELDS_BYTES, HCRC_AT, HEADER_BYTES,
                       LINK_WIDTHS, MAGIC, MAX_PAYLOAD, TRAILER_BYTES, Status, header_beats,
                       trailer_beats)

__all__ = ["FrameReceiver", "FrameHeader", "rx_beat_layout", "ErrorEvent", "header_fields"]

#: The header's fields between the magic and its CRC (``protocol.CHECKED_FIELDS``): opcode,
#: status, tag, length, seq.
FrameHeader = data.StructLayout({f.name: 8 * f.size for f in CHECKED_FIELDS})
ErrorEvent = data.StructLayout({"status": 8, "opcode": 8, "tag": 16})


def rx_beat_layout(link_bytes=1):
    return data.StructLayout({"data": 8 * link_bytes, "last": 1, "header": FrameHeader})


def header_fields(window):
    """(magic ok, header CRC ok, FrameHeader view) of the first HEADER_BYTES of ``window``."""
    fields = window[8 * FIELDS_AT:8 * HCRC_AT]
    magic_ok = window[:8 * len(MAGIC)] == int.from_bytes(MAGIC, "little")
    crc_ok = window[8 * HCRC_AT:8 * HEADER_BYTES] == crc_of(CRC16, fields, FIELDS_BYTES)
    return magic_ok, crc_ok, FrameHeader(fields)


class FrameReceiver(wiring.Component):
    """Makes the link safe to act on: only frames whose CRC matched reach the device, and after
    any damage the receiver finds the next frame by itself, so that a noisy link costs a resend,
    never a wrong result or a hang."""

    def __init__(self, max_payload=MAX_PAYLOAD, link_bytes=1):
        if max_payload < 1 or max_payload & (max_payload - 1) or link_bytes not in LINK_WIDTHS \
                or max_payload < link_bytes:
            self._MustUse__silence = True     # never elaborated: no unused-elaboratable warning
            raise ValueError(f"max_payload must be a power of two of at least link_bytes "
                             f"{LINK_WIDTHS}, not {max_payload} (link_bytes {link_bytes})")
        self.max_payload, self.link_bytes = max_payload, link_bytes
        super().__init__({
            "i": In(stream.Signature(8 * link_bytes)),
            "o": Out(stream.Signature(rx_beat_layout(link_bytes))),
            "err": Out(stream.Signature(ErrorEvent)),
            "header_errors": Out(32),
            "crc_errors": Out(32),
            "frames": Out(32),
            # a frame's header was recognised this clock (its opcode beside it): the clock a
            # frame starts, one header section after its first byte
            "start": Out(1),
            "start_opcode": Out(8),
        })

    def elaborate(self, platform):
        if self.link_bytes == 1:
            return self._elaborate_bytes()
        m = Module()
        w = self.link_bytes
        shift = (w - 1).bit_length()                  # log2 W
        depth = self.max_payload // w                 # beats of one slot
        hb, tb = header_beats(w), trailer_beats(w)
        m.submodules.pcrc = pcrc = Crc(CRC32, w)
        m.submodules.store = store = Memory(shape=8 * w, depth=2 * depth, init=[])
        wp = store.write_port()
        rp = store.read_port()

        beat = self.i.payload
        take = self.i.valid & self.i.ready
        # The header window: the last hb beats, oldest lowest (so its bytes are in link order).
        window = Signal(8 * w * hb)
        filled = Signal(range(hb + 1))
        magic_ok, crc_ok, fields = header_fields(window)
        len_bits = self.max_payload.bit_length()      # a checked length fits these bits
        length_ok = fields.length <= self.max_payload
        frame_start = (filled == hb) & magic_ok & crc_ok & length_ok
        bad_header = (filled == hb) & magic_ok & ~(crc_ok & length_ok)

        header = Signal(FrameHeader)
        beats = Signal(range(depth + 1))              # payload beats of the frame
        count = Signal(range(max(depth, tb) + 1))
        trailer = Signal(8 * w * tb)
        slot_full = [Signal(name=f"slot_full{n}") for n in range(2)]
        slot_header = [Signal(FrameHeader, name=f"slot_header{n}") for n in range(2)]
        w_slot = Signal()
        slot_free = ~Cat(*slot_full).bit_select(w_slot, 1)
        m.d.comb += pcrc.data.eq(beat)
        with m.If(self.err.valid & self.err.ready):
            m.d.sync += self.err.valid.eq(0)

        with m.FSM(name="rx"):
            with m.State("HUNT"):
                # The window is checked as a whole; while it holds a frame's header no beat is
                # taken (the next one is the frame's payload).
                m.d.comb += self.i.ready.eq(~frame_start)
                with m.If(take):
                    m.d.sync += window.eq(Cat(window[8 * w:], beat) if hb > 1 else beat)
                    with m.If(filled != hb):
                        m.d.sync += filled.eq(filled + 1)
                with m.If(bad_header & take):
                    m.d.sync += self.header_errors.eq(self.header_errors + 1)
                with m.If(frame_start):
                    m.d.comb += [self.start.eq(1), self.start_opcode.eq(fields.opcode)]
                    length = fields.length[:len_bits]
                    m.d.sync += [header.eq(fields), filled.eq(0), count.eq(0),
                                 beats.eq((length + w - 1) >> shift)]
                    m.next = "WAIT_SLOT"
            with m.State("WAIT_SLOT"):
                # The slot this frame goes into must have been replayed.
                with m.If(slot_free):
                    m.d.comb += pcrc.clear.eq(1)
                    with m.If(beats == 0):
                        m.next = "TRAILER"
                    with m.Else():
                        m.next = "PAYLOAD"
            with m.State("PAYLOAD"):
                m.d.comb += [self.i.ready.eq(1), pcrc.valid.eq(take),
                             wp.addr.eq(Cat(count[:(depth - 1).bit_length()], w_slot)),
                             wp.data.eq(beat), wp.en.eq(take)]
                with m.If(take):
                    m.d.sync += count.eq(count + 1)
                    with m.If(count + 1 == beats):
                        m.d.sync += count.eq(0)
                        m.next = "TRAILER"
            with m.State("TRAILER"):
                # No bad-CRC report may be lost: wait until the last one was taken.
                m.d.comb += self.i.ready.eq(~self.err.valid)
                with m.If(take):
                    got = Cat(trailer[8 * w:], beat) if tb > 1 else beat
                    m.d.sync += [trailer.eq(got), count.eq(count + 1)]
                    with m.If(count == tb - 1):
                        m.d.sync += count.eq(0)
                        with m.If(got[:8 * TRAILER_BYTES] == pcrc.value):
                            m.d.sync += [self.frames.eq(self.frames + 1), w_slot.eq(~w_slot)]
                            for n in range(2):
                                with m.If(w_slot == n):
                                    m.d.sync += [slot_full[n].eq(1), slot_header[n].eq(header)]
                        with m.Else():
                            m.d.sync += [self.crc_errors.eq(self.crc_errors + 1),
                                         self.err.valid.eq(1),
                                         self.err.payload.status.eq(Status.BAD_CRC),
                                         self.err.payload.opcode.eq(header.opcode),
                                         self.err.payload.tag.eq(header.tag)]
                        m.next = "HUNT"

        self._replay(m, rp, depth, slot_full, slot_header,
                     lambda h: (h.length[:len_bits] + w - 1) >> shift)
        return m

    def _replay(self, m, rp, depth, slot_full, slot_header, beats_of):
        """Checked slots out, in order, a beat a clock through a small FIFO: the slot memory's
        read is issued while the FIFO, counting the beat read last clock, has room.
        ``beats_of(header)``: a frame's payload beats."""
        w = self.link_bytes
        layout = rx_beat_layout(w)
        fifo_depth = 4
        m.submodules.fifo = fifo = SyncFIFOBuffered(width=layout.size, depth=fifo_depth)
        r_slot = Signal()
        r_addr = Signal(range(depth + 1))
        in_flight = Signal()
        flight_last = Signal()
        flight_header = Signal(FrameHeader)
        current = Signal(FrameHeader)
        current_beats = Signal(range(depth + 1))
        m.d.comb += current.eq(slot_header[0])
        with m.If(r_slot):
            m.d.comb += current.eq(slot_header[1])
        m.d.comb += current_beats.eq(beats_of(current))
        full = Cat(*slot_full).bit_select(r_slot, 1)
        # (a beat read now lands next clock, when the FIFO has taken at most the one read
        # last clock: the sum below never overflows it, and leaves a beat a clock through)
        room = fifo.level + in_flight < fifo_depth
        issue = full & room
        is_last = (current_beats == 0) | (r_addr + 1 == current_beats)
        m.d.comb += [rp.addr.eq(Cat(r_addr[:(depth - 1).bit_length()], r_slot)), rp.en.eq(1)]
        m.d.sync += [in_flight.eq(issue), flight_last.eq(is_last), flight_header.eq(current)]
        with m.If(issue):
            m.d.sync += r_addr.eq(r_addr + 1)
            with m.If(is_last):
                m.d.sync += [r_addr.eq(0), r_slot.eq(~r_slot)]
                for n in range(2):
                    with m.If(r_slot == n):
                        m.d.sync += slot_full[n].eq(0)
        out = layout(fifo.w_data)
        m.d.comb += [fifo.w_en.eq(in_flight), out.data.eq(rp.data), out.last.eq(flight_last),
                     out.header.eq(flight_header),
                     self.o.valid.eq(fifo.r_rdy), self.o.payload.eq(fifo.r_data),
                     fifo.r_en.eq(self.o.ready)]

    def _elaborate_bytes(self):
        """W = 1: the byte receiver (a magic hunt, then the header byte by byte), whose short
        paths the UART boards' iCE40 clock needs (a sliding 12-byte window does not fit it)."""
        m = Module()
        depth = self.max_payload
        m.submodules.hcrc = hcrc = Crc(CRC16)
        m.submodules.pcrc = pcrc = Crc(CRC32)
        m.submodules.store = store = Memory(shape=8, depth=2 * max(depth, 1), init=[])
        wp = store.write_port()
        rp = store.read_port()

        header = Signal(FrameHeader)
        fields = Signal(8 * FIELDS_BYTES)   # the checked fields as they arrive (first lowest)
        count = Signal(range(max(depth, HEADER_BYTES) + 1))
        len_bits = max(depth, 1).bit_length()     # a checked payload length fits these bits
        check = Signal(8 * TRAILER_BYTES)   # the CRC bytes received
        slot_full = [Signal(name=f"slot_full{n}") for n in range(2)]
        slot_header = [Signal(FrameHeader, name=f"slot_header{n}") for n in range(2)]
        w_slot = Signal()
        byte = self.i.payload
        take = self.i.valid & self.i.ready

        m.d.comb += [hcrc.data.eq(byte), pcrc.data.eq(byte)]
        with m.If(self.err.valid & self.err.ready):
            m.d.sync += self.err.valid.eq(0)

        with m.FSM(name="rx"):
            with m.State("HUNT0"):
                m.d.comb += self.i.ready.eq(1)
                with m.If(take & (byte == MAGIC[0])):
                    m.next = "HUNT1"
            with m.State("HUNT1"):
                m.d.comb += self.i.ready.eq(1)
                with m.If(take):
                    with m.If(byte == MAGIC[1]):
                        m.d.comb += hcrc.clear.eq(1)
                        m.d.sync += count.eq(0)
                        m.next = "HEADER"
                    with m.Elif(byte != MAGIC[0]):
                        m.next = "HUNT0"
            with m.State("HEADER"):
                m.d.comb += [self.i.ready.eq(1), hcrc.valid.eq(take)]
                with m.If(take):
                    m.d.sync += [fields.eq(Cat(fields[8:], byte)), count.eq(count + 1)]
                    with m.If(count == FIELDS_BYTES - 1):
                        m.d.sync += count.eq(0)
                        m.next = "HCRC"
            with m.State("HCRC"):
                m.d.comb += self.i.ready.eq(1)
                with m.If(take):
                    m.d.sync += [check.eq(Cat(check[8:16], byte)), count.eq(count + 1)]
                    with m.If(count == HEADER_BYTES - HCRC_AT - 1):
                        got = Cat(check[8:16], byte)
                        m.d.sync += [header.eq(fields), count.eq(0)]
                        length = FrameHeader(fields).length
                        with m.If((got != hcrc.value) | (length > depth)):
                            m.d.sync += self.header_errors.eq(self.header_errors + 1)
                            m.next = "HUNT0"
                        with m.Else():
                            m.d.comb += [self.start.eq(1),
                                         self.start_opcode.eq(FrameHeader(fields).opcode)]
                            m.next = "WAIT_SLOT"
            with m.State("WAIT_SLOT"):
                # The slot this frame goes into must have been replayed.
                with m.If(~Cat(*slot_full).bit_select(w_slot, 1)):
                    m.d.comb += pcrc.clear.eq(1)
                    with m.If(header.length == 0):
                        m.next = "TRAILER"
                    with m.Else():
                        m.next = "PAYLOAD"
            with m.State("PAYLOAD"):
                m.d.comb += [self.i.ready.eq(1), pcrc.valid.eq(take),
                             wp.addr.eq(Cat(count[:(depth - 1).bit_length()], w_slot)),
                             wp.data.eq(byte), wp.en.eq(take)]
                with m.If(take):
                    m.d.sync += count.eq(count + 1)
                    # (the length was checked against the depth: its low bits are all of it,
                    # and a narrow compare keeps the adder's path short)
                    with m.If(count + 1 == header.length[:len_bits]):
                        m.d.sync += count.eq(0)
                        m.next = "TRAILER"
            with m.State("TRAILER"):
                # No bad-CRC report may be lost: wait until the last one was taken.
                m.d.comb += self.i.ready.eq(~self.err.valid)
                with m.If(take):
                    m.d.sync += [check.eq(Cat(check[8:], byte)), count.eq(count + 1)]
                    with m.If(count == TRAILER_BYTES - 1):
                        m.d.sync += count.eq(0)
                        with m.If(Cat(check[8:], byte) == pcrc.value):
                            m.d.sync += [self.frames.eq(self.frames + 1), w_slot.eq(~w_slot)]
                            for n in range(2):
                                with m.If(w_slot == n):
                                    m.d.sync += [slot_full[n].eq(1), slot_header[n].eq(header)]
                        with m.Else():
                            m.d.sync += [self.crc_errors.eq(self.crc_errors + 1),
                                         self.err.valid.eq(1),
                                         self.err.payload.status.eq(Status.BAD_CRC),
                                         self.err.payload.opcode.eq(header.opcode),
                                         self.err.payload.tag.eq(header.tag)]
                        m.next = "HUNT0"

        self._replay(m, rp, max(depth, 1), slot_full, slot_header,
                     lambda h: h.length[:len_bits])
        return m
