"""Frames over a transport, for the host: a send queue and a receive parser that never block
each other.

Requests are queued with :meth:`FrameLink.queue`; :meth:`FrameLink.pump` writes what the link
takes and parses what has arrived, calling ``on_frame(opcode, status, tag, payload, seq)`` for
each whole frame.  Frame layout and CRCs: :mod:`dlforge.rtl.link.protocol` (the same module
the gateware uses), which also builds the frames (``frame_parts``); they are parsed by
:class:`~dlforge.host.link.frame_parser.FrameParser`, the host's one receive parser, which
this link is: only the queues and the buffering are here.  The receive side hunts for the next magic after a damaged header,
like the device does; a payload whose CRC-32 fails (checked only on links that are not
reliable on their own) is delivered with ``status = Status.BAD_CRC`` so the caller can act on
it.

**Link width** (``link_bytes`` W, one of ``LINK_WIDTHS``; 1 until the caller sets it): on a
wide link every frame's header, payload and CRC sections are zero-padded to whole W-byte
beats, both ways, and the CRC-32 covers the padded payload (the protocol module's frame
format).  The pads are small bytes objects queued between the memoryviews, so payloads are
still not copied.  Frames start on beat boundaries of the stream, so the receiver hunts for
the magic only at offsets that are multiples of W from the first byte received, and skips one
beat after a bad header.  At W = 1 the frames are the byte format, unchanged.

**Pacing** (``pace``; on by default where the transport has no ``flow_control``, i.e. a UART
board): the device's receive buffers must never overflow, and nothing on the link tells the
host when they have room.  The device's control plane handles frames in arrival order, so a
``PING`` written after a data frame is answered only once that data frame has left the
device's frame receiver (for the decoder cores or the engine).  A paced link therefore
writes, after each data frame (``JPEG_DATA``, ``JPEG_END``, ``CONV_WORDS``), a *barrier*: a
``PING`` with tag ``BARRIER_TAG`` (0; never used by
:class:`~dlforge.host.device.accelerator.AcceleratorDevice`, whose control tags are 1 ..
``FIRST_DATA_TAG`` - 1 and file tags ``FIRST_DATA_TAG`` and up: the protocol module's tags)
and a sequence number as payload, and writes the next data frame only when that barrier's
answer is back.  Control requests (small, one at a time) are written in queue order but do
not wait for a barrier.  Barrier answers never reach
``on_frame``.  A barrier the device refused (its payload arrived damaged) is written again.
So is one whose answer has not come after ``barrier_retry`` seconds without a byte from the
device (a dropped byte makes the device's receiver take the barrier's first bytes as the
data frame's, which it then refuses), at most ``barrier_resends`` times per data frame; after
that the queue waits until the caller gives up on the barrier (:meth:`FrameLink.abandon`,
which the board's silence rule calls).  At most one data frame, its barriers and one
control request are in the device at once: see docs/runtime.md.  (Pacing is for the UART
link, whose width is 1: :func:`paced_bytes` counts unpadded frames.)
"""

import time
from collections import deque

from ...rtl.link.protocol import (BARRIER_TAG, HEADER_BYTES, TRAILER_BYTES, Opcode, Status,
                                  frame_parts)
from dlforge.host.link.errors import LinkTimeout
from dlforge.host.link.frame_parser import FrameParser

__all__ = ["FrameLink", "DATA_OPCODES", "paced_bytes"]

#: Frames that go on to the data path (decoder cores, engine): the ones a paced link follows
#: with a barrier.
DATA_OPCODES = frozenset({Opcode.JPEG_DATA, Opcode.JPEG_END, Opcode.CONV_WORDS})


def paced_bytes(max_payload, barrier_resends=2, control_payload=7):
    """The most request bytes a paced link can have in the device at once: one data frame,
    its barrier and the barrier's re-sends, and one control request of the board (one at a
    time; ``control_payload``: the longest, the recovery ping's b"dlforge").  A UART board's
    receive FIFO must hold this much (docs/runtime.md)."""
    framing = HEADER_BYTES + TRAILER_BYTES
    return (max_payload + framing + (1 + barrier_resends) * (framing + 4)
            + framing + control_payload)


class FrameLink(FrameParser):
    """Frames over a byte transport: requests queued and written as the transport takes
    them, replies parsed (headers checked, payload CRCs where the link is not reliable: the
    host's :class:`~dlforge.host.link.frame_parser.FrameParser`, in place in this link's
    buffer), and pacing on links without flow control.  The board's one link interface; the
    DMA link (:class:`~dlforge.host.link.dma.DmaLink`) keeps it and adds files framed by its
    engine."""
    #: True where the link's engine frames files itself (the host posts them whole and
    #: places their pixels): the board then uses ``post_file``, ``place`` and ``set_credit``
    frames_files = False

    def __init__(self, transport, on_frame, max_reply=1 << 20, verify=None,
                 buffer_bytes=4 << 20, pace=None, barrier_retry=1.0, barrier_resends=2,
                 link_bytes=1):
        super().__init__(link_bytes, (not transport.reliable) if verify is None else verify)
        self.transport = transport
        self.on_frame = on_frame
        self.max_reply = max_reply
        self.pace = (not getattr(transport, "flow_control", True)) if pace is None \
            else bool(pace)
        self.outgoing = deque()                 # memoryviews still to write
        self.waiting = deque()                  # paced: (is_data, [memoryviews]) not yet written
        self.barrier = None                     # paced: the sequence number awaited, or None
        self._barrier_seq = self._barrier_first = 0
        self._barrier_at = 0.0                  # when the awaited barrier was written
        self._resends = 0                       # barriers written again for this data frame
        self.barrier_retry, self.barrier_resends = barrier_retry, barrier_resends
        self.barriers = self.barrier_refusals = self.barrier_timeouts = 0
        self.buffer = bytearray(max(buffer_bytes, 2 * (max_reply + HEADER_BYTES + 64)))
        self.view = memoryview(self.buffer)
        self.end = 0                            # unparsed bytes: buffer[start:end]
        # where buffer[0] sits in the received stream (mod 64, which every width divides):
        # beats are counted from the stream's first byte
        self._origin = 0
        self.bytes_in = self.bytes_out = 0
        self.last_input = self.last_activity = time.monotonic()

    # ---- sending --------------------------------------------------------------------------
    def queue(self, opcode, tag, payload=b"", status=0, seq=0):
        """Queue one frame (its payload is not copied); ``seq``: its number within its tag
        (a file's chunks count 0, 1, 2, ...)."""
        parts = self._frame(opcode, tag, payload, status, seq)
        if not self.pace:
            self.outgoing.extend(parts)
            return
        self.waiting.append((opcode in DATA_OPCODES, parts))
        self._release()

    def _frame(self, opcode, tag, payload, status, seq=0):
        """One frame at this link's width as memoryviews, the payload not copied (the
        protocol's :func:`~dlforge.rtl.link.protocol.frame_parts`)."""
        return frame_parts(opcode, tag, payload, status, self._width, seq)

    def _release(self):
        """Paced: move the frames that may go now to the bytes to write."""
        waiting = self.waiting
        while waiting:
            is_data, parts = waiting[0]
            if is_data and self.barrier is not None:
                return                          # the last data frame may still be in the device
            waiting.popleft()
            self.outgoing.extend(parts)
            if is_data:
                self._resends = 0
                self._write_barrier()
                self._barrier_first = self.barrier

    def _write_barrier(self):
        self._barrier_seq = (self._barrier_seq + 1) & 0xFFFFFFFF
        self.barrier = self._barrier_seq
        self._barrier_at = time.monotonic()
        self.barriers += 1
        self.outgoing.extend(self._frame(Opcode.PING, BARRIER_TAG,
                                         self.barrier.to_bytes(4, "little"), 0))

    def _on_barrier(self, opcode, status, payload):
        if self.barrier is None:
            return                              # an answer to a barrier given up on
        if opcode == Opcode.PING:
            # Any barrier written since the last data frame answers for it; so does a damaged
            # answer (BAD_CRC): the device answered a PING of ours with tag 0, after everything
            # written before it.
            first = self._barrier_first
            mine = len(payload) == 4 and (int.from_bytes(payload, "little") - first) \
                & 0xFFFFFFFF <= (self.barrier - first) & 0xFFFFFFFF
            if status == Status.BAD_CRC or mine:
                self.barrier = None
                self._release()
        elif opcode == Opcode.ERROR and self._resends < self.barrier_resends:
            # The device refused the barrier (its payload arrived damaged).  A refusal is not
            # ordered behind the data frame as an answer is: ask again.
            self.barrier_refusals += 1
            self._resends += 1
            self._write_barrier()

    def _barrier_due(self, now):
        """Paced: seconds until the awaited barrier is written again (None: never): after
        ``barrier_retry`` seconds in which no byte moved either way."""
        if self.barrier is None or self._resends >= self.barrier_resends:
            return None
        return max(self.last_activity, self._barrier_at) + self.barrier_retry - now

    def abandon(self, barrier=False):
        """Paced: drop the frames not yet written (a partly written frame is finished), e.g.
        when the caller voids their attempts; with ``barrier``, also stop waiting for the
        last barrier's answer (the caller knows by other means, an answered ping written
        after it, that nothing of ours is left in the device).  Returns the frames dropped."""
        dropped = len(self.waiting)
        self.waiting.clear()
        if barrier:
            self.barrier = None
        return dropped

    @property
    def sending(self):
        return bool(self.outgoing or self.waiting)

    # ---- the loop ----------------------------------------------------------------------------
    def pump(self, timeout=0.0):
        """Write and read until nothing more can move without waiting, waiting at most
        ``timeout`` seconds for the first movement.  Returns whether anything moved."""
        moved = False
        t = self.transport
        while True:
            progress = False
            while self.outgoing:
                chunk = self.outgoing[0]
                n = t.send(chunk)
                if not n:
                    break
                self.bytes_out += n
                progress = True
                if n == len(chunk):
                    self.outgoing.popleft()
                else:
                    self.outgoing[0] = chunk[n:]
            if self.end == len(self.buffer):
                self._compact()
            n = t.recv_into(self.view[self.end:])
            if n:
                self.end += n
                self.bytes_in += n
                self.last_input = time.monotonic()
                self._parse()
                progress = True
            if progress:
                moved = True
                self.last_activity = time.monotonic()
                continue
            due = None if self.barrier is None else self._barrier_due(time.monotonic())
            if due is not None and due <= 0:
                self.barrier_timeouts += 1      # no answer and the device silent: ask again
                self._resends += 1
                self._write_barrier()
                continue
            if moved or timeout <= 0:
                return moved
            wait = timeout if due is None else min(timeout, due)
            if not t.wait(bool(self.outgoing), wait):
                timeout -= wait
                if timeout > 0:
                    continue        # woke for the barrier's deadline: wait out the rest
                return False
            timeout = 0.0
            moved = True            # woke up: go round once more

    def drain(self, timeout):
        """Write everything queued (reading meanwhile); LinkTimeout if the link stalls."""
        deadline = time.monotonic() + timeout
        while self.sending:
            if not self.pump(max(0.0, deadline - time.monotonic())) and \
                    time.monotonic() >= deadline:
                raise LinkTimeout(f"{self.transport.name}: the device takes no more bytes "
                                  f"({timeout:g} s)")

    # ---- receiving ---------------------------------------------------------------------------
    def _compact(self):
        live = self.end - self.start
        if self.start:
            self.buffer[:live] = self.buffer[self.start:self.end]
            self._origin = (self._origin + self.start) & 63
        self.start, self.end = 0, live

    def _parse(self):
        """The buffer's whole frames to ``on_frame`` (barrier answers to the pacing), their
        payloads views into the buffer (valid until the next read: on_frame copies what it
        keeps)."""
        if self._width > 1:
            # ``start`` stays on a beat boundary (the parser moves whole beats); only a width
            # set while bytes were waiting can leave it inside a beat
            skew = (self._origin + self.start) % self._width
            if skew:
                skip = min(self._width - skew, self.end - self.start)
                self.dropped_bytes += skip
                self.start += skip
        need = self.parse_frames(self.buffer, self.view, self.end, self.max_reply,
                                 self.on_frame, self._on_barrier)
        if self.start == self.end:
            self._origin = (self._origin + self.end) & 63
            self.start = self.end = 0
        elif self.start + need > len(self.buffer):
            self._compact()                     # room for the whole frame
