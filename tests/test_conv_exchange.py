"""The convolution engine's exchange (host/conv/exchange.py), against a fake device in pure
Python (tests/fake_device.py)."""

import pytest

from dlforge.host.conv.exchange import conv_exchange
from dlforge.host.device.accelerator import AcceleratorDevice
from dlforge.host.link.errors import DeviceGone

from fake_device import FakeDevice


def test_engine_reply_frames_are_numbered_and_a_lost_one_is_named():
    """The engine numbers its reply frames like the cores: results come back whole, and a
    frame lost on the way is reported as lost as soon as the rest is in, not as a silent
    device at the timeout."""
    device = FakeDevice(engine=True)
    accelerator = AcceleratorDevice(device, timeout=30.0)
    raw = bytes(range(256)) * 12                    # three frames of words at 1024 bytes
    want = b"".join(bytes(reversed(raw[i:i + 1024])) for i in range(0, len(raw), 1024))
    assert conv_exchange(accelerator, raw, len(raw)) == want
    assert conv_exchange(accelerator, raw, len(raw)) == want      # the numbers run on
    device.conv_lose = {device.conv_frames + 1}
    with pytest.raises(DeviceGone, match="reply frame was lost"):
        conv_exchange(accelerator, raw, len(raw))

