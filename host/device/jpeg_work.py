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
"""

__all__ = ["decode_work"]

PER_PIXEL = 0.060
PER_SAMPLE = 0.083
PER_BYTE = 0.93


def decode_work(data):
    """A core's clocks for ``data``, estimated (its size alone where no frame header is found
    before the first scan)."""
    n = len(data)
    pos = 2
    while pos + 4 <= n and data[pos] == 0xFF:
        marker = data[pos + 1]
        if marker == 0xFF:
            pos += 1
            continue
        length = data[pos + 2] << 8 | data[pos + 3]
        if marker in (0xC0, 0xC1) and pos + 10 + 3 * data[pos + 9] <= n:
            height = data[pos + 5] << 8 | data[pos + 6]
            width = data[pos + 7] << 8 | data[pos + 8]
            h_max = v_max = 1
            blocks = 0
            for k in range(pos + 11, pos + 11 + 3 * data[pos + 9], 3):
                h, v = data[k] >> 4, data[k] & 15
                if h > h_max:
                    h_max = h
                if v > v_max:
                    v_max = v
                blocks += h * v
            per_pixel = blocks / (h_max * v_max)
            pixels = width * height
            return PER_PIXEL * pixels + PER_SAMPLE * per_pixel * pixels + PER_BYTE * n
        if marker == 0xDA or length < 2:
            break
        pos += 2 + length
    return PER_BYTE * n
