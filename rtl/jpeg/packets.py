"""The decoder core's packets, defined once for the gateware and the host.

In: one JPEG file per packet, ``input_bytes`` bytes a beat (lowest byte first; ``keep`` says
how many bytes of the beat are real, 1..input_bytes), ``last`` on its final beat.  ``tag`` and
``fast`` (fast upsampling) are taken from the packet's first beat.  With several cores each
beat also names its core (``dest``, AXI-Stream's TDEST): packets for different cores may
interleave beat by beat, so a slow file on one core does not hold up the link for the others.

Out: one packet per file, every beat carrying the file's tag (with several cores, beats of
different files interleave; the tag says which file a beat belongs to):
``HEADER`` (width, height, sampling), then ``PIXELS`` beats (up to 4 RGB pixels each, raster
order), then ``TRAILER`` (status, the core's cycle count for the file, Huffman symbols decoded)
with ``last``.  A file that fails before its scan has no pixel beats and a zero-size header; a
file that fails inside its scan stops its pixel beats where the error was found; the status in
the trailer is what counts.
"""

from dataclasses import dataclass
from enum import IntEnum

import numpy as np
from amaranth.lib import data

from .raster import PIXELS_PER_BEAT
from .status import JpegStatus

__all__ = ["OutputKind", "HeaderLayout", "TrailerLayout", "dest_bits", "input_layout",
           "output_layout",
           "input_beats", "DecodedImage", "parse_output"]

DATA_BITS = 24 * PIXELS_PER_BEAT


class OutputKind(IntEnum):
    """Tells the three kinds of beat of a core's output packet apart, the same values for the
    gateware that sends them and the host that parses them."""

    HEADER = 0
    PIXELS = 1
    TRAILER = 2


HeaderLayout = data.StructLayout({
    "width": 16, "height": 16, "components": 2, "h": 2, "v": 2, "fast": 1,
})
TrailerLayout = data.StructLayout({
    "status": 8, "cycles": 32, "symbols": 32,
})


def dest_bits(cores):
    """Width of the ``dest`` field that picks a core (none for a single core)."""
    return (cores - 1).bit_length()


def input_layout(input_bytes=1, tag_bits=8, cores=1, resize=False, scaling=False):
    """``resize``: a core with a resampler, whose packets may begin with a resize request
    (``rtl/resample/request.py``; the field says so, from the packet's first beat).
    ``scaling``: a core with the reduced IDCTs, whose packets may begin with a scale word
    (:func:`~dlforge.rtl.jpeg.scaling.scale_word`, before any resize request)."""
    fields = {"data": 8 * input_bytes, "keep": input_bytes.bit_length(),
              "last": 1, "fast": 1, "tag": tag_bits}
    if resize:
        fields["resize"] = 1
    if scaling:
        fields["scale"] = 1
    if cores > 1:
        fields["dest"] = dest_bits(cores)
    return data.StructLayout(fields)


def output_layout(tag_bits=8):
    return data.StructLayout({
        "kind": 2, "data": DATA_BITS, "count": 3, "tag": tag_bits, "last": 1,
    })


def input_beats(file_bytes, tag=0, fast=False, input_bytes=1, tag_bits=8, cores=1, dest=0,
                resize=None, scale=None):
    """One file as the integers a simulator drives onto the decoder's ``i.payload``
    (``resize``: None for a core without a resampler, else whether the file begins with a
    resize request; ``scale`` likewise for a scale word)."""
    layout = input_layout(input_bytes, tag_bits, cores, resize is not None, scale is not None)
    beats = []
    chunks = [file_bytes[k:k + input_bytes] for k in range(0, len(file_bytes), input_bytes)]
    for n, chunk in enumerate(chunks):
        fields = {"data": int.from_bytes(chunk, "little"), "last": n == len(chunks) - 1,
                  "fast": bool(fast), "tag": tag}
        fields["keep"] = len(chunk)
        if resize is not None:
            fields["resize"] = bool(resize)
        if scale is not None:
            fields["scale"] = bool(scale)
        if cores > 1:
            fields["dest"] = dest
        beats.append(layout.const(fields).as_value().value)
    return beats


@dataclass
class DecodedImage:
    """One file's result as the host sees it, parsed from a core's output packet
    (:func:`parse_output`): what tests and the host compare with the golden model."""

    tag: int
    width: int
    height: int
    status: JpegStatus
    cycles: int
    symbols: int
    pixels: np.ndarray          # (height, width, 3) uint8 when complete, else (n, 3)

    @property
    def ok(self):
        return self.status == JpegStatus.OK


def _fields(layout, value):
    view = data.Const(layout, value)
    return {name: int(view[name]) for name, _ in layout}


def parse_output(beats, tag_bits=8):
    """Output beats (integers) -> [DecodedImage] in the order their trailers came; beats of
    images with different tags may interleave (several cores).  Raises ValueError on a
    malformed sequence."""
    layout = output_layout(tag_bits)
    images, open_images = [], {}
    for value in beats:
        beat = _fields(layout, value)
        kind = OutputKind(beat["kind"])
        tag = beat["tag"]
        if kind == OutputKind.HEADER:
            if tag in open_images:
                raise ValueError(f"a header inside image {tag}")
            open_images[tag] = (_fields(HeaderLayout, beat["data"]), [])
        elif tag not in open_images:
            raise ValueError(f"a {kind.name} beat outside an image (tag {tag})")
        elif kind == OutputKind.PIXELS:
            rgb = beat["data"].to_bytes(DATA_BITS // 8, "little")
            open_images[tag][1].append(np.frombuffer(rgb[:3 * beat["count"]], dtype=np.uint8))
        else:
            header, pixels = open_images.pop(tag)
            trailer = _fields(TrailerLayout, beat["data"])
            flat = (np.concatenate(pixels) if pixels else np.zeros(0, np.uint8)).reshape(-1, 3)
            w, h = header["width"], header["height"]
            if len(flat) == w * h:
                flat = flat.reshape(h, w, 3)
            images.append(DecodedImage(tag, w, h, JpegStatus(trailer["status"]),
                                       trailer["cycles"], trailer["symbols"], flat))
    if open_images:
        raise ValueError(f"the output ends inside image(s) {sorted(open_images)}")
    return images
