"""The errors of a link to a device, in a file of their own so that every layer of the link
(transports, frames, DMA, the board) raises and catches the same classes."""

__all__ = ["LinkError", "DeviceUnreachable", "DeviceGone", "LinkTimeout"]


class LinkError(ConnectionError):
    """Something is wrong with the link to a device."""


class DeviceUnreachable(LinkError):
    """The device cannot be opened or does not answer."""


class DeviceGone(LinkError):
    """The link closed under a running transfer."""


class LinkTimeout(LinkError, TimeoutError):
    """No answer in time."""
