"""The DMA link (``sim:dma``, ``dma:PATH``): the simulated board's engine places decoded pixels
straight into the host's arena and frames files itself; images bit-exact to libjpeg-turbo,
verdicts in order, control requests and the engine's words unchanged, a full arena falls back
to the record ring, files wait in the engine for their core's room while the host sleeps,
faults are recovered or reported, a board that dies is named."""

import gc
import io

import numpy as np
import pytest
import skimage.data
from PIL import Image

from dlforge.host.conv.plan import LayerShape
from dlforge.host.conv.run import engine_config, run_conv
from dlforge.host.jpeg.decode_service import DecoderService
from dlforge.host.device.open import open_device
from dlforge.host.link.device_string import open_transport
from dlforge.host.link.dma import Arena, DmaTransport
from dlforge.host.link.errors import DeviceUnreachable
from dlforge.sim.board.process import SimBoard
from dlforge.host.conv.random_layer import expected_output, random_tensors

from test_board import (_check, _check_recovered_or_reported, _killed_mid_stream_is_named,
                        _mixed, _photos)


# ---- the host side alone ----------------------------------------------------------------------

def test_arena_first_fit_and_coalescing():
    a = Arena(10 * 4096)
    x, y, z = a.alloc(5000), a.alloc(4096), a.alloc(1)
    assert (x, y, z) == ((0, 8192), (8192, 4096), (12288, 4096)) and a.used == 16384
    assert a.alloc(7 * 4096) is None                     # 6 pages left
    a.release(*y)
    assert a.alloc(4097) == (16384, 8192)                # the hole is too small: first fit
    a.release(*x)
    a.release(*z)                                        # x, y, z's pages merge again
    assert a.free[0] == (0, 16384) and a.alloc(4 * 4096) == (0, 16384)


def test_not_a_dma_link(tmp_path):
    with pytest.raises(DeviceUnreachable, match="no device at dma:.*--link dma"):
        open_transport(f"dma:{tmp_path / 'missing'}")
    other = tmp_path / "other"
    other.write_bytes(bytes(8192))
    with pytest.raises(DeviceUnreachable, match="not a dlforge DMA link"):
        DmaTransport(other)


# ---- against the simulated board ------------------------------------------------------------



@pytest.fixture(scope="module")
def board():
    dev = open_device("sim:dma")                          # the default board's build
    yield dev
    dev.close()


@pytest.mark.xdist_group("sim_board")
@pytest.mark.slow
@pytest.mark.parametrize("by_address", [True, False], ids=["read-in-place", "request-ring"])
def test_decode_places_pixels_in_the_arena(board, by_address):
    """Files read where they lie in the host's memory (where the engine may: probed), or
    copied through the request ring; pixels placed either way."""
    files, want = _mixed()
    link = board.link
    if by_address and not link.by_address:
        pytest.skip("the board cannot read this process's memory here (process_vm_readv)")
    probed, link.by_address = link.by_address, by_address
    placed, records = link.placed, link.records
    try:
        with DecoderService(board) as service:
            results = list(service.decode(files))
    finally:
        link.by_address = probed
    _check(files, results, want)
    ok = [r for r in results if r.status == "ok"]
    # every file the device decoded was placed; one record pair per file, not per frame
    assert link.placed - placed == 8 and link.records - records <= 3 * 8
    arena = board.transport.arena_mm
    for r in ok:
        assert r.pixels.base is not None                # a view of the shared arena
        address = np.frombuffer(arena, np.uint8).ctypes.data
        assert address <= r.pixels.ctypes.data < address + len(arena)
    used = link.arena.used
    assert used >= sum(r.pixels.nbytes for r in ok)
    del results, ok, r
    gc.collect()
    assert link.arena.used == 0                         # slots come back with their arrays


@pytest.mark.xdist_group("sim_board")
@pytest.mark.slow
def test_registers_and_engine_words_over_dma(board):
    assert board.ping(b"dma") == b"dma"
    assert board.info()["engine"] == "8x8x8 int8"
    cfg = engine_config(board)
    layer = LayerShape("demo", 16, 10, 12, 24, (3, 3), 1, 1, relu=True, pool=True)
    t = random_tensors(layer, cfg, np.random.default_rng(4))
    y, info = run_conv(t.x, t.w, t.bias.astype(np.int32), t.multiplier, t.shift, stride=1,
                       padding=1, relu=True, pool=True, device=board)
    assert np.array_equal(y[0], expected_output(layer, t))


@pytest.mark.xdist_group("sim_board")
@pytest.mark.slow
def test_a_full_arena_falls_back_to_the_record_ring():
    files = _photos(6, seed=3)
    with SimBoard(link="dma", arena=64 << 10) as sim:     # room for two small images
        with DecoderService(sim.device) as service:
            results = list(service.decode(files))
            link = service.device.link
            assert link.arena_full > 0 and link.placed > 0
    _check(files, results, ["ok"] * 6)
    assert sim.stats["dma_placed_bytes"] > 0 and sim.stats["dma_overflows"] == 0


@pytest.mark.xdist_group("sim_board")
@pytest.mark.slow
def test_a_full_request_ring_waits_for_room():
    """More compressed bytes in flight than the request ring holds: the host waits for the
    engine to free room (it rings when it does), without stalling into the silence rule."""
    files = _photos(24, seed=6)
    assert sum(map(len, files)) > 2 * (16 << 10)
    with SimBoard(link="dma", request_ring=16 << 10) as sim:   # (parts of 4 KiB)
        with DecoderService(sim.device, timeout=10.0) as service:
            service.device.link.by_address = False      # files through the request ring
            results = list(service.decode(files))
            assert service.device.link.ring_full > 0       # the host did wait for room
            assert service.device.resubmissions == 0
    _check(files, results, ["ok"] * 24)


def _large_photos(count):
    """Photos of about 150 KB: two of them do not fit in a core's 256 KiB input FIFO."""
    out = []
    for k in range(count):
        a = getattr(skimage.data, ("astronaut", "coffee")[k % 2])()
        if k % 4 >= 2:
            a = np.ascontiguousarray(a[:, ::-1])
        buf = io.BytesIO()
        Image.fromarray(a).resize((640, 640)).save(buf, "JPEG", quality=96)
        out.append(buf.getvalue())
    return out


@pytest.mark.xdist_group("sim_board")
@pytest.mark.slow
def test_files_wait_in_the_engine_while_the_host_sleeps():
    """Files larger than half a core's input FIFO: the host posts them all at once and sleeps
    until all are done; the engine holds each back until its core has room (the room comes
    back with the file's JPEG_END).  Holding them on the host instead meant a wake-up per
    file (DMA link's credit, host/link/dma.py)."""
    files = _large_photos(6)
    with SimBoard(link="dma") as sim:
        with DecoderService(sim.device) as service:
            board = service.device
            assert all(board.jpeg_scheduler._credit(len(f)) > board.input_fifo // 2
                       for f in files)
            sleeps = board.link.transport.sleeps
            results = list(service.decode(files))
            assert board.link.transport.sleeps - sleeps <= 2
            assert board.resubmissions == 0
    _check(files, results, ["ok"] * 6)
    assert sim.stats["dma_held_files"] == 6 and sim.stats["dma_held_back"] >= 2


@pytest.mark.xdist_group("sim_board")
@pytest.mark.slow
def test_images_outlive_the_link():
    files = _photos(2, seed=4)
    with DecoderService("sim:dma") as service:
        results = list(service.decode(files))
    _check(files, results, ["ok", "ok"])                 # the board has stopped by now


@pytest.mark.xdist_group("sim_board")
@pytest.mark.slow
def test_faults_under_the_engine_are_recovered_or_reported():
    """Bytes flipped and lost between the engine and the device (both directions): refused
    frames void the attempts (the engine forgets their placements: UNPLACE), damaged placed
    payloads fail their CRC in the engine, and every image is bit-exact or reported."""
    files = _photos(10, seed=7)
    with SimBoard(link="dma", corrupt=1e-5, drop=5e-6, seed=11) as sim:
        with DecoderService(sim.device, timeout=5.0, retries=6) as service:
            results = list(service.decode(files))
            board = service.device
            resubmitted = board.resubmissions
            link = board.link
            assert not link.held                        # every placement ended or undone
    assert sim.stats["corrupted"] + sim.stats["dropped"] > 0
    assert resubmitted > 0
    assert sim.stats["dma_bad_crc"] + link.unplaced > 0     # (seeded: both happen)
    _check_recovered_or_reported(files, results)
    assert sum(r.status == "ok" for r in results) >= 7


@pytest.mark.xdist_group("sim_board")
@pytest.mark.slow
def test_a_board_that_dies_is_named():
    _killed_mid_stream_is_named("dma")      # the done pipe's writer goes: POLLHUP
