"""The accelerator behind a UART: what a development board carries between its two pins.

Board tops (``dlforge.boards.top``) put a PLL, reset and LEDs around it; the simulated UART
board runs exactly this component in Verilator with the host's bytes turned into bits on
``rx`` at the bit rate, so both take the same bit-level path.
"""

from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .jpeg.limits import DEFAULT_MAX_HEIGHT, DEFAULT_MAX_WIDTH
from .link.protocol import BAUD
from .link.uart import UartLink
from .top import AcceleratorTop

__all__ = ["UartAccelerator"]


class UartAccelerator(wiring.Component):
    """The accelerator as a two-pin device: the UART link and the accelerator top in one
    component, so that board tops and the simulated UART board run the same bit-level path."""

    rx: In(1, init=1)
    tx: Out(1, init=1)
    got: Out(1)                     # a byte arrived from the host this cycle
    sent: Out(1)                    # a byte left for the host this cycle
    framing_errors: Out(16)
    overruns: Out(16)

    def __init__(self, clk_hz, *, baud=BAUD, rx_fifo=2048, cores=1, max_width=DEFAULT_MAX_WIDTH,
                 max_height=DEFAULT_MAX_HEIGHT, max_payload=1024, reply_payload=1024, conv=None,
                 small_ram="block", contexts=1):
        self.link = UartLink(clk_hz, baud, fifo_depth=rx_fifo)
        self.divisor = self.link.divisor
        self.accelerator = AcceleratorTop(cores, max_width, max_height, max_payload, conv=conv,
                                          reply_payload=reply_payload, small_ram=small_ram,
                                          contexts=contexts)
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        m.submodules.link = link = self.link
        m.submodules.accelerator = top = self.accelerator
        wiring.connect(m, link.o, top.i)
        wiring.connect(m, top.o, link.i)
        m.d.comb += [link.rx.eq(self.rx), self.tx.eq(link.tx),
                     self.got.eq(link.o.valid & link.o.ready),
                     self.sent.eq(top.o.valid & top.o.ready),
                     self.framing_errors.eq(link.framing_errors),
                     self.overruns.eq(link.overruns)]
        return m
