"""Device strings: the kind of transport and its options, or a clear error."""

import pytest

from dlforge.host.link.device_string import open_transport, split_options


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
