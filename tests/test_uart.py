"""UART host link: frames on the wire are exact, the receiver tolerates ±2 % rate error, and
errors (framing, break, glitch, overrun) drop and count what they must and nothing else."""

import random

import pytest
from amaranth import Module
from amaranth.back import rtlil
from amaranth.sim import Simulator

from dlforge.rtl.link.protocol import BAUD
from dlforge.rtl.link.uart import UartLink, UartRx, UartTx, uart_divisor
from amaranth_streams import collect_beats, send_beats


def frame_bits(byte, stop=1):
    """A frame's line levels, one per bit: start, data LSB first, stop."""
    return [0] + [(byte >> k) & 1 for k in range(8)] + [stop]


def simulate(dut, bench, *background):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for process in background:
        sim.add_testbench(process, background=True)
    sim.add_testbench(bench)
    sim.run()


# --- uart_divisor -------------------------------------------------------------------------------

@pytest.mark.parametrize("clk_hz, baud, divisor", [
    (75_000_000, 3_000_000, 25),        # exact
    (12_000_000, 3_000_000, 4),         # exact, the smallest allowed
    (48_000_000, 3_000_000, 16),
    (100_000_000, 3_000_000, 33),       # 3.03 Mbaud: +1.0 %
    (25_000_000, 115_200, 217),         # 115.207 kbaud
    (12.24e6, 3_000_000, 4),            # 3.06 Mbaud: exactly +2 %, still allowed
    (11.76e6, 3_000_000, 4),            # exactly -2 %
])
def test_divisor_rounds_to_nearest(clk_hz, baud, divisor):
    assert uart_divisor(clk_hz, baud) == divisor


@pytest.mark.parametrize("clk_hz, baud, reason", [
    (12.25e6, 3_000_000, "off"),        # divisor 4 gives 3.0625 Mbaud: +2.08 %
    (52_500_000, 3_000_000, "off"),     # 17.5 -> 18 gives 2.917 Mbaud: -2.78 %
    (10_000_000, 3_000_000, "at least"),   # 3.33 clocks per bit
    (1_000_000, 3_000_000, "at least"),
    (0, 3_000_000, "positive"),
])
def test_divisor_refuses_bad_clocks(clk_hz, baud, reason):
    with pytest.raises(ValueError, match=reason):
        uart_divisor(clk_hz, baud)


def test_components_refuse_small_divisors():
    with pytest.raises(ValueError):
        UartTx(3)
    with pytest.raises(ValueError):
        UartRx(3)
    with pytest.raises(ValueError):
        UartRx(4, fifo_depth=0)
    with pytest.raises(ValueError):
        UartLink(9_000_000)           # 3 clocks per bit at BAUD


# --- elaboration --------------------------------------------------------------------------------

@pytest.mark.parametrize("fifo_depth", [1, 2, 3, 4, 16, 2048])
def test_receiver_elaborates_without_zero_width_signals(fifo_depth):
    text = rtlil.convert(UartRx(25, fifo_depth), name="uart_rx")
    assert "wire width 0 " not in text
    assert "uart_rx" in text


def test_link_elaborates_at_board_clocks():
    for clk_hz, divisor in [(75_000_000, 25), (12_000_000, 4), (48_000_000, 16)]:
        link = UartLink(clk_hz)
        assert link.divisor == divisor == uart_divisor(clk_hz, BAUD)
        text = rtlil.convert(link, name="uart_link")
        assert "wire width 0 " not in text


# --- transmitter --------------------------------------------------------------------------------

def decode_line(levels, divisor):
    """A receiver model: hunt for falling edges, sample each bit at its centre.  Returns
    [(start clock, byte)]; asserts every start bit is low and every stop bit high."""
    frames, t = [], 1
    while t < len(levels):
        if levels[t - 1] == 1 and levels[t] == 0:
            centres = [t + k * divisor + divisor // 2 for k in range(10)]
            assert centres[-1] < len(levels), f"frame at clock {t} runs past the trace"
            bits = [levels[c] for c in centres]
            assert bits[0] == 0, f"start bit at clock {t} is not low at its centre"
            assert bits[9] == 1, f"stop bit of the frame at clock {t} is low"
            frames.append((t, sum(b << k for k, b in enumerate(bits[1:9]))))
            t = centres[-1]
        t += 1
    return frames


@pytest.mark.parametrize("divisor", [4, 7, 25])
def test_tx_back_to_back_frames_are_exact(divisor):
    rng = random.Random(divisor)
    data = [rng.randrange(256) for _ in range(50)]
    dut = UartTx(divisor)
    levels = []
    lead_in, tail = 5, 3 * divisor

    async def record(ctx):
        while True:
            _, _, tx = await ctx.tick().sample(dut.tx)
            levels.append(tx)

    async def bench(ctx):
        await ctx.tick().repeat(lead_in)
        await send_beats(ctx, dut.i, data)
        await ctx.tick().repeat(10 * divisor + tail)

    simulate(dut, bench, record)
    frames = decode_line(levels, divisor)
    assert [byte for _, byte in frames] == data
    starts = [t for t, _ in frames]
    assert [b - a for a, b in zip(starts, starts[1:])] == [10 * divisor] * (len(data) - 1)
    assert levels[:starts[0]] == [1] * starts[0] and starts[0] >= lead_in      # idles high
    end = starts[-1] + 10 * divisor
    assert levels[end:] == [1] * (len(levels) - end) and len(levels) - end >= tail
    # Each bit holds for exactly ``divisor`` clocks: the whole trace is the ideal waveform.
    wave = [level for byte in data for level in frame_bits(byte) for _ in range(divisor)]
    assert levels[starts[0]:end] == wave


def test_tx_line_idles_high_between_spaced_bytes():
    divisor = 5
    dut = UartTx(divisor)
    data = [0x00, 0xFF, 0x55]
    levels = []

    async def record(ctx):
        while True:
            _, _, tx = await ctx.tick().sample(dut.tx)
            levels.append(tx)

    async def bench(ctx):
        for byte in data:
            await send_beats(ctx, dut.i, [byte])
            await ctx.tick().repeat(15 * divisor)      # one frame, then 5 idle bits

    simulate(dut, bench, record)
    frames = decode_line(levels, divisor)
    assert [byte for _, byte in frames] == data
    for (a, _), (b, _) in zip(frames, frames[1:]):
        gap = levels[a + 10 * divisor:b]
        assert len(gap) >= 4 * divisor and gap == [1] * len(gap)


# --- receiver -----------------------------------------------------------------------------------

class LineDriver:
    """Drives a UART line with levels held for fractional numbers of clocks: each edge lands on
    the clock nearest its ideal time, so a rate error accumulates as it would on a real line."""

    def __init__(self, ctx, line):
        self.ctx, self.line = ctx, line
        self.time = 0.0        # ideal time, in clocks
        self.clock = 0         # clocks actually simulated

    async def hold(self, level, clocks):
        self.ctx.set(self.line, level)
        self.time += clocks
        n = round(self.time) - self.clock
        if n > 0:
            await self.ctx.tick().repeat(n)
            self.clock += n

    async def send(self, byte, bit_clocks, stop=1):
        for level in frame_bits(byte, stop):
            await self.hold(level, bit_clocks)


def run_receiver(dut, drive, ready_prob=1.0, seed=0, settle_clocks=None):
    """Simulate ``drive(driver)`` on ``dut.rx`` while draining ``dut.o``; return the bytes
    received and the (framing_errors, overruns) counts at the end."""
    got, counts = [], []
    rng = random.Random(seed)

    async def sink(ctx):
        await collect_beats(ctx, dut.o, got, rng, ready_prob)

    async def bench(ctx):
        driver = LineDriver(ctx, dut.rx)
        await drive(driver)
        await driver.hold(1, settle_clocks or 3 * dut.divisor)
        counts.append((ctx.get(dut.framing_errors), ctx.get(dut.overruns)))

    simulate(dut, bench, sink)
    return got, counts[0]


@pytest.mark.parametrize("rate_error", [0.0, +0.02, -0.02])
@pytest.mark.parametrize("divisor, n_bytes", [(4, 60), (7, 40), (25, 16)])
def test_rx_receives_at_rate_error(divisor, n_bytes, rate_error):
    """The sender runs ``rate_error`` fast (+) or slow (-), with random idle gaps (often none)."""
    rng = random.Random(divisor * 1000 + int(rate_error * 100))
    data = [rng.randrange(256) for _ in range(n_bytes)]
    bit_clocks = divisor / (1 + rate_error)
    dut = UartRx(divisor)

    async def drive(driver):
        await driver.hold(1, 2.5 * divisor)
        for byte in data:
            if rng.random() < 0.5:
                await driver.hold(1, rng.uniform(0, 3) * bit_clocks)
            await driver.send(byte, bit_clocks)

    got, (framing_errors, overruns) = run_receiver(dut, drive, ready_prob=0.5, seed=divisor)
    assert [int(b) for b in got] == data
    assert (framing_errors, overruns) == (0, 0)


def test_rx_framing_error_and_break_drop_and_recover():
    divisor = 8
    dut = UartRx(divisor)

    async def drive(driver):
        await driver.hold(1, 2 * divisor)
        await driver.send(0xA1, divisor)
        await driver.send(0x5C, divisor, stop=0)       # dropped, counted
        await driver.hold(1, divisor)
        await driver.send(0x3E, divisor)
        await driver.hold(0, 30 * divisor)             # a break: counted once
        await driver.hold(1, 2 * divisor)
        await driver.send(0xC7, divisor)
        await driver.send(0x00, divisor)

    got, (framing_errors, overruns) = run_receiver(dut, drive)
    assert [int(b) for b in got] == [0xA1, 0x3E, 0xC7, 0x00]
    assert (framing_errors, overruns) == (2, 0)


def test_rx_ignores_glitches_shorter_than_half_a_bit():
    divisor = 25                         # half a bit: 12.5 clocks
    dut = UartRx(divisor)

    async def drive(driver):
        await driver.hold(1, 2 * divisor)
        for width in range(1, 13):     # up to 12 clocks low: glitches
            await driver.hold(0, width)
            await driver.hold(1, 12 * divisor)
        await driver.send(0x96, divisor)
        await driver.hold(1, 2 * divisor)
        await driver.hold(0, 13)        # 13 clocks, over half a bit: a start bit, then ones
        await driver.hold(1, 12 * divisor)
        await driver.send(0x2B, divisor)

    got, (framing_errors, overruns) = run_receiver(dut, drive)
    assert [int(b) for b in got] == [0x96, 0xFF, 0x2B]
    assert (framing_errors, overruns) == (0, 0)


def test_rx_overrun_drops_and_counts_bytes_that_find_the_fifo_full():
    divisor = 4
    dut = UartRx(divisor, fifo_depth=4)
    data = [0x10, 0x21, 0x32, 0x43, 0x54, 0x65, 0x76, 0x87, 0x98, 0xA9]
    got, counts = [], []

    async def bench(ctx):
        ctx.set(dut.o.ready, 0)
        driver = LineDriver(ctx, dut.rx)
        await driver.hold(1, 2 * divisor)
        for byte in data:
            await driver.send(byte, divisor)
        await driver.hold(1, 3 * divisor)
        counts.append((ctx.get(dut.framing_errors), ctx.get(dut.overruns)))
        ctx.set(dut.o.ready, 1)
        for _ in range(20):
            _, _, valid, payload = await ctx.tick().sample(dut.o.valid, dut.o.payload)
            if valid:
                got.append(payload)

    simulate(dut, bench)
    assert counts == [(0, 6)]
    assert [int(b) for b in got] == data[:4]


def test_error_counters_saturate():
    """The counters stop at 0xFFFF rather than wrap; they start near the top (set by the
    testbench) because 65535 bad frames would take too long to simulate."""
    divisor = 4
    dut = UartRx(divisor, fifo_depth=1)
    seen = []

    async def bench(ctx):
        ctx.set(dut.framing_errors, 0xFFFE)
        ctx.set(dut.overruns, 0xFFFE)
        driver = LineDriver(ctx, dut.rx)
        await driver.hold(1, 2 * divisor)
        for _ in range(3):
            await driver.send(0x00, divisor, stop=0)
            await driver.hold(1, divisor)
        for byte in (0x11, 0x22, 0x33, 0x44):          # the first fills the FIFO
            await driver.send(byte, divisor)
            seen.append((ctx.get(dut.framing_errors), ctx.get(dut.overruns)))

    simulate(dut, bench)
    assert seen == [(0xFFFF, 0xFFFE), (0xFFFF, 0xFFFF), (0xFFFF, 0xFFFF), (0xFFFF, 0xFFFF)]


# --- link ---------------------------------------------------------------------------------------

def test_link_loopback_with_random_ready():
    rng = random.Random(7)
    data = [rng.randrange(256) for _ in range(200)]
    link = UartLink(12_000_000)                 # divisor 4 at BAUD, the 2048-byte FIFO
    assert link.divisor == 4
    top = Module()
    top.submodules.link = link
    top.d.comb += link.rx.eq(link.tx)
    got = []

    async def sink(ctx):
        await collect_beats(ctx, link.o, got, rng, ready_prob=0.3)

    async def bench(ctx):
        await send_beats(ctx, link.i, data, rng=rng, gap_prob=0.02)
        for _ in range(100):
            if len(got) == len(data):
                break
            await ctx.tick().repeat(10 * link.divisor)
        assert (ctx.get(link.framing_errors), ctx.get(link.overruns)) == (0, 0)

    simulate(top, bench, sink)
    assert [int(b) for b in got] == data
