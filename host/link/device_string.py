"""Device strings (``tcp:HOST:PORT``, ``serial:PORT[@BAUD]``, ``xdma:PATH``, ``dma:PATH``, each
with an optional ``?link_bytes=N``) to open transports.

Apart from the transports themselves so that nothing imports in a circle: the opener needs
every kind of transport, the DMA transport needs :mod:`.frame_link`, which needs
:mod:`.transport`'s errors.
"""

from .dma import DmaTransport
from .transport import DEFAULT_BAUD, SerialTransport, TcpTransport, XdmaTransport

__all__ = ["open_transport", "split_options"]


def split_options(spec):
    """``(device, options)`` of a device string with options after ``?``
    (``tcp:127.0.0.1:5000?link_bytes=32``: a wide link's width, which the host must know
    before its first frame)."""
    device, _, query = str(spec).partition("?")
    options = {}
    for item in filter(None, query.split("&")):
        key, _, value = item.partition("=")
        if key != "link_bytes" or not value.isdigit():
            raise ValueError(f"unknown device option {item!r} in {spec!r}: use link_bytes=N")
        options[key] = int(value)
    return device, options


def open_transport(spec, timeout=10.0):
    """A transport for ``tcp:HOST:PORT``, ``serial:PORT[@BAUD]``, ``xdma:PATH`` or
    ``dma:PATH``, each with an optional ``?link_bytes=N`` (its ``link_bytes``; default 1)."""
    device, options = split_options(spec)
    transport = _open(device, timeout)
    transport.link_bytes = options.get("link_bytes", 1)
    if options:
        transport.name += f"?link_bytes={transport.link_bytes}"
    return transport


def _open(spec, timeout):
    kind, _, rest = str(spec).partition(":")
    if kind == "tcp" and rest.count(":") == 1:
        host, port = rest.split(":")
        return TcpTransport(host, port, timeout)
    if kind == "serial" and rest:
        port, _, baud = rest.partition("@")
        return SerialTransport(port, int(baud) if baud else DEFAULT_BAUD)
    if kind == "xdma" and rest:
        return XdmaTransport(rest)
    if kind == "dma" and rest:
        return DmaTransport(rest)
    raise ValueError(f"unknown device {spec!r}: use sim, sim:dma, cpu, tcp:HOST:PORT, "
                     "serial:PORT[@BAUD], xdma:PATH or dma:PATH")
