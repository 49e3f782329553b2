"""Device strings: the kind of transport and its options, or a clear error."""

import pytest

from dlforge.host.link.device_string import DeviceString, open_transport, parse_device, split_options


def test_unknown_device_strings():
    for spec in ("gpu", "tcp:localhost", "serial:", "usb:1"):
        with pytest.raises(ValueError, match="unknown device"):
            open_transport(spec)


def test_link_width_option():
    assert split_options("tcp:127.0.0.1:5000?link_bytes=32") == ("tcp:127.0.0.1:5000",
                                                                 {"link_bytes": 32})
    assert split_options("serial:/dev/ttyUSB0") == ("serial:/dev/ttyUSB0", {})
    for spec in ("tcp:h:1?speed=9", "tcp:h:1?link_bytes=x"):
        with pytest.raises(ValueError, match="unknown device option"):
            split_options(spec)


def test_every_kind_parses_in_one_place():
    assert parse_device("cpu") == DeviceString("cpu")
    assert parse_device("sim") == DeviceString("sim", "tcp")
    assert parse_device("sim:dma") == DeviceString("sim", "dma")
    tcp = parse_device("tcp:127.0.0.1:5000?link_bytes=32")
    assert (tcp.kind, tcp.target, tcp.options) == ("tcp", "127.0.0.1:5000", {"link_bytes": 32})
    assert parse_device("serial:/dev/ttyUSB0@921600").target == "/dev/ttyUSB0@921600"
    assert parse_device("xdma:/dev/xdma0").kind == "xdma"
    assert parse_device("dma:/tmp/board").is_transport
    assert not parse_device("sim:dma").is_transport
    for spec in ("sim:pcie", "cpu:1", "sim?link_bytes=32", "dma:", "xdma"):
        with pytest.raises(ValueError, match="unknown device"):
            parse_device(spec)


def test_open_transport_refuses_cpu_and_sim():
    for spec in ("cpu", "sim", "sim:dma"):
        with pytest.raises(ValueError, match="not a link to a device"):
            open_transport(spec)
