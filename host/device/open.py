"""Device strings: every device the commands take (the brief's flow 4) opens here.


* ``sim`` — start a private simulated board (the accelerator top in Verilator) and talk to
  it over a local socket; it stops when the device is closed.  The default everywhere.
* ``sim:dma`` — the same board behind shared memory and a DMA engine model: the host
  neither frames files nor copies images (:mod:`dlforge.host.link.dma`).
* ``tcp:HOST:PORT`` — a simulated board started by hand (``dlforge sim-board``).
* ``dma:PATH`` — one started by hand with ``dlforge sim-board --link dma``.
* ``serial:PORT[@BAUD]`` — a UART-linked board, or a simulated board behind a pty.
* ``xdma:PATH`` — the XDMA driver's ``PATH_h2c_0`` / ``PATH_c2h_0`` character devices.
* ``cpu`` — no hardware: libjpeg-turbo and the convolution golden model.

A device decodes JPEG files with :meth:`Device.decode_jpegs`, results in submission order.
"""

from dlforge.host.device.base import Device
from dlforge.host.device.accelerator import AcceleratorDevice
from dlforge.host.device.cpu import CpuDevice
from dlforge.host.link.device_string import open_transport, parse_device

__all__ = ["open_device", "DEVICE_HELP"]

DEVICE_HELP = ("sim (a private simulated board, default), sim:dma (the same over shared "
               "memory and DMA), tcp:HOST:PORT, serial:PORT[@BAUD], xdma:PATH, dma:PATH, or cpu")


def open_device(spec="sim", **options):
    """A :class:`Device` for a device string (see the module's docstring)."""
    if isinstance(spec, Device):
        return spec
    parsed = parse_device(spec)
    if parsed.kind == "cpu":
        return CpuDevice()
    if parsed.kind == "sim":
        return AcceleratorDevice.simulated(spec, **options)
    transport = open_transport(spec, timeout=options.pop("connect_timeout", 10.0))
    return AcceleratorDevice(transport, **options)
