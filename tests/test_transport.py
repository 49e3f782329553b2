"""Transports: clear errors when a device cannot be reached, bytes both ways when it can."""

import os
import select
import socket

import pytest

from dlforge.host.link.device_string import open_transport
from dlforge.host.link.errors import DeviceGone, DeviceUnreachable
from dlforge.host.link.transport import TcpTransport, XdmaTransport


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_nothing_listening():
    port = _free_port()
    with pytest.raises(DeviceUnreachable, match=f"no device at tcp:127.0.0.1:{port}"):
        open_transport(f"tcp:127.0.0.1:{port}", timeout=2)


def test_missing_serial_port(tmp_path):
    with pytest.raises(DeviceUnreachable, match="cannot open serial:"):
        open_transport(f"serial:{tmp_path}/ttyUSB9@115200")


def test_missing_xdma_device(tmp_path):
    with pytest.raises(DeviceUnreachable, match="h2c_0 does not exist"):
        open_transport(f"xdma:{tmp_path}/xdma0")


def test_xdma_pipes_without_a_device(tmp_path):
    base = tmp_path / "card"
    os.mkfifo(f"{base}_h2c_0")
    os.mkfifo(f"{base}_c2h_0")
    with pytest.raises(DeviceUnreachable, match="nothing serves the other end"):
        XdmaTransport(str(base))


def test_xdma_pipes_carry_bytes(tmp_path):
    base = tmp_path / "card"
    os.mkfifo(f"{base}_h2c_0")
    os.mkfifo(f"{base}_c2h_0")
    # the card's side, as the simulated board opens it
    card_in = os.open(f"{base}_h2c_0", os.O_RDWR | os.O_NONBLOCK)
    card_out = os.open(f"{base}_c2h_0", os.O_RDWR | os.O_NONBLOCK)
    try:
        with XdmaTransport(str(base)) as t:
            assert t.reliable
            assert t.send(b"abc") == 3
            # (the writer thread writes it: wait on the card's side, as its DMA would)
            assert select.select([card_in], [], [], 5.0)[0]
            assert os.read(card_in, 10) == b"abc"
            os.write(card_out, b"xyz")
            assert t.wait(False, 2.0)
            buf = bytearray(8)
            assert t.recv_into(memoryview(buf)) == 3 and buf[:3] == b"xyz"
            assert t.recv_into(memoryview(buf)) == 0          # nothing now: not an error
    finally:
        os.close(card_in)
        os.close(card_out)


def test_tcp_round_trip_and_a_device_that_goes_away():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        t = open_transport(f"tcp:127.0.0.1:{port}")
        assert isinstance(t, TcpTransport) and t.reliable
        peer, _ = server.accept()
        with peer:
            assert t.send(b"ping") == 4
            assert peer.recv(10) == b"ping"
            peer.sendall(b"pong")
            assert t.wait(False, 2.0)
            buf = bytearray(8)
            assert t.recv_into(memoryview(buf)) == 4
        assert t.wait(False, 2.0)
        with pytest.raises(DeviceGone, match="closed the link"):
            t.recv_into(memoryview(buf))
        t.close()


def test_only_serial_links_lack_flow_control():
    from dlforge.host.link.transport import SerialTransport, Transport
    assert Transport.flow_control and TcpTransport.flow_control and XdmaTransport.flow_control
    assert not SerialTransport.flow_control          # a board's UART: no CTS wired


def test_xdma_threads_move_more_than_a_pipe_holds_and_never_poll(tmp_path, monkeypatch):
    """The driver's files block and cannot be polled: a megabyte each way through pipes of
    64 KiB, with poll and select unavailable to the transport."""
    import threading
    base = tmp_path / "card"
    os.mkfifo(f"{base}_h2c_0")
    os.mkfifo(f"{base}_c2h_0")
    card_in = os.open(f"{base}_h2c_0", os.O_RDWR)
    card_out = os.open(f"{base}_c2h_0", os.O_RDWR)
    payload = os.urandom(1 << 20)
    got_by_card = bytearray()

    def card():                         # echoes what it reads, as blocking calls
        while len(got_by_card) < len(payload):
            data = os.read(card_in, 1 << 16)
            got_by_card.extend(data)
            os.write(card_out, data)

    def forbidden(*args, **kwargs):
        raise AssertionError("the XDMA transport polled")

    echo = threading.Thread(target=card, daemon=True)
    echo.start()
    try:
        with XdmaTransport(str(base), queue_bytes=256 << 10) as t:
            monkeypatch.setattr(select, "poll", forbidden)
            monkeypatch.setattr(select, "select", forbidden)
            sent, back = 0, bytearray()
            buf = memoryview(bytearray(100_000))
            while len(back) < len(payload):
                if sent < len(payload):
                    sent += t.send(memoryview(payload)[sent:])
                n = t.recv_into(buf)
                back += buf[:n]
                if not n:
                    t.wait(sent < len(payload), 1.0)
            assert bytes(back) == payload and bytes(got_by_card) == payload
    finally:
        echo.join(5)
        os.close(card_in)
        os.close(card_out)
