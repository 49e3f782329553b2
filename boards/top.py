"""A board's top level: PLL, reset, status LEDs and the UART host link around the
accelerator top.

The UART divides the clock the PLL actually reaches (not the one asked for) by the link's bit
rate, defined once in :mod:`dlforge.rtl.link.protocol`, where the host's ``serial:`` transport
also takes it: the two sides agree by construction, or the build stops with the error.

LEDs (ULX3S: 0-4; iCEBreaker: green, red):

* heartbeat (about 1.5 Hz): the clock runs;
* PLL locked;
* a byte arrived from the host (stretched to be visible);
* a byte left for the host;
* link error: the UART saw a framing error or dropped a byte (sticky until reset).
"""

from amaranth import ClockDomain, Elaboratable, Module, Signal
from amaranth.lib import io

from ..rtl.link.protocol import BAUD
from ..rtl.link.uart import uart_divisor
from ..rtl.uart_top import UartAccelerator
from .clocks import PllSettings, SystemClock, ecp5_pll, ice40_pll

__all__ = ["BoardTop", "pll_settings"]


def pll_settings(preset, platform):
    """The PLL for ``preset.freq_mhz`` from the board's oscillator (none if they are equal).

    When the nearest frequency cannot make the link's bit rate within 2 %, the nearest one
    within 10 % of the request that can (a multiple of the bit rate) is taken instead, so a
    round number like 40 MHz becomes 39 MHz rather than an error."""
    fin = platform.default_clk_frequency
    fout = preset.freq_mhz * 1e6
    family = "ice40" if "iCE40" in preset.device else "ecp5"
    solve = ice40_pll if family == "ice40" else ecp5_pll
    first = None
    k = round(fout / BAUD)
    for want in (fout, *(j * BAUD for j in sorted(range(k - 2, k + 3),
                                                     key=lambda j: abs(j * BAUD - fout)))):
        if want <= 0 or abs(want - fout) > 0.1 * fout:
            continue
        try:
            settings = PllSettings(family, fin, fin, {}) if abs(want - fin) < 1 \
                else solve(fin, want)
            uart_divisor(settings.fout_hz, BAUD)
            return settings
        except ValueError as exc:
            first = first or exc
    raise first


class BoardTop(Elaboratable):
    """Everything a physical board needs around the accelerator (PLL, reset, LEDs, the UART
    pins), so that the accelerator itself stays board-independent and the same as in simulation."""

    def __init__(self, preset, platform):
        self.preset = preset
        try:
            self.pll = pll_settings(preset, platform)
            self.divisor = uart_divisor(self.pll.fout_hz, BAUD)  # ValueError if off by > 2 %
        except ValueError:
            self._MustUse__silence = True       # never elaborated: no unused warning
            raise

    def elaborate(self, platform):
        m = Module()
        p = self.preset
        m.domains.sync = cd = ClockDomain("sync")
        m.submodules.clock = clock = SystemClock(self.pll, cd)
        m.submodules.core = core = UartAccelerator(
            self.pll.fout_hz, rx_fifo=p.rx_fifo, cores=p.cores, max_width=p.max_width,
            max_height=p.max_height, max_payload=p.max_payload,
            reply_payload=p.reply_payload, conv=p.conv, small_ram=p.small_ram,
            contexts=p.contexts)
        uart = platform.request("uart", 0, dir="-")
        m.submodules.uart_rx = rx = io.Buffer("i", uart.rx)
        m.submodules.uart_tx = tx = io.Buffer("o", uart.tx)
        m.d.comb += [core.rx.eq(rx.i), tx.o.eq(core.tx)]

        heartbeat = Signal(range(int(self.pll.fout_hz)))
        blink = Signal()
        with m.If(heartbeat == int(self.pll.fout_hz / 3) - 1):
            m.d.sync += [heartbeat.eq(0), blink.eq(~blink)]
        with m.Else():
            m.d.sync += heartbeat.eq(heartbeat + 1)
        stretch = int(self.pll.fout_hz / 50)                    # 20 ms
        got, sent = Signal(range(stretch + 1)), Signal(range(stretch + 1))
        for counter, event in ((got, core.got), (sent, core.sent)):
            with m.If(event):
                m.d.sync += counter.eq(stretch)
            with m.Elif(counter != 0):
                m.d.sync += counter.eq(counter - 1)
        error = Signal()
        with m.If((core.framing_errors != 0) | (core.overruns != 0)):
            m.d.sync += error.eq(1)
        states = [blink, clock.locked, got != 0, sent != 0, error]
        if "iCE40" in self.preset.device:
            states = [blink, error]                         # green, red
        # Each LED from a register in its I/O cell: driven straight from logic, an LED's pin
        # bound a ULX3S-85F build of the two-file core (15.6 ns of routing to it).
        for k, state in enumerate(states):
            m.submodules[f"led{k}"] = led = io.FFBuffer("o", platform.request("led", k, dir="-"))
            m.d.comb += led.o.eq(state)
        return m
