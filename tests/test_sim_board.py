"""The simulated board: the Verilated accelerator top as a program, reached over TCP, a
pseudo-terminal and named pipes; images decoded through it equal libjpeg-turbo's; its state
survives a reconnect; injected faults are answered, not hung on; statistics come on exit.

Most cases use a small build (one core, 256 x 256, no engine, a byte-wide link: the transports
and the harness's byte handling); the wide-link cases use the default build (a 32-byte link,
two cores and the engine), the one the host runtime starts, so that it is built once here and
cached.
"""

import io
import os
import struct
import subprocess
import time

import numpy as np
import pytest
import simplejpeg
import skimage.data
from PIL import Image

from dlforge.rtl.link.protocol import VERSION, Opcode, Register, Status, encode_frame
from dlforge.host.link.frame_parser import FrameDecoder
from dlforge.rtl.link.jpeg_reply import parse_end
from dlforge.sim.corpus import photos
from dlforge.sim.board.build import DEFAULTS, build_board
from dlforge.sim.board.process import SimBoard
from dlforge.gen.bench.sim_board import bench_sim_board
from dlforge.host.link.raw_link import connect
from dlforge.rtl.link.protocol import file_requests

pytestmark = [pytest.mark.xdist_group("sim_board"), pytest.mark.verilator]

SMALL = {"cores": 1, "max_width": 256, "max_height": 256, "conv": False, "link_bytes": 1}
MAX_PAYLOAD = DEFAULTS["max_payload"]
REPLY_PAYLOAD = DEFAULTS["reply_payload"]


@pytest.fixture(scope="module")
def small_build():
    return build_board(**SMALL)


@pytest.fixture(scope="module")
def default_build():
    return build_board()


@pytest.fixture(scope="module")
def photo():
    """A small real photo, encoded by libjpeg-turbo (Pillow) at 4:2:0."""
    pixels = np.ascontiguousarray(skimage.data.astronaut()[100:220, 140:300])
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, "JPEG", quality=85, subsampling=2)
    return buf.getvalue()


def _board(link, **options):
    return SimBoard(link, **(SMALL | options))


def _regs(link, first, count, tag=7):
    frames = link.exchange(encode_frame(Opcode.READ_REGS, tag, struct.pack("<HH", first, count),
                                        link_bytes=link.link_bytes),
                           lambda fr: any(f.tag == tag for f in fr))
    (frame,) = [f for f in frames if f.tag == tag]
    assert frame.opcode == Opcode.READ_REGS and frame.status == Status.OK
    return struct.unpack(f"<{count}I", frame.payload)


def _decode(link, data, tag=100, core=0):
    """A JPEG file through the board: (status, width, height, cycles, pixel bytes)."""
    frames = link.exchange(b"".join(file_requests(tag, data, MAX_PAYLOAD,
                                                  link_bytes=link.link_bytes, core=core)),
                           lambda fr: any(f.opcode == Opcode.JPEG_END for f in fr))
    mine = [f for f in frames if f.tag == tag]
    assert mine[-1].opcode == Opcode.JPEG_END and len(mine[-1].payload) == 14
    assert all(f.opcode == Opcode.JPEG_DATA and f.status == Status.OK for f in mine[:-1])
    assert all(len(f.payload) <= REPLY_PAYLOAD for f in mine)
    assert mine[-1].payload[1] == 0
    status, width, height, cycles, _ = parse_end(mine[-1].payload)
    return status, width, height, cycles, b"".join(f.payload for f in mine[:-1])


def _check_image(result, data):
    status, width, height, cycles, pixels = result
    want = simplejpeg.decode_jpeg(data, colorspace="RGB", fastdct=False, fastupsample=False)
    assert status == 0
    assert (width, height) == (want.shape[1], want.shape[0])
    assert cycles > 0
    assert pixels == want.tobytes()


def _retried(link, decoder, first, count, tries=50):
    """READ_REGS over a damaged link: resent until an intact answer comes back."""
    for attempt in range(tries):
        tag = 500 + attempt
        frames = link.exchange(encode_frame(Opcode.READ_REGS, tag,
                                            struct.pack("<HH", first, count),
                                            link_bytes=link.link_bytes),
                               until=None, decoder=decoder)
        while chunk := link.read(timeout=0.5):
            frames += decoder.feed(chunk)
        for f in frames:
            if (f.tag, f.opcode, f.status) == (tag, Opcode.READ_REGS, Status.OK) \
                    and len(f.payload) == 4 * count:
                return struct.unpack(f"<{count}I", f.payload)
    pytest.fail("the board stopped answering")


# ---- The default build (the host runtime's) ---------------------------------------------------

def test_registers_and_ping_default_build(default_build):
    with SimBoard("tcp") as board:
        assert board.device.startswith("tcp:127.0.0.1:")
        assert board.device.endswith(f"?link_bytes={DEFAULTS['link_bytes']}")
        with connect(board.device) as link:
            assert link.link_bytes == DEFAULTS["link_bytes"] == 32
            frames = link.exchange(encode_frame(Opcode.PING, 3, b"hello board", link_bytes=32),
                                   lambda fr: len(fr) == 1)
            assert (frames[0].opcode, frames[0].tag, frames[0].payload) == (
                Opcode.PING, 3, b"hello board")
            regs = {Register(k): v for k, v in enumerate(_regs(link, Register.VERSION, 8))}
            width, fifo = _regs(link, Register.LINK_WIDTH, 2)
    assert regs[Register.VERSION] == VERSION
    assert regs[Register.CORES] == DEFAULTS["cores"] == 2
    assert (width, fifo) == (32, DEFAULTS["input_fifo_bytes"])
    assert (regs[Register.MAX_WIDTH], regs[Register.MAX_HEIGHT]) == (4096, 65535)
    assert regs[Register.ARRAY] != 0 and regs[Register.LINK_BYTES] == 32
    assert (regs[Register.MAX_PAYLOAD], regs[Register.REPLY_PAYLOAD]) == (MAX_PAYLOAD,
                                                                          REPLY_PAYLOAD)
    assert board.stats["cycles"] > 0 and board.stats["bytes_in"] > 0
    assert board.stats["bytes_out"] > 0 and board.stats["bytes_in"] % 32 == 0


def test_real_jpegs_on_both_cores_default_build(default_build):
    """scikit-image's real camera files on the default build, on each core."""
    shipped = dict(photos.shipped_jpegs())
    with SimBoard("tcp", exit_on_disconnect=True) as board:
        with connect(board.device) as link:
            for core, name in enumerate(["rocket.jpg", "hubble_deep_field.jpg"]):
                data = shipped[name]
                _check_image(_decode(link, data, tag=100 + core, core=core), data)
            images = _regs(link, Register.JPEG_IMAGES, 2)
        board.wait(timeout=120)
    assert board.returncode == 0 and images == (1, 1)


@pytest.mark.parametrize("fault", ["corrupt", "drop"])
def test_fault_injection_wide_link(default_build, photo, fault):
    """At 32 bytes a clock: flipped bits and lost beats on the way in and out.  Requests
    are refused or dropped, replies arrive damaged or not at all, and the board keeps going:
    after the storm, a file decodes bit-exact and the registers answer."""
    # (a rate at which damage is certain in the storm and a file's round trip is often
    # clean: the faults stay on for the board's life)
    pings = [encode_frame(Opcode.PING, 1000 + k, bytes([k % 251]) * 500, link_bytes=32)
             for k in range(400)]
    files = b"".join(b"".join(file_requests(2000 + k, photo, MAX_PAYLOAD, link_bytes=32,
                                            core=k % 2)) for k in range(4))
    with SimBoard("tcp", **{fault: 2e-5}, seed=7) as board:
        with connect(board.device) as link:
            decoder = FrameDecoder(max_length=REPLY_PAYLOAD, link_bytes=32)
            frames = link.exchange(b"".join(pings) + files, until=None, decoder=decoder)
            while chunk := link.read(timeout=3.0):          # until the board falls quiet
                frames += decoder.feed(chunk)
            good = [f for f in frames if f.opcode == Opcode.PING and f.status == Status.OK]
            assert all(f.payload == bytes([(f.tag - 1000) % 251]) * 500 for f in good
                       if 1000 <= f.tag < 1400)
            assert len(good) < len(pings) or decoder.bad_payloads
            crc_errors, header_errors = _retried(link, decoder, Register.CRC_ERRORS, 2)
            assert crc_errors + header_errors > 0
            # the next file on each core: bit-exact or visibly damaged, never another's
            for core in (0, 1):
                for attempt in range(20):
                    tag = 3000 + 10 * core + attempt
                    frames = link.exchange(b"".join(file_requests(tag, photo, MAX_PAYLOAD,
                                                                  link_bytes=32, core=core)),
                                           until=None, decoder=decoder)
                    # (until its end, or 2 s of silence: a dropped byte may leave no end)
                    deadline = time.monotonic() + 20
                    while time.monotonic() < deadline and not any(
                            f.tag == tag and f.opcode == Opcode.JPEG_END for f in frames):
                        chunk = link.read(timeout=2.0)
                        if not chunk:
                            break
                        frames += decoder.feed(chunk)
                    mine = [f for f in frames if f.tag == tag]
                    if mine and mine[-1].opcode == Opcode.JPEG_END and all(
                            f.status == Status.OK for f in mine) and mine[-1].payload[0] == 0:
                        pixels = b"".join(f.payload for f in mine[:-1])
                        want = simplejpeg.decode_jpeg(photo, colorspace="RGB", fastdct=False,
                                                      fastupsample=False)
                        if pixels == want.tobytes():
                            break
                else:
                    pytest.fail(f"core {core} never decoded the photo again")
    stats = board.stats
    assert stats[{"corrupt": "corrupted", "drop": "dropped"}[fault]] > 0


# ---- The transports -----------------------------------------------------------------------------

@pytest.mark.parametrize("link", ["tcp", "pty", "fifo"])
def test_decode_over_each_link(small_build, photo, link):
    with _board(link) as board:
        prefix = {"tcp": "tcp:127.0.0.1:", "pty": "serial:/dev/", "fifo": "xdma:"}[link]
        assert board.device.startswith(prefix)
        with connect(board.device) as host:
            regs = _regs(host, Register.VERSION, 8)
            assert regs[Register.VERSION] == VERSION and regs[Register.CORES] == 1
            assert (regs[Register.MAX_WIDTH], regs[Register.MAX_HEIGHT]) == (256, 256)
            assert (regs[Register.ARRAY], regs[Register.LINK_BYTES]) == (0, 0)
            assert regs[Register.MAX_PAYLOAD] == MAX_PAYLOAD
            assert regs[Register.REPLY_PAYLOAD] == REPLY_PAYLOAD
            _check_image(_decode(host, photo), photo)
            frames = host.exchange(encode_frame(Opcode.PING, 9, b"after"),
                                   lambda fr: len(fr) == 1)
            assert frames[0].payload == b"after"
    stats = board.stats
    assert stats["cycles"] > 0 and stats["busy_cycles"] > 0
    assert stats["bytes_in"] == stats["link_bytes_in"] > len(photo)
    assert stats["bytes_out"] > 3 * 160 * 120
    assert board.returncode == 0
    if link == "fifo":
        assert not os.path.exists(board.device[len("xdma:"):] + "_h2c_0")


def test_state_survives_reconnect(small_build, photo):
    """A board does not reset when its cable is unplugged: the next client sees the first
    client's image counted, and the board keeps answering."""
    with _board("tcp") as board:
        with connect(board.device) as first:
            _check_image(_decode(first, photo), photo)
        for tag in (20, 21):
            with connect(board.device) as again:
                images, errors = _regs(again, Register.JPEG_IMAGES, 1, tag)[0], _regs(
                    again, Register.JPEG_ERRORS, 1, tag)[0]
                assert (images, errors) == (1, 0)
                frames = again.exchange(encode_frame(Opcode.PING, tag, b"x" * 100),
                                        lambda fr: len(fr) == 1)
                assert frames[0].payload == b"x" * 100
    assert board.stats["clients"] == 3


def test_exit_on_disconnect(small_build):
    board = _board("tcp", exit_on_disconnect=True).start()
    try:
        with connect(board.device) as link:
            frames = link.exchange(encode_frame(Opcode.PING, 1, b"bye"), lambda fr: len(fr) == 1)
            assert frames[0].payload == b"bye"
        stats = board.wait(timeout=60)
    finally:
        board.stop()
    assert board.returncode == 0
    assert stats["clients"] == 1 and stats["cycles"] > 0


def test_max_cycles_and_stats(small_build):
    board = _board("tcp", max_cycles=5000).start()
    stats = board.wait(timeout=60)
    assert board.returncode == 0
    assert stats["cycles"] == 5000
    assert {"seconds", "cycles_per_s", "busy_cycles", "busy_cycles_per_s", "bytes_in",
            "bytes_out"} <= set(stats)
    assert stats["bytes_in"] == stats["bytes_out"] == 0


def test_idle_board(small_build):
    """With no traffic the board slows down (its idle cycles are not busy ones) and still
    answers the next request."""
    board = _board("tcp", max_cycles=60000, idle_cycles=2000).start()
    stats = board.wait(timeout=120)
    assert stats["cycles"] == 60000 and 2000 <= stats["busy_cycles"] < 10000
    with _board("tcp", idle_cycles=2000) as board:
        time.sleep(0.2)                                # (most likely) idle by now
        with connect(board.device) as link:
            frames = link.exchange(encode_frame(Opcode.PING, 5, b"wake"), lambda fr: len(fr) == 1)
            assert frames[0].payload == b"wake"


@pytest.mark.parametrize("fault", ["corrupt", "drop"])
def test_fault_injection(small_build, fault):
    """Damaged bytes on the real transport path: the device refuses damaged requests
    (BAD_CRC, counted in CRC_ERRORS) or drops damaged headers, the host's decoder counts the
    damaged replies, and the board keeps going."""
    pings = [encode_frame(Opcode.PING, 1000 + k, bytes([k % 251]) * 200) for k in range(200)]
    with _board("tcp", **{fault: 0.002}, seed=5) as board:
        with connect(board.device) as link:
            decoder = FrameDecoder(max_length=REPLY_PAYLOAD)
            frames = link.exchange(b"".join(pings), until=None, decoder=decoder)
            while chunk := link.read(timeout=2.0):          # until the board falls quiet
                frames += decoder.feed(chunk)
            good = [f for f in frames if f.opcode == Opcode.PING and f.status == Status.OK]
            refused = [f for f in frames if f.opcode == Opcode.ERROR]
            damage = decoder.bad_headers + decoder.bad_payloads + decoder.dropped_bytes
            assert good and len(good) < len(pings)
            assert refused or damage
            assert all(f.payload == bytes([(f.tag - 1000) % 251]) * 200 for f in good)
            # Still answering: a request gets through within a few tries, and the device
            # counted the damage it saw.
            crc_errors, header_errors = _retried(link, decoder, Register.CRC_ERRORS, 2)
            assert crc_errors + header_errors > 0
    stats = board.stats
    assert stats[{"corrupt": "corrupted", "drop": "dropped"}[fault]] > 0
    assert stats["cycles"] > 0


def test_bytes_waiting_at_start(small_build, tmp_path):
    """Bytes already in the pipe when the board starts reach the device whole: the first
    I/O step comes right after reset, and no byte may be taken while the design is still
    in reset (a lost magic byte made the board skip the first frame)."""
    base = tmp_path / "card"
    h2c, c2h = f"{base}_h2c_0", f"{base}_c2h_0"
    os.mkfifo(h2c)
    os.mkfifo(c2h)
    early = os.open(h2c, os.O_RDWR | os.O_NONBLOCK)
    try:
        os.write(early, encode_frame(Opcode.PING, 1, b"first") + encode_frame(Opcode.PING, 2))
        proc = subprocess.Popen([str(small_build), "--link", "fifo", "--path", str(base)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            assert proc.stdout.readline().decode().strip() == f"DEVICE xdma:{base}"
            with connect(f"xdma:{base}") as link:
                frames = link.exchange(b"", lambda fr: len(fr) == 2)
            assert [(f.tag, f.payload) for f in frames] == [(1, b"first"), (2, b"")]
        finally:
            proc.terminate()
            _, err = proc.communicate(timeout=60)
            proc.stdout.close()
            proc.stderr.close()
    finally:
        os.close(early)
    assert proc.returncode == 0 and b'"cycles"' in err


def test_bad_arguments(small_build):
    result = subprocess.run([str(small_build), "--link", "carrier-pigeon"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2 and "unknown link" in result.stderr
    result = subprocess.run([str(small_build), "--link", "fifo"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2 and "--path" in result.stderr
    with pytest.raises(ValueError):
        SimBoard("carrier-pigeon")


def test_bench(small_build, photo):
    report = bench_sim_board(images=[photo, photo], **SMALL)
    assert [f["status"] for f in report["files"]] == [0, 0]
    assert report["pixels"] == 2 * 160 * 120
    assert report["cycles"] > 0 and report["busy_cycles_per_s"] > 0
    assert report["parameters"]["max_width"] == 256
