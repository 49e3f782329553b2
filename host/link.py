"""Frames over a transport, for the host: a send queue and a receive parser that never block
each other.

Requests are queued with :meth:`FrameLink.queue`; :meth:`FrameLink.pump` writes what the link
takes and parses what has arrived, calling ``on_frame(opcode, status, tag, payload)`` for
each whole frame.  Frame layout and CRCs: :mod:`dlforge.rtl.link.protocol` (the same module
the gateware uses).  The receive side hunts for the next magic after a damaged header, like
the device does; a payload whose CRC-32 fails (checked only on links that are not reliable
on their own) is delivered with ``status = Status.BAD_CRC`` so the caller can act on it.
"""

import binascii
import struct
import time
import zlib
from collections import deque

from ..rtl.link.protocol import HEADER_BYTES, MAGIC, TRAILER_BYTES, Status
from .transport import LinkTimeout

__all__ = ["FrameLink"]

_FIELDS = struct.Struct("<BBHI")
_HEADER = struct.Struct("<2sBBHIH")
_TRAILER = struct.Struct("<I")


class FrameLink:
    def __init__(self, transport, on_frame, max_reply=1 << 20, verify=None,
                 buffer_bytes=4 << 20):
        self.transport = transport
        self.on_frame = on_frame
        self.max_reply = max_reply
        self.verify = (not transport.reliable) if verify is None else verify
        self.outgoing = deque()                 # memoryviews still to write
        self.buffer = bytearray(max(buffer_bytes, 2 * (max_reply + HEADER_BYTES + 64)))
        self.view = memoryview(self.buffer)
        self.start = self.end = 0               # unparsed bytes: buffer[start:end]
        self.bad_headers = self.bad_payloads = self.dropped_bytes = 0
        self.bytes_in = self.bytes_out = 0
        self.last_input = self.last_activity = time.monotonic()

    # ---- sending --------------------------------------------------------------------------
    def queue(self, opcode, tag, payload=b"", status=0):
        """Queue one frame (its payload is not copied)."""
        fields = _FIELDS.pack(opcode, status, tag, len(payload))
        self.outgoing.append(memoryview(MAGIC + fields
                                        + binascii.crc_hqx(fields, 0xFFFF).to_bytes(2, "little")))
        if len(payload):
            self.outgoing.append(memoryview(payload))
        self.outgoing.append(memoryview(_TRAILER.pack(zlib.crc32(payload))))

    @property
    def sending(self):
        return bool(self.outgoing)

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
            if moved or timeout <= 0:
                return moved
            if not t.wait(bool(self.outgoing), timeout):
                return False
            timeout = 0.0
            moved = True            # woke up: go round once more

    def drain(self, timeout):
        """Write everything queued (reading meanwhile); LinkTimeout if the link stalls."""
        deadline = time.monotonic() + timeout
        while self.outgoing:
            if not self.pump(max(0.0, deadline - time.monotonic())) and \
                    time.monotonic() >= deadline:
                raise LinkTimeout(f"{self.transport.name}: the device takes no more bytes "
                                  f"({timeout:g} s)")

    # ---- receiving ---------------------------------------------------------------------------
    def _compact(self):
        live = self.end - self.start
        if self.start:
            self.buffer[:live] = self.buffer[self.start:self.end]
        self.start, self.end = 0, live

    def _parse(self):
        buf, view = self.buffer, self.view
        while True:
            start, end = self.start, self.end
            if end - start < HEADER_BYTES:
                break
            if buf[start] != 0x5A or buf[start + 1] != 0xA5:
                found = buf.find(MAGIC, start, end)
                if found < 0:
                    keep = 1 if buf[end - 1] == 0x5A else 0
                    self.dropped_bytes += end - start - keep
                    self.start = end - keep
                    break
                self.dropped_bytes += found - start
                self.start = start = found
                if end - start < HEADER_BYTES:
                    break
            _, opcode, status, tag, length, hcrc = _HEADER.unpack_from(buf, start)
            if binascii.crc_hqx(view[start + 2:start + 10], 0xFFFF) != hcrc \
                    or length > self.max_reply:
                self.bad_headers += 1
                self.dropped_bytes += 1
                self.start = start + 1
                continue
            total = HEADER_BYTES + length + TRAILER_BYTES
            if end - start < total:
                if start + total > len(buf):
                    self._compact()
                break
            payload = view[start + HEADER_BYTES:start + HEADER_BYTES + length]
            if self.verify:
                (crc,) = _TRAILER.unpack_from(buf, start + HEADER_BYTES + length)
                if zlib.crc32(payload) != crc:
                    self.bad_payloads += 1
                    status = Status.BAD_CRC
            self.start = start + total
            self.on_frame(opcode, status, tag, payload)
        if self.start == self.end:
            self.start = self.end = 0
