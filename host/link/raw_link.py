"""Raw frames to a device: what tests and `dlforge bench sim-board` use to look at exactly
what a board sends, with no recovery, no registers and no reordering (the runtime's link is
:mod:`dlforge.host.link.frame_link`)."""

import time

from dlforge.host.link.device_string import open_transport
from dlforge.host.link.frame_parser import FrameDecoder

__all__ = ["RawFrameLink", "connect"]


class RawFrameLink:
    """Raw frames to a device string over the host runtime's transports
    (:func:`dlforge.host.link.device_string.open_transport`): ``write``, ``read`` (with a timeout),
    ``exchange``, ``close``.  No recovery, no registers: the tests and the benchmark look at
    what the board itself sends."""

    def __init__(self, device, timeout=30.0):
        self.device = device
        self.transport = open_transport(device, timeout=timeout)
        self.link_bytes = getattr(self.transport, "link_bytes", 1)
        self._buffer = bytearray(1 << 20)

    def fileno(self):
        return self.transport.rfd

    def _read_some(self):
        n = self.transport.recv_into(memoryview(self._buffer))
        return bytes(self._buffer[:n]) if n else None

    def exchange(self, data=b"", until=None, timeout=60.0, decoder=None):
        """Write ``data`` while reading; return the frames read, once ``until(frames)`` is
        true (or at once when ``until`` is None and all is written).  ``decoder``: a
        FrameDecoder to keep across calls (its counters tell of damage)."""
        decoder = decoder if decoder is not None else FrameDecoder(max_length=1 << 20,
                                                                    link_bytes=self.link_bytes)
        frames = []
        pending = memoryview(bytes(data))
        deadline = time.monotonic() + timeout
        while True:
            if not pending and (until is None or until(frames)):
                return frames
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no complete answer from {self.device} in {timeout} s "
                                   f"({len(frames)} frames so far)")
            self.transport.wait(bool(pending), min(left, 1.0))
            if pending:
                pending = pending[self.transport.send(pending[:1 << 16]):]
            chunk = self._read_some()
            if chunk:
                frames += decoder.feed(chunk)

    def write(self, data, timeout=60.0):
        self.exchange(data, None, timeout)

    def read(self, timeout=0.0):
        """What has arrived within ``timeout`` seconds (b"" if nothing)."""
        if not self.transport.wait(False, timeout):
            return b""
        return self._read_some() or b""

    def close(self):
        self.transport.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def connect(device, timeout=30.0):
    """A :class:`RawFrameLink` to ``device`` (tcp:HOST:PORT, serial:/dev/pts/N, xdma:P)."""
    return RawFrameLink(device, timeout)
