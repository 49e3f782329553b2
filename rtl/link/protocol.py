"""The host link protocol: frames, opcodes, statuses and the CRCs, defined once for the
gateware (``rtl/link``) and the host runtime.

A frame on the byte stream (the header as :data:`HEADER_FIELDS`, the one definition that
everything else takes its offsets from)::

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
import typing
import zlib

__all__ = ["HeaderField", "HEADER_FIELDS", "HEADER_FIELD", "CHECKED_FIELDS", "FIELDS_AT",
           "FIELDS_BYTES", "HCRC_AT", "MAGIC", "HEADER_BYTES", "TRAILER_BYTES", "MAX_PAYLOAD",
           "MAX_CORES", "TAG_BITS", "BARRIER_TAG", "FIRST_DATA_TAG", "VERSION", "BAUD", "Opcode",
           "Register", "Status", "crc16", "crc32", "encode_frame", "header_fields", "MAX_LENGTH",
           "REQUEST_CLOSE", "array_word", "parse_array_word", "LINK_WIDTHS", "header_beats",
           "trailer_beats", "payload_beats", "frame_bytes", "request_status", "REQUEST_FAST",
           "REQUEST_RESIZE", "REQUEST_SCALE", "scales_word", "parse_scales_word", "CORE_SHIFT",
           "file_requests", "HEADER", "TRAILER",
           "frame_parts", "check_header", "header_span", "payload_span", "trailer_span",
           "c_header"]


class HeaderField(typing.NamedTuple):
    """One field of the frame header: its name, its first byte, its bytes (an integer is
    little-endian) and what it holds."""
    name: str
    at: int
    size: int
    meaning: str


#: The frame header, defined once: the host's struct (:data:`HEADER`), the gateware's
#: ``FrameHeader`` (:mod:`.frame_rx`), the simulated board's C++ constants (:func:`c_header`)
#: and the AXI manifest all take the fields' places from this table.
HEADER_FIELDS = (
    HeaderField("magic", 0, 2, "where a frame starts (the receiver hunts for it)"),
    HeaderField("opcode", 2, 1, "Opcode (requests) / the request's opcode (responses)"),
    HeaderField("status", 3, 1, "0 in requests; Status in responses"),
    HeaderField("tag", 4, 2, "chosen by the host; a response carries its request's tag"),
    HeaderField("length", 6, 3, "payload bytes"),
    HeaderField("seq", 9, 1, "the frame's number within its tag, mod 256"),
    HeaderField("hcrc", 10, 2, "CRC-16/CCITT-FALSE of the fields between the magic and it"),
)
HEADER_FIELD = {f.name: f for f in HEADER_FIELDS}
#: The fields between the magic and the header CRC: what the CRC covers and what the
#: gateware carries with a frame.
CHECKED_FIELDS = HEADER_FIELDS[1:-1]
FIELDS_AT = CHECKED_FIELDS[0].at
HCRC_AT = HEADER_FIELD["hcrc"].at
FIELDS_BYTES = HCRC_AT - FIELDS_AT
HEADER_BYTES = HCRC_AT + HEADER_FIELD["hcrc"].size
assert all(a.at + a.size == b.at for a, b in zip(HEADER_FIELDS, HEADER_FIELDS[1:]))
MAGIC = b"\x5a\xa5"
assert len(MAGIC) == HEADER_FIELD["magic"].size
TRAILER_BYTES = 4
#: Payload lengths: the length field's bits (the byte above it is the frame's number).
MAX_LENGTH = (1 << 8 * HEADER_FIELD["length"].size) - 1
_SEQ_SHIFT = 8 * HEADER_FIELD["length"].size


def _struct_codes(fields):
    """struct's codes of consecutive integer fields.  struct has no 3-byte integer: the
    24-bit length is read with the byte above it (the seq) as one uint32."""
    codes, k = "", 0
    while k < len(fields):
        size = fields[k].size
        if size == 3 and k + 1 < len(fields) and fields[k + 1].size == 1:
            size, k = 4, k + 1
        codes += {1: "B", 2: "H", 4: "I"}[size]
        k += 1
    return codes


#: Header bytes FIELDS_AT.. as a struct: opcode, status, tag, length | seq << 24.
_FIELDS = struct.Struct("<" + _struct_codes(CHECKED_FIELDS))
#: The header as a struct: magic, opcode, status, tag, length | seq << 24, hcrc.
HEADER = struct.Struct(f"<{len(MAGIC)}s{_FIELDS.format[1:]}{_struct_codes(HEADER_FIELDS[-1:])}")
assert HEADER.size == HEADER_BYTES and _FIELDS.size == FIELDS_BYTES
#: The CRC section's CRC-32 (before its pad).
TRAILER = struct.Struct("<I")
assert TRAILER.size == TRAILER_BYTES
MAX_PAYLOAD = 4096
#: Tags (the header's ``tag``): a request's tag comes back on its reply.  Tag 0 is the paced
#: link's barrier PING, tags 1 .. FIRST_DATA_TAG - 1 the host's control requests (registers,
#: pings), FIRST_DATA_TAG and above its files and layers (each file or layer one tag).
TAG_BITS = 8 * HEADER_FIELD["tag"].size
BARRIER_TAG = 0
FIRST_DATA_TAG = 256
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
    CORES = 0x01            # JPEG decoder lanes: files decoded at once (see FILES_PER_CORE)
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
    FILES_PER_CORE = 0x3B   # files a core decodes at once (2: a C-slowed pair); CORES counts
                            # what the host addresses, cores x FILES_PER_CORE


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


def crc16(data, crc=0xFFFF):
    """CRC-16/CCITT-FALSE (polynomial 0x1021, initial 0xFFFF, no reflection, no final XOR).

    This is binascii's CRC-CCITT (``crc_hqx``) started at 0xFFFF: C speed for the host.
    """
    return binascii.crc_hqx(data, crc)


def crc32(data):
    return zlib.crc32(data) & 0xFFFFFFFF


def header_fields(opcode, status, tag, length, seq=0):
    """The header's bytes FIELDS_AT.. (opcode, status, tag, length, seq): what its CRC
    covers."""
    if not 0 <= tag < 1 << TAG_BITS:
        raise ValueError(f"tag {tag} is not a uint{TAG_BITS}")
    if not 0 <= length <= MAX_LENGTH:
        raise ValueError(f"a payload of {length} bytes is over the {MAX_LENGTH}-byte limit")
    return _FIELDS.pack(int(opcode), int(status), tag, length | (seq & 0xFF) << _SEQ_SHIFT)


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
    parts = [memoryview(MAGIC + fields + crc16(fields).to_bytes(HEADER_BYTES - HCRC_AT, "little")
                        + header_pad)]
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
    (:mod:`dlforge.host.link.frame_parser`); a memoryview ``buffer`` is not copied."""
    magic, opcode, status, tag, word, hcrc = HEADER.unpack_from(buffer, offset)
    length = word & MAX_LENGTH
    if magic != MAGIC or length > max_length \
            or crc16(buffer[offset + FIELDS_AT:offset + HCRC_AT]) != hcrc:
        return None
    return opcode, status, tag, length, word >> _SEQ_SHIFT


def file_requests(tag, data, max_payload=MAX_PAYLOAD, fast=False, link_bytes=1, core=0):
    """A JPEG file as frames: ``JPEG_DATA`` chunks of at most ``max_payload`` bytes and a
    final, non-empty ``JPEG_END`` chunk, all under ``tag`` for decoder core ``core``."""
    chunks = [data[i:i + max_payload] for i in range(0, len(data), max_payload)] or [b""]
    status = request_status(fast, core)
    return [encode_frame(Opcode.JPEG_END if n == len(chunks) - 1 else Opcode.JPEG_DATA, tag,
                         chunk, status=status, max_payload=max_payload, link_bytes=link_bytes,
                         seq=n)
            for n, chunk in enumerate(chunks)]


def c_header():
    """The frame contract for the simulated board's C++ harness (``frame_protocol.h``, which
    ``sim/board/build.py`` writes beside the DMA layout's header and hashes with the
    harness): the header's fields, the magic, the sections, the tags and the opcodes."""
    lines = ["// Generated from dlforge/rtl/link/protocol.py: do not edit.", "#pragma once",
             "#include <cstdint>",
             "namespace frame {",
             f"constexpr uint8_t MAGIC[{len(MAGIC)}] = "
             f"{{{', '.join(f'0x{b:02X}' for b in MAGIC)}}};",
             f"constexpr uint32_t HEADER_BYTES = {HEADER_BYTES}, TRAILER_BYTES = {TRAILER_BYTES};",
             "// the header's fields: first byte, bytes (integers little-endian)"]
    for f in HEADER_FIELDS:
        name = f.name.upper()
        lines.append(f"constexpr uint32_t {name}_AT = {f.at}, {name}_BYTES = {f.size};"
                     f"  // {f.meaning}")
    lines += [f"constexpr uint32_t FIELDS_AT = {FIELDS_AT}, FIELDS_BYTES = {FIELDS_BYTES};"
              "  // what the header CRC covers",
              "// the uint32 at LENGTH_AT: the length in its low bits, the seq above them",
              f"constexpr uint32_t LENGTH_MASK = 0x{MAX_LENGTH:X}, SEQ_SHIFT = {_SEQ_SHIFT};",
              "static_assert(SEQ_AT == LENGTH_AT + LENGTH_BYTES && SEQ_SHIFT + 8 * SEQ_BYTES == "
              "32, \"length and seq: one uint32\");",
              f"constexpr uint32_t TAG_BITS = {TAG_BITS}, BARRIER_TAG = {BARRIER_TAG}, "
              f"FIRST_DATA_TAG = {FIRST_DATA_TAG};"]
    for op in Opcode:
        lines.append(f"constexpr uint8_t OP_{op.name} = 0x{int(op):02X};")
    lines.append("}  // namespace frame")
    return "\n".join(lines) + "\n"
