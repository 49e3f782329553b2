"""The frame receiver: link bytes in, checked frames out (store and forward).

A frame's payload goes into one of two slots while its CRC-32 runs; only when the CRC matches
is the slot handed on, so nothing downstream ever acts on a damaged frame, and the next frame
is received while the previous one is replayed.  A frame whose payload CRC fails is reported
on ``err`` with its tag (the host resends it); a header whose CRC-16 fails, or whose length is
above ``max_payload``, is dropped and the receiver hunts for the next magic from the byte
after the header (a frame starting inside a dropped header is lost too, and the host's
timeout resends it).  Frame layout: :mod:`.protocol`.

Output beats carry the frame's opcode, status, tag and length with every payload byte;
``last`` marks the final byte.  A frame without payload is one beat with ``length`` 0.
"""

from amaranth import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .crc import CRC16, CRC32, Crc
from .protocol import MAGIC, MAX_PAYLOAD, Status

__all__ = ["FrameReceiver", "FrameHeader", "rx_beat_layout", "ErrorEvent"]

FrameHeader = data.StructLayout({"opcode": 8, "status": 8, "tag": 16, "length": 32})
ErrorEvent = data.StructLayout({"status": 8, "opcode": 8, "tag": 16})


def rx_beat_layout():
    return data.StructLayout({"data": 8, "last": 1, "header": FrameHeader})


class FrameReceiver(wiring.Component):
    i: In(stream.Signature(8))
    o: Out(stream.Signature(rx_beat_layout()))
    err: Out(stream.Signature(ErrorEvent))
    header_errors: Out(32)
    crc_errors: Out(32)
    frames: Out(32)

    def __init__(self, max_payload=MAX_PAYLOAD):
        if max_payload < 1 or max_payload & (max_payload - 1):
            self._MustUse__silence = True     # never elaborated: no unused-elaboratable warning
            raise ValueError(f"max_payload must be a power of two, not {max_payload}")
        self.max_payload = max_payload
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        depth = self.max_payload
        m.submodules.hcrc = hcrc = Crc(CRC16)
        m.submodules.pcrc = pcrc = Crc(CRC32)
        m.submodules.store = store = Memory(shape=8, depth=2 * max(depth, 1), init=[])
        wp = store.write_port()
        rp = store.read_port()

        header = Signal(FrameHeader)
        fields = Signal(64)                 # bytes 2..9 as they arrive (first byte lowest)
        count = Signal(range(max(depth, 12) + 1))
        len_bits = max(depth, 1).bit_length()     # a checked payload length fits these bits
        check = Signal(32)                  # the CRC bytes received
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
                    with m.If(count == 7):
                        m.d.sync += count.eq(0)
                        m.next = "HCRC"
            with m.State("HCRC"):
                m.d.comb += self.i.ready.eq(1)
                with m.If(take):
                    m.d.sync += [check.eq(Cat(check[8:16], byte)), count.eq(count + 1)]
                    with m.If(count == 1):
                        got = Cat(check[8:16], byte)
                        m.d.sync += [header.eq(fields), count.eq(0)]
                        length = FrameHeader(fields).length
                        with m.If((got != hcrc.value) | (length > depth)):
                            m.d.sync += self.header_errors.eq(self.header_errors + 1)
                            m.next = "HUNT0"
                        with m.Else():
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
                    with m.If(count == 3):
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

        # ---- Replay of checked slots, in order, through a small FIFO ---------------------------
        m.submodules.fifo = fifo = SyncFIFOBuffered(width=rx_beat_layout().size, depth=4)
        r_slot = Signal()
        r_addr = Signal(range(max(depth, 1) + 1))
        in_flight = Signal()
        flight_last = Signal()
        flight_header = Signal(FrameHeader)
        current = Signal(FrameHeader)
        m.d.comb += current.eq(slot_header[0])
        with m.If(r_slot):
            m.d.comb += current.eq(slot_header[1])
        full = Cat(*slot_full).bit_select(r_slot, 1)
        room = fifo.level + in_flight < 3
        issue = full & room
        is_last = (current.length[:len_bits] == 0) | (r_addr + 1 == current.length[:len_bits])
        m.d.comb += [rp.addr.eq(Cat(r_addr[:(depth - 1).bit_length()], r_slot)), rp.en.eq(1)]
        m.d.sync += [in_flight.eq(issue), flight_last.eq(is_last), flight_header.eq(current)]
        with m.If(issue):
            m.d.sync += r_addr.eq(r_addr + 1)
            with m.If(is_last):
                m.d.sync += [r_addr.eq(0), r_slot.eq(~r_slot)]
                for n in range(2):
                    with m.If(r_slot == n):
                        m.d.sync += slot_full[n].eq(0)
        beat = rx_beat_layout()(fifo.w_data)
        m.d.comb += [fifo.w_en.eq(in_flight), beat.data.eq(rp.data), beat.last.eq(flight_last),
                     beat.header.eq(flight_header),
                     self.o.valid.eq(fifo.r_rdy), self.o.payload.eq(fifo.r_data),
                     fifo.r_en.eq(self.o.ready)]
        return m
