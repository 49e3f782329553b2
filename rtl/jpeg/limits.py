"""The JPEG decoder's image size limits, defined once for the gateware, the generator, the
golden model, the simulated board and the host.

*Defaults* (what a core is built with unless asked otherwise):

* ``DEFAULT_MAX_WIDTH`` = 4096: width is what a core's memory costs.  The raster stage holds
  MCU rows, not images: two 16-line luma slots and three 8-line slots per chroma component,
  each line ``max_width`` samples (``rtl/jpeg/raster.py``), 2.5 Mbit of block RAM per core at
  4096.  That covers 4K UHD (3840) and 12-megapixel camera photos (4000), and is what a core
  on the ULX3S's 85F part can afford (``boards/presets.py``).
* ``DEFAULT_MAX_HEIGHT`` = 65535: height costs nothing (the line buffers are reused row by
  row), so the default is JPEG's own limit, the SOF segment's 16-bit field.

*Hard limits* (what the marker parser accepts at all; ``rtl/jpeg/marker_parser.py``):

* ``LIMIT_MAX_WIDTH`` = 8 * 1023 = 8184: the frame's MCU count across is 10 bits
  (``FrameLayout.mcux``) and an MCU is at least 8 pixels wide.  A whole core also needs a
  multiple of 16 (one 4:2:0 MCU) for its raster stage: 8176 at most.
* ``LIMIT_MAX_HEIGHT`` = 65535: the SOF field again (``FrameLayout.mcuy``, 14 bits, holds the
  8192 MCU rows of the tallest image).
"""

__all__ = ["DEFAULT_MAX_WIDTH", "DEFAULT_MAX_HEIGHT", "LIMIT_MAX_WIDTH", "LIMIT_MAX_HEIGHT"]

DEFAULT_MAX_WIDTH = 4096
DEFAULT_MAX_HEIGHT = 65535
LIMIT_MAX_WIDTH = 8 * 1023
LIMIT_MAX_HEIGHT = 65535
