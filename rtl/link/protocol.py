"""The host link protocol: frames, opcodes, statuses and the CRCs, defined once for the
gateware (``rtl/link``) and the host runtime.

A frame on the byte stream::

    0..1   magic      0x5A 0xA5: where a frame starts (the receiver hunts for it after damage)
    2      opcode     Opcode (requests) / the request's opcode (responses)
    3      status     0 in requests; Status in responses
    4..5   tag        uint16, chosen by the host; a response carries its request's tag
    6..9   length     uint32, payload bytes (at most MAX_PAYLOAD)
    10..11 hcrc       CRC-16/CCITT-FALSE of bytes 2..9: a damaged header is dropped at once
                      instead of making the receiver wait for a wrong length
    ...    payload
    +0..3  crc        CRC-32 (IEEE 802.3, as zlib.crc32) of the payload

Integers are little-endian.  Payloads are bounded so that the receiver can hold a whole one
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
           "crc16", "crc32", "encode_frame", "file_requests", "FrameDecoder", "Frame", "FrameError"]

MAGIC = b"\x5a\xa5"
HEADER_BYTES = 12
TRAILER_BYTES = 4
MAX_PAYLOAD = 4096
#: The UART link's bit rate: the boards' UARTs divide their clock for it and the host's
#: ``serial:`` transport opens ports at it (3 Mbaud is the FT231X/FT2232H limit that both
#: development boards' USB bridges reach).
BAUD = 3_000_000


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


MAX_CORES = Register.JPEG_ERRORS - Register.JPEG_IMAGES    # per-core registers: 16 cores


VERSION = (0 << 16) | 1


class Status(enum.IntEnum):
    OK = 0x00
    BAD_CRC = 0x01          # the payload's CRC-32 did not match: nothing was done, resend
    BAD_OPCODE = 0x02       # unknown opcode: nothing was done
    TOO_LONG = 0x03         # length above MAX_PAYLOAD: the header was dropped
    BAD_REQUEST = 0x04      # a payload of the wrong size for its opcode
    BUSY = 0x05             # no room for the request now: resend later


class FrameError(ValueError):
    """A frame that cannot be decoded (the receiver's reasons, for host-side decoding)."""


def crc16(data, crc=0xFFFF):
    """CRC-16/CCITT-FALSE (polynomial 0x1021, initial 0xFFFF, no reflection, no final XOR).

    This is binascii's CRC-CCITT (``crc_hqx``) started at 0xFFFF: C speed for the host.
    """
    return binascii.crc_hqx(data, crc)


def crc32(data):
    return zlib.crc32(data) & 0xFFFFFFFF


def encode_frame(opcode, tag, payload=b"", status=0, max_payload=MAX_PAYLOAD):
    """The bytes of one frame (``max_payload``: the receiving device's limit)."""
    payload = bytes(payload)
    if len(payload) > max_payload:
        raise ValueError(f"payload of {len(payload)} bytes exceeds max_payload ({max_payload})")
    if not 0 <= tag < 1 << 16:
        raise ValueError(f"tag {tag} is not a uint16")
    fields = struct.pack("<BBHI", int(opcode), int(status), tag, len(payload))
    return (MAGIC + fields + struct.pack("<H", crc16(fields)) + payload
            + struct.pack("<I", crc32(payload)))


def file_requests(tag, data, max_payload=MAX_PAYLOAD, fast=False):
    """A JPEG file as frames: ``JPEG_DATA`` chunks of at most ``max_payload`` bytes and a
    final, non-empty ``JPEG_END`` chunk, all under ``tag`` (status bit 0: fast upsampling)."""
    chunks = [data[i:i + max_payload] for i in range(0, len(data), max_payload)] or [b""]
    return [encode_frame(Opcode.JPEG_END if n == len(chunks) - 1 else Opcode.JPEG_DATA, tag,
                         chunk, status=int(fast), max_payload=max_payload)
            for n, chunk in enumerate(chunks)]


class Frame:
    __slots__ = ("opcode", "status", "tag", "payload")

    def __init__(self, opcode, status, tag, payload):
        self.opcode, self.status, self.tag, self.payload = opcode, status, tag, payload

    def __repr__(self):
        return (f"Frame(opcode=0x{self.opcode:02X}, status={self.status}, tag={self.tag}, "
                f"{len(self.payload)} bytes)")


class FrameDecoder:
    """Bytes in (any chunking), whole frames out; damage is skipped, counted and reported.

    ``feed(data)`` returns the frames completed by ``data``.  A damaged header makes the
    decoder hunt for the next magic one byte later; a payload whose CRC fails is returned as
    ``Frame(..., status=Status.BAD_CRC)`` so the caller knows which tag to retry.
    """

    def __init__(self, max_length=MAX_PAYLOAD):
        self.max_length = max_length
        self.buffer = bytearray()
        self.dropped_bytes = 0
        self.bad_headers = 0
        self.bad_payloads = 0

    def feed(self, data):
        self.buffer += data
        frames = []
        while True:
            start = self.buffer.find(MAGIC)
            if start < 0:
                keep = 1 if self.buffer[-1:] == MAGIC[:1] else 0
                self.dropped_bytes += len(self.buffer) - keep
                del self.buffer[:len(self.buffer) - keep]
                return frames
            if start:
                self.dropped_bytes += start
                del self.buffer[:start]
            if len(self.buffer) < HEADER_BYTES:
                return frames
            fields = bytes(self.buffer[2:10])
            (hcrc,) = struct.unpack_from("<H", self.buffer, 10)
            opcode, status, tag, length = struct.unpack("<BBHI", fields)
            if crc16(fields) != hcrc or length > self.max_length:
                self.bad_headers += 1
                self.dropped_bytes += 1
                del self.buffer[:1]                 # hunt again from the next byte
                continue
            total = HEADER_BYTES + length + TRAILER_BYTES
            if len(self.buffer) < total:
                return frames
            payload = bytes(self.buffer[HEADER_BYTES:HEADER_BYTES + length])
            (crc,) = struct.unpack_from("<I", self.buffer, HEADER_BYTES + length)
            del self.buffer[:total]
            if crc != crc32(payload):
                self.bad_payloads += 1
                frames.append(Frame(opcode, Status.BAD_CRC, tag, payload))
            else:
                frames.append(Frame(opcode, status, tag, payload))
