"""The host link protocol: frames, opcodes, statuses and the CRCs, defined once for the
gateware (``rtl/link``) and the host runtime.

A frame on the byte stream::

    0..1   magic      0x5A 0xA5: where a frame starts (the receiver hunts for it after damage)
    2      opcode     Opcode (requests) / the request's opcode (responses)
    3      status     0 in requests; Status in responses
    4..5   tag        uint16, chosen by the host; a response carries its request's tag
    6..8   length     uint24, payload bytes (at most MAX_PAYLOAD)
    9      seq        the frame's number within its tag, mod 256: a file's chunks (and a
                      file's reply frames) count 0, 1, 2, ..., so that a frame lost to a
                      destroyed header leaves a gap its receiver sees (Status.GAP)
    10..11 hcrc       CRC-16/CCITT-FALSE of bytes 2..9: a damaged header is dropped at once
                      instead of making the receiver wait for a wrong length
    ...    payload
    +0..3  crc        CRC-32 (IEEE 802.3, as zlib.crc32) of the payload

Integers are little-endian.

**Wide links** (``link_bytes`` W > 1 bytes per clock: a PCIe card's DMA stream): a frame is
three sections, each zero-padded to a whole number of W-byte beats, so every field sits at a
fixed lane and no stage ever shifts bytes across a beat: the header (bytes 0..11, padded to
``header_beats(W) * W``), the payload (padded to a multiple of W) and the CRC-32 (padded to
``trailer_beats(W) * W``).  The CRC-32 covers the padded payload section (zlib.crc32 of the
payload and its zero padding), so the gateware's CRC takes whole beats only.  A frame starts
on a beat boundary; the receiver hunts for the magic at lanes 0 and 1 of a beat.  At W = 1
there is no padding: the format is the byte format above.  See docs/protocol.md.

Payloads are bounded so that the receiver can hold a whole one
and check its CRC before anything acts on it (store and forward): a bad frame is answered
with an error frame and never reaches a decoder or the engine.  Larger data (a JPEG file, a
layer's tiles) travel as several frames under one tag (``JPEG_DATA`` chunks, then
``JPEG_END``).

Registers (``Register``, 32 bits each) are read with ``READ_REGS`` and written with
``WRITE_REG``; per-core registers sit at ``base + core``.
"""

import binascii
import enum
import struct
import zlib

__all__ = ["MAGIC", "HEADER_BYTES", "TRAILER_BYTES", "MAX_PAYLOAD", "MAX_CORES", "VERSION", "BAUD",
           "Opcode",
           "Register", "Status",
           "crc16", "crc32", "encode_frame", "header_fields", "split_length", "MAX_LENGTH",
           "REQUEST_CLOSE", "array_word", "parse_array_word", "LINK_WIDTHS", "header_beats", "trailer_beats",
           "payload_beats", "frame_bytes", "request_status", "REQUEST_FAST", "REQUEST_RESIZE", "REQUEST_SCALE", "scales_word", "parse_scales_word", "CORE_SHIFT", "file_requests", "FrameDecoder", "Frame", "FrameError",
           "HEADER", "TRAILER", "frame_parts", "check_header", "header_span", "payload_span",
           "trailer_span"]

MAGIC = b"\x5a\xa5"
HEADER_BYTES = 12
TRAILER_BYTES = 4
#: The header as a struct: magic, opcode, status, tag, length | seq << 24, hcrc.
HEADER = struct.Struct("<2sBBHIH")
#: The CRC section's CRC-32 (before its pad).
TRAILER = struct.Struct("<I")
MAX_PAYLOAD = 4096
#: The UART link's bit rate: the boards' UARTs divide their clock for it and the host's
#: ``serial:`` transport opens ports at it (3 Mbaud is the FT231X/FT2232H limit that both
#: development boards' USB bridges reach).
BAUD = 3_000_000


#: The host link widths (bytes per clock) a device can be built with.
LINK_WIDTHS = (1, 4, 8, 16, 32, 64)
#: Request status byte of JPEG frames: bit 0 asks for fast upsampling, bits 4..7 name the
#: decoder core that takes the file (the host spreads files over the cores itself, so that
#: chunks of files on different cores can interleave on the link).
REQUEST_FAST = 0x01
#: A *closer*: a file's final frame sent again during recovery, which ends whatever packet its
#: core has open and is taken whatever its sequence number.
REQUEST_CLOSE = 0x02
#: The file's bytes begin with a resize request (:mod:`dlforge.rtl.resample.request`): the
#: core crops and resizes the decoded image (cores built with a resampler only,
#: ``Register.RESAMPLE_TAPS``).
REQUEST_RESIZE = 0x04
#: The file's bytes begin with a scale word (:func:`dlforge.rtl.jpeg.scaling.scale_word`),
#: before any resize request: the core decodes at 1/2, 1/4 or 1/8 in the DCT domain (cores
#: built with the reduced IDCTs only, ``Register.SCALES``).
REQUEST_SCALE = 0x08
CORE_SHIFT = 4
#: Payload lengths are 24 bits (byte 9 of the header is the frame's sequence number).
MAX_LENGTH = (1 << 24) - 1


def request_status(fast=False, core=0, close=False, resize=False, scale=False):
    """The status byte of a JPEG request frame."""
    if not 0 <= core < 16:
        raise ValueError(f"core {core} is not 0..15")
    return (REQUEST_FAST if fast else 0) | (REQUEST_CLOSE if close else 0) | \
        (REQUEST_RESIZE if resize else 0) | (REQUEST_SCALE if scale else 0) | \
        core << CORE_SHIFT


def _check_width(link_bytes):
    if link_bytes not in LINK_WIDTHS:
        raise ValueError(f"link_bytes must be one of {LINK_WIDTHS}, not {link_bytes}")


def header_beats(link_bytes):
    """Beats of a frame's header section."""
    return -(-HEADER_BYTES // link_bytes)


def trailer_beats(link_bytes):
    """Beats of a frame's CRC section."""
    return -(-TRAILER_BYTES // link_bytes)


def payload_beats(length, link_bytes):
    return -(-length // link_bytes)


def header_span(link_bytes):
    """Bytes of a frame's header section, pad included."""
    return header_beats(link_bytes) * link_bytes


def payload_span(length, link_bytes):
    """Bytes of a frame's payload section (``length`` bytes and their pad to a whole beat):
    what the CRC-32 covers."""
    return length + (-length % link_bytes)


def trailer_span(link_bytes):
    """Bytes of a frame's CRC section, pad included."""
    return trailer_beats(link_bytes) * link_bytes


def frame_bytes(length, link_bytes=1):
    """Bytes a frame with ``length`` payload bytes takes on a link of ``link_bytes``."""
    return link_bytes * (header_beats(link_bytes) + payload_beats(length, link_bytes)
                         + trailer_beats(link_bytes))


class Opcode(enum.IntEnum):
    """What a request asks for."""
    PING = 0x01             # echo the payload back (link test)
    READ_REGS = 0x02        # payload: uint16 first register, uint16 count -> uint32 values
    WRITE_REG = 0x03        # payload: uint16 register, uint32 value
    JPEG_DATA = 0x10        # a chunk of a JPEG file for the decoder (file = frames of one tag)
    JPEG_END = 0x11         # the file's last chunk (payload may be empty)
    CONV_WORDS = 0x20       # link words for the convolution engine
    ERROR = 0x7F            # responses only: the request could not be taken (status says why)


class Register(enum.IntEnum):
    """The register numbers of ``READ_REGS``/``WRITE_REG``, shared by gateware and host: how the
    host learns what a device holds (cores, limits, the engine's sizes) and reads its counters."""

    VERSION = 0x00          # (major << 16) | minor of the protocol
    CORES = 0x01            # JPEG decoder cores
    MAX_WIDTH = 0x02        # the cores' width and height limits
    MAX_HEIGHT = 0x03
    ARRAY = 0x04            # rows | cols << 8 | simd << 16 | operand_bits << 24 (0: no engine)
    LINK_BYTES = 0x05       # the engine's link word
    MAX_PAYLOAD = 0x06      # the largest request payload this device takes (a power of two)
    REPLY_PAYLOAD = 0x07    # the largest reply payload it sends
    CYCLES = 0x08           # free-running clock counter (low 32 bits)
    CONV_CYCLES = 0x09      # the engine's counters
    CONV_ARRAY_CYCLES = 0x0A
    CONV_TILES = 0x0B
    CONV_ERROR = 0x0C       # the engine's DescriptorError
    CRC_ERRORS = 0x0D       # frames refused for a bad payload CRC
    HEADER_ERRORS = 0x0E    # headers dropped (bad header CRC or length)
    RESET = 0x0F            # write 1: reset the decoder cores and the engine
    JPEG_IMAGES = 0x10      # + core: images decoded
    JPEG_ERRORS = 0x20      # + core: images with an error status
    CONV_WEIGHT_DEPTH = 0x30  # the engine's buffer sizes and limits (EngineConfig), which the
    CONV_INPUT_DEPTH = 0x31   # host's tiling planner needs
    CONV_PSUM_DEPTH = 0x32
    CONV_MAX_REDUCTION = 0x33
    LINK_WIDTH = 0x34       # bytes per clock of the host link (the frame padding, LINK_WIDTHS)
    INPUT_FIFO = 0x35       # bytes each decoder core's input FIFO holds (the host's credit)
    # The device's own measure of a batch, in CYCLES: writing SPAN_START opens a span; it
    # then holds the clock at which the next data request (JPEG or engine words) arrived
    # (its header recognised, one header section after its first byte), and SPAN_END the
    # clock at which the latest data reply's last beat left (set to the opening clock when
    # the span opens).  So SPAN_END - SPAN_START is the batch's time at the host interface,
    # from its first request byte to its last reply byte, without the control requests that
    # open the span and read it (docs/protocol.md).
    SPAN_START = 0x36
    SPAN_END = 0x37
    RESAMPLE_TAPS = 0x38    # the cores' resampler taps per pass (0: no resampler)
    RESAMPLE_MAX = 0x39     # its largest crop and output: width | height << 16
    SCALES = 0x3A           # the scales the cores decode at: bit k for 1/2**k (scales_word)


MAX_CORES = Register.JPEG_ERRORS - Register.JPEG_IMAGES    # per-core registers: 16 cores


def scales_word(scales):
    """``Register.SCALES`` of the denominators a device decodes at (1 always)."""
    return sum(1 << (s.bit_length() - 1) for s in set(scales) | {1})


def parse_scales_word(word):
    """The denominators of ``Register.SCALES`` (a device before the register: 1 alone)."""
    return tuple(1 << k for k in range(4) if word >> k & 1) or (1,)


def array_word(engine):
    """``Register.ARRAY`` of an engine (an EngineConfig), or 0 for none."""
    if engine is None:
        return 0
    return engine.rows | engine.cols << 8 | engine.simd << 16 | engine.operand_bits << 24


def parse_array_word(word):
    """(rows, cols, simd, operand_bits) of ``Register.ARRAY``, or None for no engine."""
    return tuple(word >> s & 0xFF for s in (0, 8, 16, 24)) if word else None


VERSION = (0 << 16) | 2


class Status(enum.IntEnum):
    """A response frame's status byte, so that the host knows whether to resend, wait or give
    up."""

    OK = 0x00
    BAD_CRC = 0x01          # the payload's CRC-32 did not match: nothing was done, resend
    BAD_OPCODE = 0x02       # unknown opcode: nothing was done
    TOO_LONG = 0x03         # length above MAX_PAYLOAD: the header was dropped
    BAD_REQUEST = 0x04      # a payload of the wrong size for its opcode
    BUSY = 0x05             # no room for the request now: resend later
    GAP = 0x06              # a JPEG frame out of sequence for its core: one before it was lost


class FrameError(ValueError):
    """A frame that cannot be decoded (the receiver's reasons, for host-side decoding)."""


def crc16(data, crc=0xFFFF):
    """CRC-16/CCITT-FALSE (polynomial 0x1021, initial 0xFFFF, no reflection, no final XOR).

    This is binascii's CRC-CCITT (``crc_hqx``) started at 0xFFFF: C speed for the host.
    """
    return binascii.crc_hqx(data, crc)


def crc32(data):
    return zlib.crc32(data) & 0xFFFFFFFF


def header_fields(opcode, status, tag, length, seq=0):
    """Header bytes 2..9 (opcode, status, tag, length, seq)."""
    if not 0 <= tag < 1 << 16:
        raise ValueError(f"tag {tag} is not a uint16")
    if not 0 <= length <= MAX_LENGTH:
        raise ValueError(f"a payload of {length} bytes is over the {MAX_LENGTH}-byte limit")
    return struct.pack("<BBHI", int(opcode), int(status), tag, length | (seq & 0xFF) << 24)


def split_length(word):
    """(length, seq) of header bytes 6..9 read as a uint32."""
    return word & MAX_LENGTH, word >> 24


#: Zero bytes for the payload's pad; the header's and the CRC's pads by link width.
_ZEROS = bytes(max(LINK_WIDTHS))
_SECTION_PADS = {w: (bytes(header_span(w) - HEADER_BYTES), bytes(trailer_span(w) - TRAILER_BYTES))
                 for w in LINK_WIDTHS}


def frame_parts(opcode, tag, payload=b"", status=0, link_bytes=1, seq=0):
    """One frame as memoryviews, the payload's not copied: the header section (its pad
    included), the payload, the payload's zero pad to a whole beat, and the CRC section (the
    CRC-32 of the padded payload and its pad); empty parts are left out.  The one place that
    builds frames: :func:`encode_frame` joins the parts, the host's ``FrameLink`` queues them
    as they are (one call per frame, no copy: the host's CPU per image is measured)."""
    pads = _SECTION_PADS.get(link_bytes)
    if pads is None:
        _check_width(link_bytes)
    header_pad, trailer_pad = pads
    fields = header_fields(opcode, status, tag, len(payload), seq)
    parts = [memoryview(MAGIC + fields + crc16(fields).to_bytes(2, "little") + header_pad)]
    crc = 0
    if len(payload):
        parts.append(memoryview(payload))
        crc = zlib.crc32(payload)
    pad = -len(payload) % link_bytes
    if pad:
        parts.append(memoryview(_ZEROS[:pad]))
        crc = zlib.crc32(_ZEROS[:pad], crc)
    parts.append(memoryview(TRAILER.pack(crc) + trailer_pad))
    return parts


def encode_frame(opcode, tag, payload=b"", status=0, max_payload=MAX_PAYLOAD, link_bytes=1,
                 seq=0):
    """The bytes of one frame (``max_payload``: the receiving device's limit; ``link_bytes``:
    its link width, which pads the frame's sections to whole beats; ``seq``: the frame's
    number within its tag)."""
    _check_width(link_bytes)
    payload = bytes(payload)
    if len(payload) > max_payload:
        raise ValueError(f"payload of {len(payload)} bytes exceeds max_payload ({max_payload})")
    return b"".join(frame_parts(opcode, tag, payload, status, link_bytes, seq))


def check_header(buffer, offset, max_length):
    """``(opcode, status, tag, length, seq)`` of the frame header at ``buffer[offset:]`` (at
    least ``HEADER_BYTES`` there), or None where there is none: no magic, a header CRC that
    fails or a length above ``max_length``.  The one header check of the host's receivers
    (:class:`FrameDecoder`, the host's ``FrameLink``); a memoryview ``buffer`` is not
    copied."""
    magic, opcode, status, tag, word, hcrc = HEADER.unpack_from(buffer, offset)
    length = word & MAX_LENGTH
    if magic != MAGIC or length > max_length \
            or crc16(buffer[offset + 2:offset + 10]) != hcrc:
        return None
    return opcode, status, tag, length, word >> 24


def file_requests(tag, data, max_payload=MAX_PAYLOAD, fast=False, link_bytes=1, core=0):
    """A JPEG file as frames: ``JPEG_DATA`` chunks of at most ``max_payload`` bytes and a
    final, non-empty ``JPEG_END`` chunk, all under ``tag`` for decoder core ``core``."""
    chunks = [data[i:i + max_payload] for i in range(0, len(data), max_payload)] or [b""]
    status = request_status(fast, core)
    return [encode_frame(Opcode.JPEG_END if n == len(chunks) - 1 else Opcode.JPEG_DATA, tag,
                         chunk, status=status, max_payload=max_payload, link_bytes=link_bytes,
                         seq=n)
            for n, chunk in enumerate(chunks)]


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


class FrameDecoder:
    """Bytes in (any chunking), whole frames out; damage is skipped, counted and reported.

    ``feed(data)`` returns the frames completed by ``data``.  A damaged header makes the
    decoder hunt for the next magic one beat later (``link_bytes``: frames start on beat
    boundaries of the stream); a payload whose CRC fails is returned as
    ``Frame(..., status=Status.BAD_CRC)`` so the caller knows which tag to retry.
    """

    def __init__(self, max_length=MAX_PAYLOAD, link_bytes=1):
        _check_width(link_bytes)
        self.max_length = max_length
        self.link_bytes = link_bytes
        self.buffer = bytearray()
        self.dropped_bytes = 0
        self.bad_headers = 0
        self.bad_payloads = 0

    def _hunt(self):
        """The offset of the next candidate frame start, or None."""
        w = self.link_bytes
        start = 0
        while True:
            start = self.buffer.find(MAGIC, start)
            if start < 0 or start % w == 0:
                return None if start < 0 else start
            start += w - start % w

    def feed(self, data):
        self.buffer += data
        w = self.link_bytes
        frames = []
        while True:
            start = self._hunt()
            if start is None:
                keep = len(self.buffer) % w if w > 1 else \
                    (1 if self.buffer[-1:] == MAGIC[:1] else 0)
                self.dropped_bytes += len(self.buffer) - keep
                del self.buffer[:len(self.buffer) - keep]
                return frames
            if start:
                self.dropped_bytes += start
                del self.buffer[:start]
            at = header_span(w)
            if len(self.buffer) < at:
                return frames                       # (a bad header drops its whole beat)
            fields = check_header(self.buffer, 0, self.max_length)
            if fields is None:
                self.bad_headers += 1
                self.dropped_bytes += w
                del self.buffer[:w]                 # hunt again from the next beat
                continue
            opcode, status, tag, length, seq = fields
            total = frame_bytes(length, w)
            if len(self.buffer) < total:
                return frames
            padded = bytes(self.buffer[at:at + payload_span(length, w)])
            (crc,) = TRAILER.unpack_from(self.buffer, at + len(padded))
            del self.buffer[:total]
            payload = padded[:length]
            if crc != crc32(padded):
                self.bad_payloads += 1
                frames.append(Frame(opcode, Status.BAD_CRC, tag, payload, seq))
            else:
                frames.append(Frame(opcode, status, tag, payload, seq))
