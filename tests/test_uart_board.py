"""The UART board: the real boards' top (UartAccelerator) in Verilator behind a pseudo-terminal,
its host bytes turned into bits on ``rx`` at N clocks per bit and ``tx`` back into bytes, so
the host runtime's ``serial:`` path runs over the same bit-level link a ULX3S has.

A UART has no flow control towards the host: the host paces its requests (one data frame,
then a barrier PING whose answer must come back before the next data frame).  The barrier
relies on the control plane answering frames in arrival order, which the first test checks
on the gateware itself; the last ones show that without pacing the board's receive FIFO
overflows, and with it never does.
"""

import argparse
import time

import pytest
from amaranth.sim import Simulator

from dlforge.host.jpeg.decode_service import DecoderService
from dlforge.host.device.open import open_device
from dlforge.host.link.errors import DeviceUnreachable
from dlforge.rtl.link.control import LinkControl
from dlforge.rtl.link.protocol import BAUD, Opcode, encode_frame
from dlforge.host.link.frame_parser import FrameDecoder
from dlforge.sim.board.process import SimBoard
from dlforge.sim.board.cli import add_arguments
from dlforge.sim.board.build import build_board
from test_board import _check, _check_recovered_or_reported, _mixed, _photos

pytestmark = pytest.mark.xdist_group("sim_board")

DIVISOR = 4                                 # the fastest UART: 12 MHz of board clock
# Like the ULX3S preset (frames of 1024 bytes, a 2048-byte receive FIFO), one core, no engine
# and 1024 pixels wide to keep the build short.
UART = {"cores": 1, "conv": False, "max_width": 1024, "uart": DIVISOR, "rx_fifo": 2048,
        "max_payload": 1024, "reply_payload": 1024}


@pytest.fixture(scope="module")
def uart_build():
    return build_board(**UART)


def _board(**options):
    return SimBoard("pty", **(UART | options))


def _line_use(stats):
    """The fraction of the reply direction's bit time the board kept busy."""
    return stats["bytes_out"] * 10 * DIVISOR / stats["cycles"]


# ---- The order the barrier relies on (the gateware, no build needed) -------------------------

def _control_run(stream, hold, cycles):
    """Feed ``stream`` into the control plane with its data path stalled for ``hold`` cycles;
    returns (cycle all bytes were accepted or None, cycle of the data frames' last beats,
    [(cycle, byte)] sent back)."""
    dut = LinkControl(data_opcodes=[Opcode.JPEG_DATA, Opcode.JPEG_END], max_payload=256)
    record = {"accepted": None, "last_beats": [], "out": []}

    async def bench(ctx):
        ctx.set(dut.o.ready, 1)
        pos = 0
        for cycle in range(cycles):
            ctx.set(dut.i.valid, pos < len(stream))
            if pos < len(stream):
                ctx.set(dut.i.payload, stream[pos])
            ctx.set(dut.data.ready, cycle >= hold)
            *_, took, d_valid, d_ready, d_last, o_valid, o_byte = await ctx.tick().sample(
                dut.i.ready, dut.data.valid, dut.data.ready, dut.data.payload.last,
                dut.o.valid, dut.o.payload)
            if pos < len(stream) and took:
                pos += 1
                if pos == len(stream):
                    record["accepted"] = cycle
            if d_valid and d_ready and d_last:
                record["last_beats"].append(cycle)
            if o_valid:
                record["out"].append((cycle, o_byte))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return record


def test_a_barrier_is_answered_only_after_the_data_frame_before_it_left_the_receiver():
    """A data frame, then a barrier PING, with the data path stalled (a core busy with
    replies): the receiver takes both (its two store-and-forward slots), so none of the
    bytes backs up into the UART's FIFO; the PING is not answered while the data frame waits,
    and its answer starts only after the data frame's last byte went to the data path."""
    hold = 2000
    barrier = (7).to_bytes(4, "little")
    stream = encode_frame(Opcode.JPEG_DATA, 300, bytes(range(200))) \
        + encode_frame(Opcode.PING, 0, barrier)
    run = _control_run(stream, hold, hold + 1500)
    assert run["accepted"] is not None and run["accepted"] < hold
    assert len(run["last_beats"]) == 1 and run["last_beats"][0] >= hold
    assert run["out"] and run["out"][0][0] > run["last_beats"][0]
    (answer,) = FrameDecoder().feed(bytes(b for _, b in run["out"]))
    assert (answer.opcode, answer.tag, answer.payload) == (Opcode.PING, 0, barrier)
    # A second data frame behind the barrier would not fit: while the first one waits, the
    # receiver stops taking bytes (they would pile up in the UART's FIFO) -- why the host
    # waits for the barrier's answer before writing it.
    more = stream + encode_frame(Opcode.JPEG_END, 301, bytes(200))
    run = _control_run(more, hold, hold + 2500)
    assert run["accepted"] is not None and run["accepted"] > hold
    assert len(run["last_beats"]) == 2


# ---- Building and starting -----------------------------------------------------------------

def test_uart_build_parameters():
    with pytest.raises(ValueError, match="divisor"):
        build_board(**(UART | {"uart": 3}))
    with pytest.raises(ValueError, match="rx_fifo"):
        build_board(conv=False, rx_fifo=512)
    with pytest.raises(ValueError, match="rx_fifo"):
        SimBoard("pty", rx_fifo=512)
    board = SimBoard("pty", uart=8)
    assert board.build_params["uart"] == 8
    assert (board.build_params["max_payload"], board.build_params["reply_payload"]) == (1024,
                                                                                        1024)
    args = add_arguments(argparse.ArgumentParser()).parse_args(
        ["--link", "pty", "--uart", "8", "--rx-fifo", "4096"])
    assert (args.uart, args.rx_fifo, args.link) == (8, 4096, "pty")


def test_presets_hold_a_paced_frame():
    """Paced, the host has at most one request frame, its barriers and a control request in
    the device: every board's receive FIFO holds that even if the frame receiver took none."""
    from dlforge.boards.presets import BOARDS
    from dlforge.host.link.frame_link import paced_bytes
    from dlforge.sim.board.build import UART_DEFAULTS
    assert paced_bytes(1024) == 1024 + 99
    for preset in BOARDS.values():
        assert preset.rx_fifo >= paced_bytes(preset.max_payload), preset.name
    assert BOARDS["icebreaker"].rx_fifo == 512 and BOARDS["ulx3s-85f"].rx_fifo == 2048
    assert UART_DEFAULTS["rx_fifo"] >= paced_bytes(UART_DEFAULTS["max_payload"])
    assert UART["rx_fifo"] >= paced_bytes(UART["max_payload"])


@pytest.mark.verilator
def test_registers_and_ping(uart_build):
    with _board(idle_cycles=20000) as sim:
        assert sim.device.startswith("serial:/dev/")
        time.sleep(0.3)                             # idle by now: it still wakes up at once
        board = open_device(sim.device)
        try:
            assert board.link.pace                      # serial: no flow control
            info = board.info()
            assert (info["cores"], info["max_width"], info["engine"]) == (1, 1024, None)
            assert (board.max_payload, board.reply_payload) == (1024, 1024)
            assert board.ping(b"hello uart") == b"hello uart"
            assert board.counters()["crc_errors"] == 0
        finally:
            board.close()
    stats = sim.stats
    assert stats["uart_divisor"] == DIVISOR and stats["clock_hz"] == DIVISOR * BAUD
    assert stats["uart_framing"] == stats["uart_overruns"] == stats["host_framing"] == 0
    # every byte the bridge put on the line reached the accelerator, and back
    assert stats["device_bytes_in"] == stats["bytes_in"] == stats["link_bytes_in"] > 0
    assert stats["device_bytes_out"] == stats["bytes_out"] == stats["link_bytes_out"] > 0
    assert stats["board_seconds"] == pytest.approx(stats["cycles"] / (DIVISOR * BAUD))
    assert stats["busy_cycles"] < stats["cycles"]


@pytest.mark.verilator
def test_photos_bit_exact_in_order(uart_build):
    files = _photos(5, seed=3)
    with _board() as sim:
        started = time.monotonic()
        with DecoderService(sim.device) as service:
            results = list(service.decode(files))
            link = service.device.link
        seconds = time.monotonic() - started
    _check(files, results, ["ok"] * len(files))
    stats = sim.stats
    assert stats["uart_overruns"] == 0 and stats["uart_framing"] == 0
    assert link.barriers >= sum(-(-len(f) // 1024) for f in files)
    # The reply direction (the images) is what takes the time: kept busy most of it.
    assert _line_use(stats) > 0.6, stats
    print(f"\nUART board: {stats['bytes_out'] / seconds:.0f} reply bytes/s, "
          f"{stats['cycles_per_s']:.0f} cycles/s, reply line busy {_line_use(stats):.0%}")


@pytest.mark.verilator
@pytest.mark.parametrize("upsample", ["fancy", "fast"])
def test_decode_in_order_with_fallbacks_and_errors(uart_build, upsample):
    files, want = _mixed()
    with _board() as sim:
        with DecoderService(sim.device, upsample) as service:
            results = list(service.decode(files))
    _check(files, results, want, fast=upsample == "fast")
    assert "UNSUPPORTED_MULTISCAN" in results[6].error        # the device's verdict
    assert "UNSUPPORTED_PROGRESSIVE" in results[2].error and results[2].cycles is None
    assert "TRUNCATED" in results[5].error
    assert sim.stats["uart_overruns"] == 0


@pytest.mark.verilator
@pytest.mark.slow
def test_faults_on_the_serial_path_are_recovered_or_reported(uart_build):
    """Flipped and dropped bytes in both directions between the host and the UART: every
    image comes back bit-exact or as an error that says what happened; nothing is swapped or
    lost, and the pacing still never overruns the board."""
    files = _photos(8, seed=7)
    with _board(corrupt=2e-5, drop=1e-5, seed=11) as sim:
        with DecoderService(sim.device, timeout=3.0, retries=6) as service:
            results = list(service.decode(files))
            board = service.device
            resubmitted = board.resubmissions
    stats = sim.stats
    assert stats["corrupted"] + stats["dropped"] > 0
    assert resubmitted > 0
    _check_recovered_or_reported(files, results)
    assert sum(r.status == "ok" for r in results) >= 6
    assert stats["uart_overruns"] == 0 and stats["uart_framing"] == 0


@pytest.mark.verilator
@pytest.mark.slow
def test_without_pacing_the_board_overruns_and_with_it_never(uart_build):
    """A UART cannot hold the host back.  Sending every queued frame as fast as the link
    takes it (the host before pacing) overflows the board's 2 KiB receive FIFO: the images
    are 10-30 times their files' size and leave at the same bit rate.  Paced, the same
    decode loses nothing."""
    files = _photos(6, seed=1)
    options = {"window": 6, "timeout": 2.0, "retries": 0}

    with _board() as sim:
        try:
            with DecoderService(sim.device, pace=False, **options) as service:
                unpaced = list(service.decode(files))
        except DeviceUnreachable:       # lost bytes can leave the receiver waiting for more
            unpaced = None
    assert sim.stats["uart_overruns"] > 0, sim.stats
    assert unpaced is None or any(r.status != "ok" for r in unpaced)

    with _board() as sim:
        with DecoderService(sim.device, **options) as service:
            paced = list(service.decode(files))
    assert sim.stats["uart_overruns"] == 0, sim.stats
    _check(files, paced, ["ok"] * len(files))
