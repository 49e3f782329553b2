"""What the decoder gateware is given for a JPEG file, and what it must produce.

Shared by the amaranth.sim tests and the cocotb testbenches, so all drive the blocks the same
way: the DHT and DQT segment bodies, the scan configuration beat, the scan's bytes, and the
model's coefficient blocks and decoded samples in scan order.
"""

import numpy as np

from dlforge.rtl.jpeg.huffman_decoder import MAX_COMPONENTS, ScanLayout
from dlforge.rtl.jpeg.idct_constants import ZIGZAG
from dlforge.rtl.jpeg.syntax import Marker, segment_body

from dlforge.sim.models.idct_model import idct_islow
from dlforge.sim.models.idct_reduced_model import idct_reduced
from dlforge.sim.models.jpeg_entropy import blocks_in_scan_order, decode_scan
from dlforge.sim.models.jpeg_model import component_sizes

__all__ = ["dht_bodies", "dqt_bodies", "scan_config", "scan_beat", "scan_bytes",
           "expected_blocks", "expected_samples", "expected_rows"]


def dht_bodies(data, headers):
    """The bodies (after the length) of the DHT segments before the scan."""
    return [segment_body(data, offset, length) for marker, offset, length in headers.segments
            if marker == Marker.DHT]


def dqt_bodies(data, headers):
    """The bodies of the DQT segments before the scan."""
    return [segment_body(data, offset, length) for marker, offset, length in headers.segments
            if marker == Marker.DQT]


def scan_config(headers):
    """The ScanLayout fields for the file's one scan."""
    def pad(values):
        values = list(values)
        return values + [0] * (MAX_COMPONENTS - len(values))

    comps = headers.components
    mcus_x, mcus_y = headers.mcu_grid
    return {"components": len(comps), "h": pad(c.h for c in comps), "v": pad(c.v for c in comps),
            "td": pad(c.td for c in comps), "ta": pad(c.ta for c in comps),
            "mcus": mcus_x * mcus_y, "restart_interval": headers.restart_interval}


def scan_beat(headers):
    """:func:`scan_config` as the integer a simulator port takes."""
    return ScanLayout.const(scan_config(headers)).as_value().value


def scan_bytes(data, headers):
    """Everything after the SOS header: the entropy-coded data and what follows it."""
    return data[headers.scan_start:]


def expected_blocks(data, headers):
    """The golden model's blocks, in the order the gateware emits them."""
    blocks, _ = decode_scan(data, headers)
    return blocks_in_scan_order(blocks, headers)


def expected_samples(data, headers):
    """The model's decoded 8x8 blocks (islow IDCT with the file's tables), scan order, flat."""
    blocks = expected_blocks(data, headers)
    natural = np.zeros((len(blocks), 64), dtype=np.int64)
    quant = np.zeros((len(blocks), 64), dtype=np.int64)
    for i, (comp, zz) in enumerate(blocks):
        natural[i, list(ZIGZAG)] = zz
        quant[i] = headers.quant[headers.components[comp].tq].reshape(64)
    return idct_islow(natural.reshape(-1, 8, 8), quant.reshape(-1, 8, 8)).reshape(-1)


def expected_rows(data, headers, scale=1):
    """The block rows the IDCT hands the raster stage, scan order: each a list of 8 samples,
    a block of IDCT size ``size`` giving ``size`` rows with its samples in the first
    ``size`` places (zeros after).  ``scale``: 1, 2, 4, 8 (a scaled decode's reduced IDCTs,
    each component at ``component_sizes``)."""
    sizes = component_sizes(headers, scale)
    rows = []
    for comp, zz in expected_blocks(data, headers):
        natural = np.zeros(64, dtype=np.int64)
        natural[list(ZIGZAG)] = zz
        quant = headers.quant[headers.components[comp].tq].reshape(8, 8)
        size = sizes[comp]
        block = idct_islow(natural.reshape(1, 8, 8), quant[None]) if size == 8 else \
            idct_reduced(natural.reshape(1, 8, 8), quant[None], size)
        for row in block.reshape(size, size):
            rows.append([int(v) for v in row] + [0] * (8 - size))
    return rows
