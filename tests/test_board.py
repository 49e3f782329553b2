"""The host runtime against the simulated board (the accelerator top in Verilator) over every
transport: images bit-exact to libjpeg-turbo, verdicts in order, faults on the real byte path
recovered or reported, never an image silently lost or swapped."""

import io
import signal
import socket
import threading

import numpy as np
import pytest
import skimage.data
from PIL import Image

from dlforge.host.device.accelerator import AcceleratorDevice
from dlforge.host.conv.plan import LayerShape
from dlforge.host.conv.run import engine_config, run_conv
from dlforge.host.jpeg.decode_service import DecoderService
from dlforge.host.device.open import open_device
from dlforge.host.link.errors import DeviceGone, DeviceUnreachable
from dlforge.host.link.transport import TcpTransport
from dlforge.sim.corpus import jpeg_corpus
from dlforge.sim.board.build import DEFAULTS
from dlforge.sim.board.process import SimBoard
from dlforge.host.conv.random_layer import expected_output, random_tensors

import libjpeg_c

pytestmark = [pytest.mark.xdist_group("sim_board"), pytest.mark.slow]

# The board every runtime test shares with `make demo` (one Verilator build).
BOARD = {}


def _photos(count, seed=0):
    """Small real photos in several layouts (Pillow's libjpeg-turbo encoder)."""
    rng = np.random.default_rng(seed)
    names = ["astronaut", "coffee", "chelsea", "rocket"]
    out = []
    for k in range(count):
        a = getattr(skimage.data, names[k % 4])()
        h, w = int(rng.integers(40, 120)), int(rng.integers(40, 160))
        buf = io.BytesIO()
        Image.fromarray(np.ascontiguousarray(a[:h, :w])).save(
            buf, "JPEG", quality=int(rng.integers(60, 95)), subsampling=k % 3)
        out.append(buf.getvalue())
    return out


def _mixed():
    good = _photos(6)
    progressive = [f.data for f in jpeg_corpus.unsupported_corpus()
                   if f.features.get("reason") == "progressive"][:1]
    multiscan = [f.data for f in jpeg_corpus.unsupported_corpus()
                 if f.features.get("reason") == "multiscan"][:1]
    broken = [f.data for f in jpeg_corpus.malformed_corpus() if f.name == "truncated-mid-scan"]
    files = good[:2] + progressive + good[2:4] + broken + multiscan + good[4:]
    want = ["ok", "ok", "fallback", "ok", "ok", "error", "fallback", "ok", "ok"]
    return files, want


def _check(files, results, want=None, fast=False):
    assert [r.index for r in results] == list(range(len(files)))
    if want is not None:
        assert [r.status for r in results] == want, [(r.status, r.error) for r in results]
    for data, r in zip(files, results):
        if r.status in ("ok", "fallback"):
            # libjpeg-turbo's C build: the fallback files are simplejpeg's
            ref = libjpeg_c.decode(data, "fast" if fast else "fancy")
            assert r.pixels.shape == ref.shape and (r.pixels == ref).all(), r.index


def _check_recovered_or_reported(files, results):
    """After faults: every file in order, each bit-exact or an error that says why."""
    assert [r.index for r in results] == list(range(len(files)))
    for data, r in zip(files, results):
        if r.status == "ok":
            ref = libjpeg_c.decode(data)
            assert (r.pixels == ref).all(), f"file {r.index} came back wrong"
        else:
            assert r.status == "error" and r.error, r


@pytest.fixture(scope="module")
def board():
    dev = open_device("sim")
    yield dev
    dev.close()


def test_registers_and_ping(board):
    info = board.info()
    assert info["cores"] == DEFAULTS["cores"] and info["max_width"] == 4096
    assert info["engine"] == "8x8x8 int8" and info["link_bytes"] == DEFAULTS["link_bytes"]
    assert board.ping(b"hello") == b"hello"
    assert board.reply_payload > board.max_payload >= 4096


@pytest.mark.parametrize("upsample", ["fancy", "fast"])
def test_decode_in_order_with_fallbacks_and_errors(board, upsample):
    files, want = _mixed()
    before = board.counters()
    with DecoderService(board, upsample) as service:
        results = list(service.decode(files))
    _check(files, results, want, fast=upsample == "fast")
    on_device = [r for r in results if r.status == "ok"]
    assert all(r.cycles > 0 for r in on_device)
    assert "UNSUPPORTED_MULTISCAN" in results[6].error        # the device's verdict
    assert results[6].cycles > 0
    assert "UNSUPPORTED_PROGRESSIVE" in results[2].error and results[2].cycles is None
    assert "TRUNCATED" in results[5].error
    after = board.counters()
    # every file the cores saw, spread over them
    assert sum(after["images"]) - sum(before["images"]) == 8
    assert sum(after["errors"]) - sum(before["errors"]) == 2


def test_crop_and_resize_on_the_cores(board):
    """Files with resize requests among plain ones: the cores' resamplers give Pillow's
    pixels (shrinks, stretches, both pass orders, a window); a box the host can check is
    refused before it goes; one it cannot (no size known) the core refuses itself, and the
    next file still decodes; a shrink beyond the taps is left to the host, same pixels."""
    from dlforge.host.jpeg.resize_request import Resize
    files = _photos(6, seed=3)
    sizes = [Image.open(io.BytesIO(f)).size for f in files]
    w, h = sizes[0]
    jobs = [(0, files[0], False, sizes[0], Resize((0, 0, w, h), (w // 2 + 1, h // 3 + 1))),
            (1, files[1], False, sizes[1]),
            (2, files[2], False, sizes[2], Resize((1, 2, 30, 25), (50, 40))),
            (3, files[3], False, sizes[3], Resize((0, 0, 40, 30), (10, 9))),     # 4x: host
            (4, files[4], False, sizes[4], Resize((0, 0, 300, 30), (100, 10))),  # host: no
            (5, files[4], False, None, Resize((0, 0, 300, 30), (100, 10))),      # core: no
            (6, files[5], False, sizes[5],
             Resize((0, 0, *sizes[5]), (60, 70), window=(5, 6, 45, 50)))]
    before = board.counters()
    replies = list(board.decode_jpegs(jobs))
    assert [r.key for r in replies] == list(range(7))
    statuses = [r.status.name for r in replies]
    assert statuses == ["OK"] * 4 + ["BAD_RESIZE"] * 2 + ["OK"], statuses
    assert [r.resized for r in replies] == ["device", None, "device", "host", None, None,
                                            "device"]
    assert replies[5].cycles > 0 and "BAD_RESIZE" in replies[4].error
    for job, reply in zip(jobs, replies):
        if reply.status.name != "OK":
            continue
        full = libjpeg_c.decode(job[1])
        want = job[4].apply(full) if len(job) > 4 else full
        assert np.array_equal(reply.pixels, want), job[0]
    after = board.counters()
    assert sum(after["errors"]) - sum(before["errors"]) == 1          # (the core's refusal)


def test_scaled_decodes_on_the_cores(board):
    """1/2, 1/4, 1/8 on the cores (a scale word before each file): libjpeg-turbo's scaled
    decode, pixel for pixel (simplejpeg at exactly 1/scale), a resize on the scaled image on
    the device, and plain files between them."""
    from dlforge.host.jpeg.resize_request import Resize
    from dlforge.host.jpeg.scaled_decode import scaled_decode, scaled_size
    assert board.scales == (1, 2, 4, 8)
    files = _photos(5, seed=7)
    sizes = [Image.open(io.BytesIO(f)).size for f in files]
    jobs = [(0, files[0], False, scaled_size(*sizes[0], 2), None, 2),
            (1, files[1], False, scaled_size(*sizes[1], 4), None, 4),
            (2, files[2], False, sizes[2]),
            (3, files[3], True, scaled_size(*sizes[3], 8), None, 8),
            (4, files[4], False, scaled_size(*sizes[4], 2),
             Resize((0, 0, *scaled_size(*sizes[4], 2)), (40, 30)), 2)]
    replies = list(board.decode_jpegs(jobs))
    assert [r.status.name for r in replies] == ["OK"] * 5
    assert [r.resized for r in replies] == [None] * 4 + ["device"]
    for job, reply in zip(jobs, replies):
        scale = job[5] if len(job) > 5 else 1
        want = scaled_decode(job[1], scale, job[2])
        if len(job) > 4 and job[4] is not None:
            want = job[4].apply(want)
        assert np.array_equal(reply.pixels, want), job[0]


def test_convolution_layer_on_the_board(board):
    cfg = engine_config(board)
    layer = LayerShape("demo", 16, 10, 12, 24, (3, 3), 1, 1, relu=True, pool=True)
    t = random_tensors(layer, cfg, np.random.default_rng(4))
    y, info = run_conv(t.x, t.w, t.bias.astype(np.int32), t.multiplier, t.shift, stride=1,
                       padding=1, relu=True, pool=True, device=board)
    assert np.array_equal(y[0], expected_output(layer, t))
    assert info["cycles"] > 0 and info["tiles"] >= 1


def test_replies_taken_in_by_another_exchange_are_not_waited_for(board):
    """Decode -> infer interleaves: the engine's exchanges pump the link while the decoder
    service is paused, and the files' replies land then; the decode must hand them over
    without sleeping on the link (which would wait for the silence timeout)."""
    files = []
    for size in (16, 512, 512, 512):        # (longest first: the last big one ends last)
        buf = io.BytesIO()
        Image.fromarray(skimage.data.astronaut()[:size, :size]).save(buf, "JPEG", quality=90)
        files.append(buf.getvalue())
    jobs = [(k, data, False) for k, data in enumerate(files)]
    replies = board.decode_jpegs(jobs)
    first = next(replies)
    scheduler = board.jpeg_scheduler
    for _ in range(500):                # another exchange on the link, until the rest land
        if scheduler.attempts and len(scheduler._finished) == len(scheduler.attempts):
            break
        board.ping()
    assert scheduler.attempts and len(scheduler._finished) == len(scheduler.attempts)
    pumps = []
    pump = board.link.pump
    board.link.pump = lambda *a: pumps.append(a) or pump(*a)
    try:
        rest = list(replies)
    finally:
        board.link.pump = pump
    assert pumps == [] and [r.key for r in [first, *rest]] == [0, 1, 2, 3]
    _check(files, [_as_result(k, r) for k, r in enumerate([first, *rest])])


def _as_result(index, reply):
    from dlforge.host.jpeg.decode_service import DecodeResult
    return DecodeResult(index, str(index), "ok", pixels=reply.pixels)


def test_serial_through_a_pty_and_xdma_through_named_pipes():
    files = _photos(3, seed=5)
    for link in ("pty", "fifo"):
        with SimBoard(link=link) as sim:
            assert sim.device.startswith("serial:" if link == "pty" else "xdma:")
            with DecoderService(sim.device) as service:
                assert service.device.transport.reliable == (link == "fifo")
                results = list(service.decode(files))
        _check(files, results, ["ok"] * 3)
        assert sim.stats["cycles"] > 0


def test_xdma_through_named_pipes_that_are_never_polled(monkeypatch):
    """The XDMA driver's stream files implement no poll: the whole decode runs on the
    transport's blocking reader and writer threads (poll and select would fail it)."""
    import select

    def forbidden(*args, **kwargs):
        raise AssertionError("polled an XDMA stream file")

    files = _photos(3, seed=6)
    with SimBoard(link="fifo") as sim:
        monkeypatch.setattr(select, "poll", forbidden)
        monkeypatch.setattr(select, "select", forbidden)
        with DecoderService(sim.device) as service:
            results = list(service.decode(files))
    _check(files, results, ["ok"] * 3)


def test_faults_on_the_serial_path_are_recovered_or_reported():
    """Flipped and dropped bytes in both directions of the pty: every image comes back
    bit-exact or as an error that says what happened; nothing is swapped or lost."""
    files = _photos(10, seed=7)
    # (rates at which the seeded faults surely strike at a 32-byte link too, where a drop
    # takes a whole beat)
    with SimBoard(link="pty", corrupt=1e-5, drop=5e-6, seed=11) as sim:
        with DecoderService(sim.device, timeout=5.0, retries=6) as service:
            results = list(service.decode(files))
            board = service.device
            resubmitted = board.resubmissions
    assert sim.stats["corrupted"] + sim.stats["dropped"] > 0
    assert resubmitted > 0
    _check_recovered_or_reported(files, results)
    assert sum(r.status == "ok" for r in results) >= 7


def _killed_mid_stream_is_named(link):
    """A board killed while files are in flight: the error names them."""
    files = _photos(4, seed=9)
    sim = SimBoard(link=link)
    sim.start()
    board = open_device(sim.device, timeout=5.0)
    killer = threading.Timer(0.5, lambda: sim.process.send_signal(signal.SIGKILL))
    try:
        killer.start()
        with pytest.raises((DeviceGone, DeviceUnreachable), match=r"files in flight: #\d+"):
            with DecoderService(board) as service:
                list(service.decode(files * 50))
    finally:
        killer.cancel()
        board.close()
        sim.stop()


def test_a_device_that_disappears_is_named():
    _killed_mid_stream_is_named("tcp")


def test_something_that_is_not_a_board():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        with pytest.raises(DeviceUnreachable, match="no answer"):
            AcceleratorDevice(TcpTransport("127.0.0.1", port), timeout=0.5, retries=1)

