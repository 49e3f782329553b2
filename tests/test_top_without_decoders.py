"""The accelerator top with no JPEG decoder cores, as the small boards carry it: the engine
alone (ULX3S 12F/25F), or only the link's control plane (iCEBreaker).  Both in Verilator as
simulated boards: the engine's layers come back bit-exact, JPEG frames are refused as unknown
opcodes, and the host says plainly that the device has no decoder."""

import numpy as np
import pytest

from dlforge.boards.presets import BOARDS
from dlforge.host.device.accelerator import AcceleratorDevice
from dlforge.host.conv.exchange import conv_exchange
from dlforge.host.conv.plan import LayerShape
from dlforge.host.conv.run import engine_config, run_conv
from dlforge.host.link.transport import TcpTransport
from dlforge.rtl.jpeg.syntax import Marker
from dlforge.rtl.link.protocol import Opcode, Register, Status, encode_frame
from dlforge.sim.board.process import SimBoard
from dlforge.host.link.raw_link import connect
from dlforge.host.conv.random_layer import expected_output, random_tensors

pytestmark = [pytest.mark.slow]


def _preset_board(name):
    p = BOARDS[name]
    # (the boards' byte-wide link, here over TCP)
    return SimBoard(link="tcp", cores=p.cores, conv=p.conv or False, max_width=p.max_width,
                    max_payload=p.max_payload, reply_payload=p.reply_payload, link_bytes=1)


def _refuses_jpeg(device):
    with connect(device) as link:
        empty_jpeg = Marker.SOI.bytes + Marker.EOI.bytes
        frames = link.exchange(encode_frame(Opcode.JPEG_END, 300, empty_jpeg),
                               lambda fr: len(fr) >= 1, timeout=30)
    assert frames[0].opcode == Opcode.ERROR and frames[0].status == Status.BAD_OPCODE
    assert frames[0].tag == 300


def test_engine_only_board():
    with _preset_board("ulx3s-12f") as sim:
        _, host, port = sim.device.split(":")
        board = AcceleratorDevice(TcpTransport(host, port))
        try:
            assert board.cores == 0 and board.array
            regs = board.read_regs(Register.CORES, 1)
            assert regs == [0]
            cfg = engine_config(board)
            assert (cfg.rows, cfg.cols, cfg.simd) == (2, 2, 2)
            layer = LayerShape("small", 8, 6, 7, 12, (3, 3), 1, 1, relu=True, pool=False)
            t = random_tensors(layer, cfg, np.random.default_rng(2))
            y, info = run_conv(t.x, t.w, t.bias.astype(np.int32), t.multiplier, t.shift,
                               stride=1, padding=1, relu=True, pool=False, device=board)
            assert np.array_equal(y[0], expected_output(layer, t))
            assert info["cycles"] > 0
            with pytest.raises(ValueError, match="no JPEG decoder cores"):
                list(board.decode_jpegs([("a.jpg", Marker.SOI.bytes + Marker.EOI.bytes, False)]))
        finally:
            board.close()
        _refuses_jpeg(sim.device)


def test_link_only_board():
    with _preset_board("icebreaker") as sim:
        _, host, port = sim.device.split(":")
        board = AcceleratorDevice(TcpTransport(host, port))
        try:
            assert board.cores == 0 and not board.array
            assert board.ping(b"hello") == b"hello"
            with pytest.raises(ValueError, match="no convolution engine"):
                conv_exchange(board, b"\0" * 16, 16)
        finally:
            board.close()
        _refuses_jpeg(sim.device)
