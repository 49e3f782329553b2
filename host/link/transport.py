"""Byte transports to a device: one interface, one class per kind of link.

The host's link code (:mod:`dlforge.host.link.frame_link`) is written once against
:class:`Transport`: non-blocking ``send``/``recv_into`` on file descriptors and ``wait`` for
readiness, so it can keep writing requests and reading replies at the same time (a device
whose replies are not read stops reading requests).  The same classes reach a board and the
simulated board (device strings: :mod:`dlforge.host.link.device_string`):

* :class:`TcpTransport` ``tcp:HOST:PORT`` — the simulated board's socket;
* :class:`SerialTransport` ``serial:PORT[@BAUD]`` — pyserial (a UART board, or the
  simulated board's pseudo-terminal);
* :class:`XdmaTransport` ``xdma:PATH`` — the XDMA driver's ``PATH_h2c_0`` (host to card) and
  ``PATH_c2h_0`` (card to host) files, which block and cannot be polled: a reader and a
  writer thread make the calls; the simulated board offers the same two names as named
  pipes.

``reliable`` says whether the link below already guarantees the bytes (TCP, PCIe's link
CRC): the host then skips the CRC-32 of reply payloads, which would cost more CPU than the
rest of the host path together.  Headers are always checked.

``flow_control`` says whether the device can hold the host back: a socket or a DMA engine
takes bytes only as fast as the device reads them, but a UART board has no flow control
towards the host (no CTS wired) and drops what arrives while its receive FIFO is full.  On
such a link the host's :class:`~dlforge.host.link.frame_link.FrameLink` paces its requests
(see docs/runtime.md).
"""

import errno
import os
import select
import socket

from dlforge.host.link.errors import DeviceGone, DeviceUnreachable
from dlforge.host.link.frame_link import FrameLink
from dlforge.rtl.link.protocol import BAUD

__all__ = ["Transport", "TcpTransport", "SerialTransport", "XdmaTransport", "DEFAULT_BAUD"]

DEFAULT_BAUD = BAUD                      # defined once, with the boards' UARTs


class Transport:
    """A byte link to a device (see the module's docstring)."""
    name = "transport"
    reliable = False
    flow_control = True     # the device holds the host back when it is busy (False: pace)
    rfd = wfd = -1

    def send(self, data):
        """Write what the link takes now; return the number of bytes written (maybe 0)."""
        try:
            return os.write(self.wfd, data)
        except BlockingIOError:
            return 0
        except OSError as exc:
            raise DeviceGone(f"{self.name}: the link closed while writing ({exc.strerror})") \
                from exc

    eof_on_zero = True      # a read of 0 bytes means the other side closed

    def recv_into(self, buffer):
        """Read what is there into ``buffer``; return the count (0: nothing now)."""
        try:
            n = os.readv(self.rfd, [buffer])
        except BlockingIOError:
            return 0
        except OSError as exc:
            if exc.errno == errno.EIO:       # a pty whose other side has gone
                raise DeviceGone(f"{self.name}: the device has gone (I/O error)") from exc
            raise DeviceGone(f"{self.name}: the link closed while reading ({exc.strerror})") \
                from exc
        if n == 0 and self.eof_on_zero:
            raise DeviceGone(f"{self.name}: the device closed the link")
        return n

    def wait(self, want_write, timeout):
        """Block until readable (or writable, if asked) or ``timeout`` seconds pass."""
        poll = select.poll()
        if self.rfd == self.wfd:
            poll.register(self.rfd, select.POLLIN | (select.POLLOUT if want_write else 0))
        else:
            poll.register(self.rfd, select.POLLIN)
            if want_write:
                poll.register(self.wfd, select.POLLOUT)
        return bool(poll.poll(max(0, int(timeout * 1000))))

    def frame_link(self, on_frame, on_placed=None, verify=None, pace=None):
        """The frame layer over this transport, for the board: the host frames files and
        reads replies (a DMA transport overrides it: its engine frames files and places
        pixels, ``on_placed``)."""
        return FrameLink(self, on_frame, verify=verify, pace=pace)

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<{type(self).__name__} {self.name}>"


class TcpTransport(Transport):
    """A TCP socket: the simulated board's link (``tcp:HOST:PORT``), reliable, with flow
    control."""

    reliable = True
    flow_control = True

    def __init__(self, host, port, timeout=10.0):
        self.name = f"tcp:{host}:{port}"
        try:
            self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        except OSError as exc:
            raise DeviceUnreachable(f"no device at {self.name}: {exc.strerror or exc} "
                                    "(is `dlforge sim-board` running there?)") from exc
        self.sock.setblocking(False)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.rfd = self.wfd = self.sock.fileno()

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None


class SerialTransport(Transport):
    """A UART (``serial:PORT[@BAUD]``): a board's link, or the simulated board's pty;
    no flow control towards the device, so the frame link paces its requests."""

    reliable = False
    flow_control = False    # a board's UART: no CTS, its FIFO overflows if the host runs ahead
    eof_on_zero = False     # a raw tty with VMIN=0 reads 0 bytes when there is nothing yet

    def __init__(self, port, baud=DEFAULT_BAUD):
        import serial
        self.name = f"serial:{port}@{baud}"
        try:
            self.port = serial.Serial(port, baud, timeout=0, write_timeout=0)
        except (serial.SerialException, OSError) as exc:
            self.port = None
            raise DeviceUnreachable(f"cannot open {self.name}: {exc}") from exc
        self.rfd = self.wfd = self.port.fileno()
        os.set_blocking(self.rfd, False)

    def close(self):
        if self.port is not None:
            self.port.close()
            self.port = None


class XdmaTransport(Transport):
    """Xilinx XDMA's stream devices, with the driver's semantics: ``PATH_h2c_0`` and
    ``PATH_c2h_0`` implement no poll, and their reads and writes block (a read returns at
    most what was asked, once the card has sent something).  So a reader thread and a writer
    thread make the blocking calls, and ``send``/``recv_into``/``wait`` work on their queues:
    the link code above stays the one every transport has.  The writer holds at most
    ``queue_bytes`` not yet written (``send`` takes less when it is full: the device's flow
    control reaches the host).  A thread blocked in a read when the transport closes ends
    when the device side closes (the driver's read cannot be interrupted)."""
    reliable = True
    flow_control = True
    READ_CHUNK = 1 << 20

    def __init__(self, path, queue_bytes=4 << 20):
        import threading
        from collections import deque
        self.name = f"xdma:{path}"
        self.rfd = self.wfd = -1
        h2c, c2h = f"{path}_h2c_0", f"{path}_c2h_0"
        for f in (h2c, c2h):
            if not os.path.exists(f):
                raise DeviceUnreachable(f"no device at {self.name}: {f} does not exist "
                                        "(is the XDMA driver loaded, or the simulated board "
                                        "running with --link fifo?)")
        try:
            # (O_NONBLOCK only to open: a named pipe with nothing at the other end does not
            # make the open hang; the driver's files ignore it)
            self.wfd = os.open(h2c, os.O_WRONLY | os.O_NONBLOCK)
            self.rfd = os.open(c2h, os.O_RDONLY | os.O_NONBLOCK)
            os.set_blocking(self.wfd, True)
            os.set_blocking(self.rfd, True)
        except OSError as exc:
            self.close()
            raise DeviceUnreachable(f"cannot open {self.name}: {exc.strerror} "
                                    "(nothing serves the other end)") from exc
        self.queue_bytes = queue_bytes
        self._cond = threading.Condition()
        self._rx, self._tx = deque(), deque()
        self._tx_bytes = 0
        self._error = None
        self._closed = False
        self._threads = [threading.Thread(target=f, name=f"{self.name} {f.__name__}",
                                          daemon=True) for f in (self._reader, self._writer)]
        for t in self._threads:
            t.start()

    def _fail(self, error):
        with self._cond:
            self._error = self._error or error
            self._cond.notify_all()

    def _reader(self):
        rfd = self.rfd
        while not self._closed:
            try:
                data = os.read(rfd, self.READ_CHUNK)        # blocks; at most what was asked
            except OSError as exc:
                return self._fail(f"the link closed while reading ({exc.strerror})")
            if not data:
                return self._fail("the device closed the link")
            with self._cond:
                self._rx.append(memoryview(data))
                self._cond.notify_all()

    def _writer(self):
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._tx or self._closed)
                if self._closed:
                    return
                chunk = self._tx[0]
            try:
                while chunk:                                  # blocks while the card is full
                    chunk = chunk[os.write(self.wfd, chunk):]
            except OSError as exc:
                return self._fail(f"the link closed while writing ({exc.strerror})")
            with self._cond:
                self._tx_bytes -= len(self._tx.popleft())
                self._cond.notify_all()

    def send(self, data):
        with self._cond:
            if self._error:
                raise DeviceGone(f"{self.name}: {self._error}")
            n = min(len(data), self.queue_bytes - self._tx_bytes)
            if n <= 0:
                return 0
            self._tx.append(bytes(data[:n]))
            self._tx_bytes += n
            self._cond.notify_all()
            return n

    def recv_into(self, buffer):
        with self._cond:
            n, room = 0, len(buffer)
            while self._rx and n < room:
                head = self._rx[0]
                k = min(len(head), room - n)
                buffer[n:n + k] = head[:k]
                n += k
                if k == len(head):
                    self._rx.popleft()
                else:
                    self._rx[0] = head[k:]
            if not n and self._error:
                raise DeviceGone(f"{self.name}: {self._error}")
            return n

    def wait(self, want_write, timeout):
        with self._cond:
            return self._cond.wait_for(
                lambda: self._rx or self._error or (want_write and self._tx_bytes
                                                    < self.queue_bytes), max(0.0, timeout))

    def close(self):
        cond = getattr(self, "_cond", None)
        if cond is not None:
            with cond:
                self._closed = True
                cond.notify_all()
        for fd in (self.rfd, self.wfd):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.rfd = self.wfd = -1

