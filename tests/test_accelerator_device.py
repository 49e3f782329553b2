"""The host's handle on an accelerator, against a fake device in pure Python
(tests/fake_device.py): the link width it frames for, and what it checks on connecting."""

import pytest

from dlforge.host.device.accelerator import AcceleratorDevice
from dlforge.host.link.errors import DeviceUnreachable
from dlforge.rtl.link.protocol import VERSION, Register

from fake_device import FakeDevice, decode_all


def test_link_width_from_the_transport_or_the_caller_and_checked_against_the_device():
    with pytest.raises(DeviceUnreachable, match="8-byte link .* link_bytes=8"):
        AcceleratorDevice(FakeDevice(link_bytes=4, report_width=8), timeout=1.0)
    # a device from before LINK_WIDTH (0.1): bytes, no credit reported, files back to back
    old = FakeDevice(cores=2, link_bytes=1, report_width=0, max_payload=1024,
                     version=VERSION & ~0xFFFF | 1)
    old.regs[Register.INPUT_FIFO] = 0
    accelerator = AcceleratorDevice(old, timeout=1.0)
    assert accelerator.link_bytes == 1 and accelerator.input_fifo == 0
    decode_all(accelerator, [b"z" * 3000] * 4)
    tags = [tag for _, _, tag in old.log]
    assert tags == sorted(tags) and old.violations == []
    device = FakeDevice(link_bytes=16)
    del device.link_bytes                               # the transport does not say
    accelerator = AcceleratorDevice(device, timeout=1.0, link_bytes=16)
    assert accelerator.link.link_bytes == 16
    with pytest.raises(ValueError, match="link_bytes"):
        AcceleratorDevice(FakeDevice(), link_bytes=3)

