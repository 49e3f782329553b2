"""Status codes of the JPEG decoder, shared by the gateware, the golden model and the host,
and the error that carries one with the byte offset where it was found.

One byte per image.  0 is success; 0x1x are valid files the decoder does not handle (the host
sends them to the CPU fallback); 0x2x are malformed files; 0x3x are requests the core
refuses.  Never renumber a code: hosts and
logs depend on the values.
"""

from enum import IntEnum

__all__ = ["JpegStatus", "JpegDecodeError"]


class JpegStatus(IntEnum):
    """How a file went, in one byte with the same value in the gateware, the golden model and
    the host, so that the host can tell a file to send to the CPU fallback from a broken one."""

    OK = 0x00

    # Valid JPEG, outside what the hardware decodes.
    UNSUPPORTED_PROGRESSIVE = 0x10    # SOF2, SOF6, SOF10, SOF14
    UNSUPPORTED_LOSSLESS = 0x11       # SOF3, SOF7, SOF11, SOF15
    UNSUPPORTED_ARITHMETIC = 0x12     # SOF9..SOF15 or a DAC segment
    UNSUPPORTED_PRECISION = 0x13      # sample precision other than 8 bits
    UNSUPPORTED_COMPONENTS = 0x14     # neither 1 nor 3 components
    UNSUPPORTED_SAMPLING = 0x15       # chroma not 1x1, or luma not 1x1/2x1/1x2/2x2
    UNSUPPORTED_MULTISCAN = 0x16      # more than one scan, or a scan without every component
    UNSUPPORTED_DNL = 0x17            # height 0 in SOF, defined later by DNL
    UNSUPPORTED_HIERARCHICAL = 0x18   # SOF5..SOF7, DHP, EXP
    UNSUPPORTED_COLORSPACE = 0x19     # 3 components that are not YCbCr (Adobe transform 0, "RGB" ids)
    TOO_LARGE = 0x1A                  # wider or taller than the generator's limits
    UNSUPPORTED_EXTENSION = 0x1B      # JPG (FF C8): reserved for JPEG extensions

    # Malformed.
    NO_SOI = 0x20                     # does not start with FF D8
    TRUNCATED = 0x21                  # data ends before the image (or its EOI, or a segment) ends
    BAD_MARKER_LENGTH = 0x22          # a segment length below 2, or wrong for its kind
    UNEXPECTED_MARKER = 0x23          # a marker where it cannot be (e.g. EOI before SOS, bad RST)
    BAD_FRAME_HEADER = 0x24           # SOF contents inconsistent (zero size, bad factors, ids)
    BAD_SCAN_HEADER = 0x25            # SOS contents inconsistent
    BAD_TABLE = 0x26                  # DQT/DHT contents invalid
    MISSING_QUANT_TABLE = 0x27
    MISSING_HUFFMAN_TABLE = 0x28
    BAD_HUFFMAN_CODE = 0x29           # bits that match no code of the table
    TOO_MANY_COEFFICIENTS = 0x2A      # run-lengths past the 64th coefficient
    BAD_COEFFICIENT = 0x2B            # magnitude category impossible for 8-bit data
    BAD_RESTART = 0x2C                # restart marker missing, out of order or misplaced
    EXCESS_ENTROPY_DATA = 0x2D        # whole bytes left in a segment after its last MCU

    # A request the core refuses (the file itself may be fine).
    BAD_RESIZE = 0x30                 # a resize request malformed, or its box outside the image
    BAD_SCALE = 0x31                  # a scale word malformed, or a scale the core does not take

    @property
    def unsupported(self):
        """A valid file the CPU fallback should decode."""
        return 0x10 <= self < 0x20

    @property
    def malformed(self):
        return 0x20 <= self < 0x30

    @property
    def refused(self):
        """The request, not the file, was wrong (the host checks it before sending)."""
        return self >= 0x30



class JpegDecodeError(Exception):
    """Why a file is not decoded: a status code, the byte offset, and a sentence."""

    def __init__(self, status, offset, detail):
        self.status = JpegStatus(status)
        self.offset = offset
        self.detail = detail
        super().__init__(f"{self.status.name} at byte {offset}: {detail}")
