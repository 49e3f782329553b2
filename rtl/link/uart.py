"""The boards' host link: a UART (8 data bits, no parity, 1 stop bit, LSB first, idle high).

The link runs at a fixed bit rate (``BAUD``) that the host's ``serial:`` transport also opens,
so the only per-board number is the clock divisor; :func:`uart_divisor` refuses clocks that
cannot make that rate closely enough for the far end to sample every bit of a frame.
"""

from fractions import Fraction

from amaranth import Cat, Const, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.fifo import SyncFIFO, SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from .protocol import BAUD

__all__ = ["uart_divisor", "UartTx", "UartRx", "UartLink", "MIN_DIVISOR", "MAX_RATE_ERROR"]

#: The receiver sees a start edge up to a clock late and samples a whole number of clocks after
#: it: at 4 clocks per bit that uncertainty is already a quarter of a bit, and what is left of
#: the bit must still absorb the sender's rate error.
MIN_DIVISOR = 4
#: Both ends' rate errors add up over the 9.5 bits from a start edge to the stop bit's centre,
#: and a receiver tolerates a mismatch of roughly 4-5 % in all: 2 % on our side leaves the rest
#: to the host's USB bridge.
MAX_RATE_ERROR = Fraction(2, 100)

_SATURATED = 0xFFFF


def uart_divisor(clk_hz, baud):
    """Clock cycles per bit, rounded; raises ValueError if the resulting bit rate is off by more
    than 2 % or the divisor is below 4 (the receiver samples mid-bit and needs a few clocks per
    bit)."""
    if clk_hz <= 0 or baud <= 0:
        raise ValueError(f"clock ({clk_hz} Hz) and bit rate ({baud} baud) must be positive")
    ratio = Fraction(clk_hz) / Fraction(baud)      # exact, so a 2.0 % error is not 2.0000001 %
    divisor = int(ratio + Fraction(1, 2))          # round half up
    if divisor < MIN_DIVISOR:
        raise ValueError(f"{clk_hz} Hz gives only {float(ratio):.2f} clocks per bit at "
                         f"{baud} baud; the receiver needs at least {MIN_DIVISOR}")
    error = abs(ratio / divisor - 1)               # (clk_hz / divisor) / baud - 1
    if error > MAX_RATE_ERROR:
        raise ValueError(f"{clk_hz} Hz / {divisor} = {clk_hz / divisor:.0f} baud is "
                         f"{float(error) * 100:.2f} % off {baud} baud (at most "
                         f"{float(MAX_RATE_ERROR) * 100:g} % is allowed)")
    return divisor


def _check_divisor(component, divisor, least):
    if not isinstance(divisor, int) or divisor < least:
        component._MustUse__silence = True     # never elaborated: no "unused" warning for it
        raise ValueError(f"divisor must be an integer of at least {least}, not {divisor!r}")


class UartTx(wiring.Component):
    """Sends each byte of ``i`` on ``tx`` as a 10-bit frame of ``divisor`` clocks per bit.

    The next byte is taken in the last clock of the stop bit, so back to back bytes leave
    exactly ``10 * divisor`` clocks apart: a steady stream uses the whole line rate, with no
    idle bit between frames.
    """

    i: In(stream.Signature(8))
    tx: Out(1, init=1)

    def __init__(self, divisor):
        _check_divisor(self, divisor, MIN_DIVISOR)
        self.divisor = divisor
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        # The frame still to send, bit 0 on the line; ones shift in, so it idles high.
        frame = Signal(10, init=0x3FF)
        bits_left = Signal(range(11))
        clocks = Signal(range(self.divisor))
        bit_ends = clocks == self.divisor - 1
        start_bit, stop_bit = Const(0, 1), Const(1, 1)
        m.d.comb += [
            self.tx.eq(frame[0]),
            self.i.ready.eq((bits_left == 0) | ((bits_left == 1) & bit_ends)),
        ]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [frame.eq(Cat(start_bit, self.i.payload, stop_bit)), bits_left.eq(10),
                         clocks.eq(0)]
        with m.Elif(bits_left != 0):
            m.d.sync += clocks.eq(clocks + 1)
            with m.If(bit_ends):
                m.d.sync += [frame.eq(Cat(frame[1:], stop_bit)), bits_left.eq(bits_left - 1),
                             clocks.eq(0)]
        return m


class UartRx(wiring.Component):
    """Receives frames on ``rx`` into a FIFO of ``fifo_depth`` bytes in front of ``o``.

    A start bit is a falling edge still low at its middle (a glitch shorter than half a bit is
    not one); data and stop bits are sampled at their centres, timed from that edge, so each
    frame resynchronises and the sender's rate may be a few per cent off.  A UART cannot be
    paused: a byte that completes while the FIFO is full is dropped and counted in
    ``overruns``.  A byte whose stop bit is low (a framing error, or a break) is dropped and
    counted in ``framing_errors``; the receiver then waits for the line to go high, so a break
    (the line held low) counts once instead of arriving as a run of zero bytes.
    """

    rx: In(1, init=1)
    o: Out(stream.Signature(8))
    framing_errors: Out(16)
    overruns: Out(16)

    def __init__(self, divisor, fifo_depth=16):
        _check_divisor(self, divisor, MIN_DIVISOR)
        if not isinstance(fifo_depth, int) or fifo_depth < 1:
            self._MustUse__silence = True
            raise ValueError(f"fifo_depth must be a positive integer, not {fifo_depth!r}")
        self.divisor = divisor
        self.fifo_depth = fifo_depth
        super().__init__()

    def _fifo(self):
        # SyncFIFOBuffered reads synchronously, so deep FIFOs land in block RAM; at depth 2 its
        # inner memory would be one entry deep, with zero-width pointers.
        if self.fifo_depth == 2:
            return SyncFIFO(width=8, depth=2)
        return SyncFIFOBuffered(width=8, depth=self.fifo_depth)

    def elaborate(self, platform):
        m = Module()
        line = Signal(init=1)
        m.submodules.line_sync = FFSynchronizer(self.rx, line, init=1)
        m.submodules.fifo = fifo = self._fifo()
        m.d.comb += [
            self.o.valid.eq(fifo.r_rdy),
            self.o.payload.eq(fifo.r_data),
            fifo.r_en.eq(self.o.ready),
        ]

        # One counter times every sample: it wraps at ``divisor`` clocks, and a falling edge
        # preloads it so that its first wrap lands at the middle of the start bit.  The edge
        # is seen within a clock after it happens; sampling (divisor - 1) // 2 clocks later
        # confirms a start exactly when the line stayed low for half a bit or more.
        half = (self.divisor - 1) // 2
        clocks = Signal(range(self.divisor))
        sample_now = clocks == self.divisor - 1
        m.d.sync += clocks.eq(clocks + 1)
        with m.If(sample_now):
            m.d.sync += clocks.eq(0)

        shift = Signal(8)
        data_bit = Signal(range(8))
        with m.FSM(name="rx"):
            with m.State("hunt"):
                with m.If(~line):
                    m.d.sync += clocks.eq(self.divisor - half)
                    m.next = "start"
            with m.State("start"):
                with m.If(sample_now):
                    m.d.sync += data_bit.eq(0)
                    with m.If(line):
                        m.next = "hunt"         # a glitch, not a start bit
                    with m.Else():
                        m.next = "data"
            with m.State("data"):
                with m.If(sample_now):
                    m.d.sync += [shift.eq(Cat(shift[1:], line)), data_bit.eq(data_bit + 1)]
                    with m.If(data_bit == 7):
                        m.next = "stop"
            with m.State("stop"):
                with m.If(sample_now):
                    with m.If(line):
                        m.next = "hunt"
                        with m.If(fifo.w_rdy):
                            m.d.comb += [fifo.w_data.eq(shift), fifo.w_en.eq(1)]
                        with m.Elif(self.overruns != _SATURATED):
                            m.d.sync += self.overruns.eq(self.overruns + 1)
                    with m.Else():
                        m.next = "wait_high"
                        with m.If(self.framing_errors != _SATURATED):
                            m.d.sync += self.framing_errors.eq(self.framing_errors + 1)
            with m.State("wait_high"):
                with m.If(line):
                    m.next = "hunt"
        return m


class UartLink(wiring.Component):
    """The byte-stream host link of a board: what the accelerator top's `i`/`o` streams plug into.

    ``fifo_depth`` received bytes are buffered (2048 by default, about 16 Kbit of block RAM):
    the host sends without flow control, so the receive side must absorb what arrives while
    the accelerator is busy.
    """

    rx: In(1, init=1)
    tx: Out(1, init=1)
    o: Out(stream.Signature(8))
    i: In(stream.Signature(8))
    framing_errors: Out(16)
    overruns: Out(16)

    def __init__(self, clk_hz, baud=BAUD, fifo_depth=2048):
        try:
            self.divisor = uart_divisor(clk_hz, baud)
        except ValueError:
            self._MustUse__silence = True
            raise
        self.clk_hz, self.baud, self.fifo_depth = clk_hz, baud, fifo_depth
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        m.submodules.uart_rx = uart_rx = UartRx(self.divisor, self.fifo_depth)
        m.submodules.uart_tx = uart_tx = UartTx(self.divisor)
        wiring.connect(m, wiring.flipped(self.i), uart_tx.i)
        wiring.connect(m, uart_rx.o, wiring.flipped(self.o))
        m.d.comb += [
            uart_rx.rx.eq(self.rx),
            self.tx.eq(uart_tx.tx),
            self.framing_errors.eq(uart_rx.framing_errors),
            self.overruns.eq(uart_rx.overruns),
        ]
        return m
