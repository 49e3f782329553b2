"""The JPEG scheduler's core choice, credit, interleaving and recovery, against a fake device
in pure Python (tests/fake_device.py): the device checks every rule as the frames arrive."""

import random

import numpy as np
import pytest

from dlforge.host.device.accelerator import AcceleratorDevice
from dlforge.rtl.link.protocol import CORE_SHIFT, LINK_WIDTHS, REQUEST_FAST, Opcode

from fake_device import FakeDevice, decode_all, fake_pixels


def _files(rng, count, sizes=(100, 5000)):
    return [rng.randbytes(rng.randrange(*sizes)) for _ in range(count)]


@pytest.mark.parametrize("w", LINK_WIDTHS)
def test_files_spread_over_the_cores_within_their_credit(w):
    rng = random.Random(w)
    device = FakeDevice(cores=3, input_fifo=6000, link_bytes=w)
    accelerator = AcceleratorDevice(device, timeout=2.0)
    assert accelerator.info()["link_bytes"] == w and accelerator.info()["input_fifo"] == 6000
    files = _files(rng, 40) + [rng.randbytes(9000)] + _files(rng, 5)    # one above the FIFO
    decode_all(accelerator, files)
    assert device.violations == []
    cores = {device.files[tag] for tag in device.files}
    assert cores == {0, 1, 2}
    assert max(device.peak) <= 9000 + w and sorted(device.peak)[0] <= 6000
    scheduler = accelerator.jpeg_scheduler
    assert scheduler._outstanding == [0, 0, 0] and not scheduler.attempts


def test_the_first_files_reach_every_core_early_and_the_least_loaded_core_gets_the_next():
    device = FakeDevice(cores=3, input_fifo=1 << 20, max_payload=1024)
    accelerator = AcceleratorDevice(device, timeout=2.0)
    files = [bytes([n]) * 4000 for n in range(3)] + [bytes([9]) * 100]
    decode_all(accelerator, files, fast=True)
    # four chunks each: the first three frames go to three different cores
    first = device.log[:3]
    assert sorted(core for _, core, _ in first) == [0, 1, 2]
    assert len({tag for _, _, tag in first}) == 3
    # the small fourth file went to a core with the fewest bytes outstanding: all equal,
    # so the first; and after its own file's frames, in order
    tags = {device.log[0][2] + n: n for n in range(4)}
    per_core = {}
    for _, core, tag in device.log:
        per_core.setdefault(core, []).append(tags[tag])
    assert [list(dict.fromkeys(v)) for _, v in sorted(per_core.items())] == [[0, 3], [1], [2]]
    assert device.violations == []


def test_fast_upsampling_and_the_core_share_the_status_byte():
    device = FakeDevice(cores=2, input_fifo=1 << 20)
    accelerator = AcceleratorDevice(device, timeout=2.0)
    seen = []
    original = device._jpeg

    def spy(f):
        seen.append(f.status)
        original(f)
    device._jpeg = spy
    decode_all(accelerator, [b"x" * 10, b"y" * 10], fast=True)
    assert sorted(seen) == [REQUEST_FAST, REQUEST_FAST | 1 << CORE_SHIFT]


def test_a_file_larger_than_the_fifo_waits_for_an_idle_core():
    device = FakeDevice(cores=2, input_fifo=3000, max_payload=1024)
    accelerator = AcceleratorDevice(device, timeout=2.0)
    files = [b"a" * 2500, b"b" * 2500, b"c" * 8000, b"d" * 100]
    decode_all(accelerator, files)
    assert device.violations == []
    # the big file was alone in its core
    assert max(device.peak) == 8000


@pytest.mark.parametrize("w", [1, 16])
@pytest.mark.parametrize("refused", [0, 3, 5, 9, 14])
def test_a_refused_frame_voids_closes_each_core_and_resubmits(refused, w):
    """A refused JPEG frame (a final frame too) voids every attempt; each core that had files
    in flight gets a closer on its own core; every file still comes back right."""
    rng = random.Random(refused)
    device = FakeDevice(cores=3, input_fifo=5000, max_payload=1024, refuse={refused},
                        link_bytes=w)
    accelerator = AcceleratorDevice(device, timeout=2.0)
    files = _files(rng, 12, (500, 3000))
    decode_all(accelerator, files)
    assert accelerator.resubmissions >= 1
    scheduler = accelerator.jpeg_scheduler
    assert scheduler._outstanding == [0, 0, 0] and not scheduler.attempts
    # no file's frames ever went to two cores (closers included: the same tag, same core)
    assert not [v for v in device.violations if "cores" in v or "core 3" in v]


def test_a_refused_final_frame_left_open_is_closed_on_its_own_core():
    """The final frame of a file on core 1 refused: only a final frame to core 1 ends the
    packet it left open there; the host's closer for core 1 does."""
    device = FakeDevice(cores=2, input_fifo=1 << 20, max_payload=1024)
    # files 0 and 1, two chunks each, interleaved: 0a 1a 0b 1b -> 1b (core 1's final) refused
    device.refuse = {3}
    accelerator = AcceleratorDevice(device, timeout=2.0)
    files = [b"p" * 2000, b"q" * 2000]
    results = decode_all(accelerator, files)
    assert len(results) == 2
    closers = [entry for entry in device.log[3:] if entry[0] == Opcode.JPEG_END
               and entry[2] in (device.log[0][2], device.log[1][2])]
    assert {core for _, core, _ in closers} == {0, 1}
    assert np.array_equal(results[1].pixels.reshape(-1),
                          np.frombuffer(fake_pixels(files[1]), np.uint8))


class PacedFakeDevice(FakeDevice):
    flow_control = False        # a UART board: the host paces, a barrier PING per data frame


def test_paced_links_interleave_and_keep_the_credit_too():
    device = PacedFakeDevice(cores=2, input_fifo=4000, max_payload=512)
    accelerator = AcceleratorDevice(device, timeout=2.0)
    assert accelerator.link.pace
    decode_all(accelerator, _files(random.Random(5), 12, (200, 3000)))
    assert device.violations == [] and accelerator.link.barriers >= len(device.log)


@pytest.mark.parametrize("lost", [0, 1, 4, 7])
def test_a_lost_reply_frame_and_the_file_is_decoded_again(lost):
    """Reply frames count 0, 1, 2, ... per file: a lost data frame leaves a gap (or a
    JPEG_END numbered too low), a lost JPEG_END the silence rule's ping; either way the
    file is decoded again and every result is right."""
    rng = random.Random(lost)
    device = FakeDevice(cores=2, input_fifo=1 << 20, reply_payload=512, lose={lost})
    accelerator = AcceleratorDevice(device, timeout=1.0)
    decode_all(accelerator, _files(rng, 4, (300, 900)))
    assert accelerator.resubmissions >= 1


def test_a_gap_refusal_voids_and_resubmits():
    """Status.GAP (a request frame lost before this one): every attempt voided, closers sent,
    the files decoded again, all right."""
    rng = random.Random(9)
    device = FakeDevice(cores=3, input_fifo=5000, max_payload=1024, gaps={4})
    accelerator = AcceleratorDevice(device, timeout=2.0)
    decode_all(accelerator, _files(rng, 8, (500, 3000)))
    assert accelerator.resubmissions >= 1


def test_the_longest_files_read_ahead_go_first_to_the_least_loaded_cores():
    """The host reads files ahead and sends the longest first (here: the largest, as these
    are not JPEG files), each to the core with the least work in flight, at most three
    files a core; results still come back in the caller's order."""
    device = FakeDevice(cores=2, input_fifo=1 << 20, max_payload=1 << 14)
    accelerator = AcceleratorDevice(device, timeout=2.0)
    sizes = [300, 100, 9000, 200, 5000, 4000, 50, 60]
    files = [bytes([n]) * size for n, size in enumerate(sizes)]
    arrivals = []                       # (file, core) as the device takes their frames
    original = device._jpeg

    def spy(f):
        arrivals.append((f.payload[0], f.status >> CORE_SHIFT))
        original(f)
    device._jpeg = spy
    decode_all(accelerator, files)
    sent = [sizes[n] for n in dict.fromkeys(n for n, _ in arrivals)]
    core = dict(arrivals)
    # the first window (three files a core) holds the six largest, 9000 and 5000 on the two
    # idle cores and 4000 on the one with less work (5000's); the two smallest come last,
    # the larger first
    assert sorted(sent[:6]) == [100, 200, 300, 4000, 5000, 9000] and sent[6:] == [60, 50]
    assert sent[:2] == [9000, 5000] and core[2] != core[4] and core[5] == core[4]
    assert device.violations == []
