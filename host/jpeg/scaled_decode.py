"""libjpeg-turbo's scaled decode (1/2, 1/4, 1/8: the DCT-domain downscale of Pillow's
``Image.draft`` and simplejpeg's ``min_width``/``min_height``) on the host.

The host's one call of libjpeg-turbo (at every scale, 1/1 included), strict (simplejpeg stops
where libjpeg only warns): the cpu device decodes with it, and so does the host's decode
(:mod:`dlforge.host.jpeg.host_decode`) of the files the device cannot take, and of scaled
decodes on a device whose cores were built without the reduced IDCTs (``Register.SCALES``; the default simulated board's cores have them, so there the
cores scale, ``rtl/jpeg/scaling.py``).  simplejpeg chooses the coarsest of
libjpeg-turbo's M/8 scales whose output is at least the size asked for, which is exactly
1/scale unless another M/8 gives the same size (images of a few pixels); those go through
the golden model, which is bit-exact to libjpeg-turbo's scaled decode
(tests/test_jpeg_model.py).
"""

__all__ = ["SCALES", "parse_scale", "scaled_size", "scaled_decode"]

#: The denominators of the scales a decode may ask for (1: no scaling).
SCALES = (1, 2, 4, 8)


def parse_scale(text):
    """``"1/2"`` (or ``"2"``, ``"1"``) -> 2; ValueError for a scale libjpeg-turbo's fast
    path does not have."""
    value = str(text).strip()
    denominator = value[2:] if value.startswith("1/") else value
    try:
        scale = int(denominator)
    except ValueError:
        scale = None
    if scale not in SCALES:
        raise ValueError(f"scale must be 1, 1/2, 1/4 or 1/8, not {text!r}")
    return scale


def scaled_size(width, height, scale):
    """The size of a ``width`` x ``height`` image decoded at 1/``scale`` (libjpeg-turbo's
    ``jpeg_calc_output_dimensions``: rounded up)."""
    return -(-width // scale), -(-height // scale)


def _ambiguous(width, height, scale):
    def size(m):
        return -(-width * m // 8), -(-height * m // 8)
    return any(size(m) == size(8 // scale) for m in range(1, 9) if m != 8 // scale)


def scaled_decode(data, scale, fast=False):
    """(H, W, 3) uint8 pixels of ``data`` decoded at 1/``scale`` by libjpeg-turbo (islow
    IDCT; fancy upsampling, or fast with ``fast``), or ValueError with libjpeg's message."""
    import simplejpeg
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, not {scale!r}")
    data = bytes(data)
    try:
        if scale == 1:
            return simplejpeg.decode_jpeg(data, colorspace="RGB", fastdct=False,
                                          fastupsample=fast)
        width, height = simplejpeg.decode_jpeg_header(data)[1::-1]
        if scale == 1 or not _ambiguous(width, height, scale):
            want_w, want_h = scaled_size(width, height, scale)
            options = {"min_width": want_w, "min_height": want_h} if scale > 1 else {}
            return simplejpeg.decode_jpeg(data, colorspace="RGB", fastdct=False,
                                          fastupsample=fast, **options)
    except (ValueError, RuntimeError) as exc:
        raise ValueError(f"libjpeg-turbo: {exc}") from None
    from dlforge.sim.models.jpeg_model import JpegDecodeError, decode
    try:
        return decode(data, "fast" if fast else "fancy", scale=scale).pixels
    except JpegDecodeError as exc:
        raise ValueError(f"{exc}") from None
