"""The host's decode of the files the device does not decode, with Pillow's pixels as the
reference: what torchvision's ``pil_loader`` (``Image.open(f).convert("RGB")``) gives, since
that is what models are trained on.

libjpeg-turbo decodes first, strictly (simplejpeg fails where libjpeg only warns, so its
message names the damage: "Corrupt JPEG data: 5 extraneous bytes before marker 0xdb").  A
file it decodes without a word is clean, and its pixels are Pillow's (the same libjpeg-turbo,
islow IDCT, fancy upsampling), except for four-component files (CMYK, YCCK), whose colour
conversion is Pillow's own: those take Pillow's pixels.  A file it does not decode is
Pillow's to judge, by the policy ``on_damage``:

* ``"pillow"`` (the default): Pillow decodes it leniently, as the file's damage allows, and
  the result says what was tolerated; where Pillow refuses it too, it is an error with both
  reasons;
* ``"error"``: a file Pillow would decode only leniently is an error that says so.

Fast upsampling is libjpeg-turbo's; Pillow has only fancy upsampling, so a damaged file asked
for with fast upsampling gets Pillow's (fancy) pixels, and its result says so.
"""

import io
import warnings

import numpy as np

from dlforge.host.jpeg.scaled_decode import scaled_decode, scaled_size

__all__ = ["ON_DAMAGE", "DamagedFile", "pillow_decode", "host_decode"]

#: What to do with a file that decodes only leniently (see the module's docstring).
ON_DAMAGE = ("pillow", "error")
#: The formats Pillow opens a JPEG file as (a multi-picture file: its first picture).
_JPEG_FORMATS = ("JPEG", "MPO")


class DamagedFile(ValueError):
    """A file refused for its damage (``on_damage="error"``) that Pillow would decode;
    ``damage`` says what is wrong with it ("corrupt data: ...")."""

    def __init__(self, message, damage):
        super().__init__(message)
        self.damage = damage


def pillow_decode(data, scale=1):
    """(H, W, 3) uint8 pixels of ``data`` as Pillow decodes it (``Image.open`` and
    ``convert("RGB")``; at 1/``scale`` through ``Image.draft``, libjpeg-turbo's DCT-domain
    downscale), or ValueError with Pillow's reason for refusing it."""
    from PIL import Image
    try:
        with warnings.catch_warnings():
            # (pil_loader decodes a very large image with this warning, not an error)
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                if image.format not in _JPEG_FORMATS:
                    raise ValueError(f"not a JPEG file (Pillow opens it as {image.format})")
                if scale > 1:
                    width, height = image.size
                    image.draft(image.mode, (max(width // scale, 1), max(height // scale, 1)))
                    if image.size != scaled_size(width, height, scale):
                        raise ValueError(f"Pillow's draft gives {image.size[0]}x"
                                         f"{image.size[1]}, not the 1/{scale} scale")
                return np.asarray(image.convert("RGB"))
    except (OSError, SyntaxError, Image.DecompressionBombError) as exc:
        raise ValueError(f"Pillow: {exc}") from None


def _libjpeg_words(error):
    """libjpeg's message of a strict decode's error, without the wrappers' prefixes."""
    text = str(error)
    for prefix in ("libjpeg-turbo: ", "Corrupt JPEG data: "):
        if text.startswith(prefix):
            text = text[len(prefix):]
    return text


def host_decode(data, scale=1, fast=False, on_damage="pillow", pillow_colour=False):
    """``(pixels, damage)`` of ``data`` decoded on the host at 1/``scale``: ``damage`` is
    None for a clean file, else what was tolerated ("corrupt data tolerated: ...").
    ``pillow_colour``: the file's colour conversion is Pillow's (four components).  Raises
    ValueError with the reasons where Pillow refuses the file, or :class:`DamagedFile` where,
    with ``on_damage="error"``, it would decode it only leniently."""
    if on_damage not in ON_DAMAGE:
        raise ValueError(f"on_damage must be one of {', '.join(ON_DAMAGE)}, not {on_damage!r}")
    try:
        pixels = scaled_decode(data, scale, fast)
    except ValueError as strict:
        words = _libjpeg_words(strict)
        try:
            pixels = pillow_decode(data, scale)
        except ValueError as refused:
            raise ValueError(f"libjpeg-turbo: {words}; {refused}") from None
        if on_damage == "error":
            raise DamagedFile(f"damaged (on_damage='error'): libjpeg-turbo: {words}; Pillow "
                              "would decode it leniently", f"corrupt data: {words}") from None
        tolerated = f"corrupt data tolerated: {words}"
        return pixels, tolerated + (" (Pillow's decode: fancy upsampling)" if fast else "")
    if pillow_colour:
        pixels = pillow_decode(data, scale)
    return pixels, None
