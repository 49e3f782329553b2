"""How long a decoder core will take over a JPEG file, guessed from its header and size, so
that the host can keep every core equally busy.

A core's clocks for a file are close to a linear function of three things the host knows
before sending it: pixels (the raster's work), samples (the IDCT's and the line buffers'
work: 1.5 a pixel at 4:2:0, 3 at 4:4:4) and the file's bytes (the Huffman decoder's work,
about a clock a byte).  Fitted by least squares to the clocks of one core fed directly on
the 64 photos of the speed corpus (`dlforge bench device`'s reference run, 2026-12-02): mean
error 2.8 %, at most 7.9 %.  With pixels alone the error is 23 %, with pixels and bytes 15 %.
Only ratios between files matter to the host, so the constants need not follow later changes
of the core closely.

A core that decodes two files at once (``files_per_core`` 2, C-slowed) is two lanes to the
host, each a core of its own at half the clock: a lane's file advances every other clock
whether or not the other lane is busy, so the lanes' work adds up independently and the
same estimate serves, in the lane's own clocks (its clock counter counts them).  Against
the lanes' counters on the 64 photos (`dlforge bench device --cores 1 --contexts 2
--link-bytes 64`, 2026-12-06): scale 1.001, mean error 2.9 %, at most 8.0 %.
"""

from dlforge.rtl.jpeg.status import JpegDecodeError
from dlforge.rtl.jpeg.syntax import Marker, walk_segments

__all__ = ["decode_work"]

PER_PIXEL = 0.060
PER_SAMPLE = 0.083
PER_BYTE = 0.93

_SEQUENTIAL = (Marker.SOF0.value, Marker.SOF1.value)    # (plain ints: compared per segment)
#: The segments the walk only checks: all but the frame headers read here and SOS
_UNREAD = frozenset(range(256)) - {*_SEQUENTIAL, Marker.SOS}


def decode_work(data):
    """A core's clocks for ``data``, estimated (its size alone where no frame header is found
    before the first scan)."""
    n = len(data)
    try:
        for marker, offset, length in walk_segments(data, skip=_UNREAD):
            # (a frame header that holds its component count and its components)
            if marker in _SEQUENTIAL and length >= 8 and length >= 8 + 3 * data[offset + 9]:
                height = data[offset + 5] << 8 | data[offset + 6]
                width = data[offset + 7] << 8 | data[offset + 8]
                h_max = v_max = 1
                blocks = 0
                for k in range(offset + 11, offset + 11 + 3 * data[offset + 9], 3):
                    h, v = data[k] >> 4, data[k] & 15
                    if h > h_max:
                        h_max = h
                    if v > v_max:
                        v_max = v
                    blocks += h * v
                per_pixel = blocks / (h_max * v_max)
                pixels = width * height
                return PER_PIXEL * pixels + PER_SAMPLE * per_pixel * pixels + PER_BYTE * n
            if not length:                   # a marker that cannot stand before the scan
                break
    except JpegDecodeError:                  # not JPEG, or its headers broken: the size alone
        pass
    return PER_BYTE * n
