"""Device strings, parsed here and nowhere else: ``cpu``, ``sim``, ``sim:dma``,
``tcp:HOST:PORT``, ``serial:PORT[@BAUD]``, ``xdma:PATH``, ``dma:PATH`` (the last four with an
optional ``?link_bytes=N``), and the transports the last four open.

Apart from the transports themselves so that nothing imports in a circle: the opener needs
every kind of transport, the DMA transport needs :mod:`.frame_link`, which needs
:mod:`.transport`'s errors.
"""

from dataclasses import dataclass, field

from dlforge.host.link.dma import DmaTransport
from dlforge.host.link.transport import DEFAULT_BAUD, SerialTransport, TcpTransport, XdmaTransport

__all__ = ["DeviceString", "parse_device", "open_transport", "split_options", "DEVICE_KINDS"]

#: every kind of device string
DEVICE_KINDS = ("cpu", "sim", "tcp", "serial", "xdma", "dma")
_USAGE = "use sim, sim:dma, cpu, tcp:HOST:PORT, serial:PORT[@BAUD], xdma:PATH or dma:PATH"


@dataclass(frozen=True)
class DeviceString:
    """A parsed device string: ``kind`` (one of DEVICE_KINDS), ``target`` (what follows the
    kind: a sim board's link ``tcp`` or ``dma``, HOST:PORT, PORT[@BAUD] or PATH; empty for
    cpu), ``options`` (``link_bytes``)."""
    kind: str
    target: str = ""
    options: dict = field(default_factory=dict, compare=False)

    @property
    def is_transport(self):
        """True when the string names a link to an existing device (not cpu, not sim)."""
        return self.kind not in ("cpu", "sim")


def parse_device(spec):
    """The :class:`DeviceString` of ``spec``; ValueError naming the accepted forms."""
    device, options = split_options(spec)
    kind, _, rest = device.partition(":")
    if kind == "cpu" and not rest and not options:
        return DeviceString("cpu")
    if kind == "sim" and rest in ("", "tcp", "dma") and not options:
        return DeviceString("sim", rest or "tcp")
    if ((kind == "tcp" and rest.count(":") == 1) or (kind in ("serial", "xdma", "dma") and rest)):
        return DeviceString(kind, rest, options)
    raise ValueError(f"unknown device {spec!r}: {_USAGE}")


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
    parsed = parse_device(spec)
    if not parsed.is_transport:
        raise ValueError(f"{spec!r} is not a link to a device: use tcp:HOST:PORT, "
                         "serial:PORT[@BAUD], xdma:PATH or dma:PATH")
    transport = _open(parsed, timeout)
    options = parsed.options
    transport.link_bytes = options.get("link_bytes", 1)
    if options:
        transport.name += f"?link_bytes={transport.link_bytes}"
    return transport


def _open(parsed, timeout):
    kind, rest = parsed.kind, parsed.target
    if kind == "tcp":
        host, port = rest.split(":")
        return TcpTransport(host, port, timeout)
    if kind == "serial":
        port, _, baud = rest.partition("@")
        return SerialTransport(port, int(baud) if baud else DEFAULT_BAUD)
    if kind == "xdma":
        return XdmaTransport(rest)
    return DmaTransport(rest)
