"""The one receive parser of the link's frames in software: whole frames out of received
bytes, damage skipped and counted.  The host runtime's links (:mod:`.frame_link`,
:mod:`.dma`) parse in place with :class:`FrameParser`; the tests, the testbenches and the raw
frame client take copied frames from :class:`FrameDecoder`.  The frame format itself is the
contract in :mod:`dlforge.rtl.link.protocol`, which the gateware builds from too.
"""

import zlib

from dlforge.rtl.link.protocol import (BARRIER_TAG, LINK_WIDTHS, MAGIC, MAX_PAYLOAD, TRAILER,
                                       Status, check_header, header_span, trailer_span)

__all__ = ["Frame", "FrameParser", "FrameDecoder"]


class Frame:
    """One frame as the host sees it (opcode, status, tag, payload, seq): what
    :class:`FrameDecoder` hands out."""

    __slots__ = ("opcode", "status", "tag", "payload", "seq")

    def __init__(self, opcode, status, tag, payload, seq=0):
        self.opcode, self.status, self.tag, self.payload = opcode, status, tag, payload
        self.seq = seq

    def __repr__(self):
        return (f"Frame(opcode=0x{self.opcode:02X}, status={self.status}, tag={self.tag}, "
                f"seq={self.seq}, {len(self.payload)} bytes)")


class FrameParser:
    """The host's one receive parser: whole frames out of a buffer, damage skipped and
    counted, so that every host receiver (:class:`FrameDecoder`; the runtime's ``FrameLink``
    and ``DmaLink``, which parse in place and hand payloads on as views, not copied) hunts,
    checks and counts alike.

    Frames start on beat boundaries (``link_bytes`` W) counted from where parsing starts: the
    parser hunts for the magic there only, skips one beat after a header that fails (a bad
    header CRC or a length above the limit: ``bad_headers``), counts every byte skipped
    (``dropped_bytes``) and, with ``verify``, checks each payload's CRC-32: a frame whose CRC
    fails is delivered with ``Status.BAD_CRC`` (``bad_payloads``) so that its receiver knows
    which tag to retry.
    """

    def __init__(self, link_bytes=1, verify=True):
        self.link_bytes = link_bytes
        self.verify = verify
        self.bad_headers = self.bad_payloads = self.dropped_bytes = 0
        self.start = 0                  # the first byte not parsed yet

    @property
    def link_bytes(self):
        """The link width W (bytes per clock): the beat the frames' sections are padded to."""
        return self._width

    @link_bytes.setter
    def link_bytes(self, width):
        # settable after construction: a board's width is known only from its transport or
        # its registers, which are read through the link
        if width not in LINK_WIDTHS:
            raise ValueError(f"link_bytes must be one of {LINK_WIDTHS}, not {width}")
        self._width = width
        self._header_span = header_span(width)
        self._trailer_span = trailer_span(width)

    def _hunt(self, buf, start, end):
        """The next beat-aligned magic in buf[start:end] (``start`` is aligned), or -1."""
        w = self._width
        found = buf.find(MAGIC, start, end)
        while found >= 0 and (found - start) % w:
            found = buf.find(MAGIC, found + w - (found - start) % w, end)
        return found

    def parse_frames(self, buf, view, end, max_length, on_frame, on_barrier=None):
        """Parse ``buf[self.start:end]`` (``self.start`` on a beat boundary; ``buf`` a
        bytearray or mmap to search, ``view`` a memoryview of it) and move ``self.start`` past
        every frame delivered and every byte dropped: each whole frame goes to
        ``on_frame(opcode, status, tag, payload, seq)``, its payload a view into ``view``
        (valid until the caller reuses those bytes), or, with ``on_barrier``, a frame of
        BARRIER_TAG to ``on_barrier(opcode, status, payload)``.  Parsing stops before a frame
        or header not yet whole (a partial last beat, a last byte that may begin a magic at
        W = 1); returns the bytes the frame at ``self.start`` needs in all (0 when its header
        is not whole yet), for the caller to make room."""
        w, span, tail, verify = self._width, self._header_span, self._trailer_span, self.verify
        first, second = MAGIC
        barrier = BARRIER_TAG if on_barrier is not None else -1
        start = self.start
        while start != end:
            if end - start < 2 or buf[start] != first or buf[start + 1] != second:
                found = self._hunt(buf, start, end)
                if found < 0:
                    if w == 1:      # a last magic byte may begin one
                        rest = 1 if buf[end - 1] == first else 0
                    else:           # a partial last beat is looked at again when it is whole
                        rest = (end - start) % w
                    self.dropped_bytes += end - start - rest
                    self.start = end - rest
                    return 0
                self.dropped_bytes += found - start
                start = found
            if end - start < span:              # the header section, pad included
                break
            fields = check_header(view, start, max_length)
            if fields is None:
                self.bad_headers += 1
                self.dropped_bytes += w
                start += w                      # hunt again from the next beat
                continue
            opcode, status, tag, length, seq = fields
            padded = length + (-length % w)     # (payload_span)
            total = span + padded + tail
            if end - start < total:
                self.start = start
                return total
            at = start + span
            payload = view[at:at + length]
            if verify:
                (crc,) = TRAILER.unpack_from(view, at + padded)
                if zlib.crc32(view[at:at + padded] if padded != length else payload) != crc:
                    self.bad_payloads += 1
                    status = Status.BAD_CRC
            start += total
            self.start = start                  # (past the frame before anything acts on it)
            if tag == barrier:
                on_barrier(opcode, status, payload)
            else:
                on_frame(opcode, status, tag, payload, seq)
        self.start = start
        return 0


class FrameDecoder(FrameParser):
    """Bytes in (any chunking), whole frames out; damage is skipped, counted and reported.

    ``feed(data)`` returns the frames completed by ``data``.  A damaged header makes the
    decoder hunt for the next magic one beat later (``link_bytes``: frames start on beat
    boundaries of the stream); a payload whose CRC fails is returned as
    ``Frame(..., status=Status.BAD_CRC)`` so the caller knows which tag to retry.  The parsing
    is :class:`FrameParser`'s; ``buffer`` holds the bytes not parsed yet.
    """

    def __init__(self, max_length=MAX_PAYLOAD, link_bytes=1):
        super().__init__(link_bytes)
        self.max_length = max_length
        self.buffer = bytearray()

    def feed(self, data):
        """The frames ``data`` completes (:class:`Frame`, their payloads copied)."""
        self.buffer += data
        frames = []

        def keep(opcode, status, tag, payload, seq):
            frames.append(Frame(opcode, status, tag, bytes(payload), seq))
        with memoryview(self.buffer) as view:
            self.parse_frames(self.buffer, view, len(self.buffer), self.max_length, keep)
        del self.buffer[:self.start]
        self.start = 0
        return frames
