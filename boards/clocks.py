"""The boards' system clock: a PLL from the board's oscillator to the frequency the user asks
for, and a reset held until the PLL locks.

The PLL settings are solved here (like Lattice's ``ecppll``/``icepll``) rather than asked of
the user, so that ``--freq`` is a number and the UART divisor is computed from the frequency
actually reached, not the one requested: the link's bit rate and the host's agree by
construction.
"""

from dataclasses import dataclass

from amaranth import Elaboratable, Module, Signal
from amaranth.hdl import Instance
from amaranth.lib import io
from amaranth.lib.cdc import ResetSynchronizer

__all__ = ["PllSettings", "ecp5_pll", "ice40_pll", "SystemClock"]


@dataclass(frozen=True)
class PllSettings:
    """A solved PLL configuration with the frequency it really reaches, so that the UART divisor
    and the build's reports use that frequency, not the one asked for."""

    family: str
    fin_hz: float
    fout_hz: float
    params: dict            # the divider values the primitive takes

    @property
    def mhz(self):
        return self.fout_hz / 1e6


def ecp5_pll(fin_hz, fout_hz):
    """EHXPLLL settings with CLKOP fed back: fout = fin / CLKI_DIV * CLKFB_DIV, with the
    phase detector at 3.125-400 MHz and the VCO (fout * CLKOP_DIV) at 400-800 MHz."""
    best = None
    for in_div in range(1, 129):
        fpfd = fin_hz / in_div
        if not 3.125e6 <= fpfd <= 400e6:
            continue
        for fb_div in range(1, 81):
            out = fpfd * fb_div
            if not 3.125e6 <= out <= 400e6:             # CLKOP range
                continue
            # the VCO nearest the middle of its range (as Lattice's ecppll chooses)
            dividers = [d for d in range(1, 129) if 400e6 <= out * d <= 800e6]
            if not dividers:
                continue
            op_div = min(dividers, key=lambda d: abs(out * d - 600e6))
            error = abs(out - fout_hz)
            if best is None or error < best[0] - 1e-3:
                best = (error, out, {"CLKI_DIV": in_div, "CLKFB_DIV": fb_div,
                                     "CLKOP_DIV": op_div, "CLKOP_CPHASE": op_div // 2})
    return _checked("ECP5", fin_hz, fout_hz, best)


def ice40_pll(fin_hz, fout_hz):
    """SB_PLL40 settings (simple feedback): fout = fin * (DIVF + 1) / ((DIVR + 1) * 2^DIVQ),
    phase detector at 10-133 MHz, VCO at 533-1066 MHz."""
    best = None
    for divr in range(16):
        fpfd = fin_hz / (divr + 1)
        if not 10e6 <= fpfd <= 133e6:
            continue
        for divf in range(128):
            fvco = fpfd * (divf + 1)
            if not 533e6 <= fvco <= 1066e6:
                continue
            for divq in range(1, 7):
                out = fvco / (1 << divq)
                if not 16e6 <= out <= 275e6:
                    continue
                error = abs(out - fout_hz)
                if best is None or error < best[0] - 1e-3:
                    filter_range = next(k for k, top in enumerate(
                        (17e6, 26e6, 44e6, 66e6, 101e6, float("inf")), start=1) if fpfd < top)
                    best = (error, out, {"DIVR": divr, "DIVF": divf, "DIVQ": divq,
                                         "FILTER_RANGE": filter_range})
    return _checked("iCE40", fin_hz, fout_hz, best)


#: How far the PLL's nearest frequency may be from the one asked for.
MAX_FREQ_ERROR = 0.05


def _checked(family, fin_hz, fout_hz, best):
    if best is None or best[0] > MAX_FREQ_ERROR * fout_hz:
        near = f" (the nearest is {best[1] / 1e6:g} MHz)" if best else ""
        raise ValueError(f"no {family} PLL setting reaches {fout_hz / 1e6:g} MHz from "
                         f"{fin_hz / 1e6:g} MHz{near}")
    return PllSettings(family.lower(), fin_hz, best[1], best[2])


class SystemClock(Elaboratable):
    """Drives the ``sync`` domain at ``settings.fout_hz`` from the board's default clock
    (through the PLL unless the frequencies are equal) and exposes ``locked``.  The domain's
    reset is held until the PLL locks and released synchronously."""

    def __init__(self, settings, domain):
        self.settings = settings
        self.domain = domain                # the ClockDomain it drives (defined by the top)
        self.locked = Signal()

    def elaborate(self, platform):
        m = Module()
        s = self.settings
        cd = self.domain
        if s.fout_hz != s.fin_hz:
            platform.add_clock_constraint(cd.clk, s.fout_hz)    # the pin has its own
        if s.family == "ecp5" or s.fout_hz == s.fin_hz:
            m.submodules.clk_buf = buf = io.Buffer("i", platform.request(platform.default_clk,
                                                                         dir="-"))
            clk = buf.i
        if s.fout_hz == s.fin_hz:
            m.d.comb += [cd.clk.eq(clk), self.locked.eq(1)]
        elif s.family == "ecp5":
            out = Signal()
            p = s.params
            m.submodules.pll = Instance(
                "EHXPLLL",
                a_FREQUENCY_PIN_CLKI=f"{s.fin_hz / 1e6:g}",
                a_FREQUENCY_PIN_CLKOP=f"{s.fout_hz / 1e6:g}",
                a_ICP_CURRENT="12", a_LPF_RESISTOR="8", a_MFG_ENABLE_FILTEROPAMP="1",
                a_MFG_GMCREF_SEL="2",
                p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
                p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA",
                p_CLKI_DIV=p["CLKI_DIV"], p_CLKOP_ENABLE="ENABLED", p_CLKOP_DIV=p["CLKOP_DIV"],
                p_CLKOP_CPHASE=p["CLKOP_CPHASE"], p_CLKOP_FPHASE=0, p_FEEDBK_PATH="CLKOP",
                p_CLKFB_DIV=p["CLKFB_DIV"],
                i_RST=0, i_STDBY=0, i_CLKI=clk, i_CLKFB=out, i_PHASESEL0=0, i_PHASESEL1=0,
                i_PHASEDIR=1, i_PHASESTEP=1, i_PHASELOADREG=1, i_PLLWAKESYNC=0, i_ENCLKOP=0,
                o_CLKOP=out, o_LOCK=self.locked)
            m.d.comb += cd.clk.eq(out)
        else:
            pad = platform.request(platform.default_clk, dir="-")
            out = Signal()
            p = s.params
            m.submodules.pll = Instance(
                "SB_PLL40_PAD",
                p_FEEDBACK_PATH="SIMPLE", p_DIVR=p["DIVR"], p_DIVF=p["DIVF"], p_DIVQ=p["DIVQ"],
                p_FILTER_RANGE=p["FILTER_RANGE"],
                io_PACKAGEPIN=pad.io, i_RESETB=1, i_BYPASS=0,
                o_PLLOUTGLOBAL=out, o_LOCK=self.locked)
            m.d.comb += cd.clk.eq(out)
        m.submodules.reset_sync = ResetSynchronizer(~self.locked, domain=cd.name)
        return m


