"""The AXI export in amaranth.sim: the link's control plane alone (cores=0, no engine; one small
engine for the RESET test).  AXI4-Lite reads and writes with random handshake timing; frames
through the AXI4-Stream ports, TLAST on the last byte of each reply; the two register paths
agreeing; the Verilog of a full configuration against its manifest; the ``export-axi``
command.  A background checker holds every channel the export drives to the AXI rule: once
VALID is up it stays, and the payload holds still, until READY."""

import argparse
import json
import random
import re
import struct

import pytest
from amaranth import ClockDomain
from amaranth.sim import Simulator

from dlforge.gen.axi_export import TOP, axi_manifest, export_axi
from dlforge.gen.commands import axi as axi_commands
from dlforge.rtl.axi_export import OKAY, SLVERR, AxiAccelerator
from dlforge.rtl.link.protocol import (HEADER_BYTES, TRAILER_BYTES, VERSION, Opcode, Register,
                                       Status, encode_frame)
from dlforge.host.link.frame_parser import FrameDecoder

MAX_PAYLOAD = 256


def _dut(addr_width=8):
    return AxiAccelerator(0, 64, 64, MAX_PAYLOAD, addr_width=addr_width)


class Bench:
    """A simulation of ``dut`` with AXI masters and a stream collector for its ports."""

    def __init__(self, dut, seed):
        self.dut = dut
        self.rng = random.Random(seed)
        self.cd = ClockDomain("axi")            # the testbench's view of aclk
        self.cd.clk = dut.aclk
        self.out = []                           # (tdata, tlast) taken from m_axis
        self.resets = 0                         # cycles with the register port's reset up
        self.ready_prob = 0.6

    def run(self, bench, max_cycles=20000):
        sim = Simulator(self.dut)
        sim.add_clock(1e-8, domain=self.cd)

        async def main(ctx):
            ctx.set(self.dut.aresetn, 0)
            await self.idle(ctx, 2)
            ctx.set(self.dut.aresetn, 1)
            await bench(ctx)

        async def watchdog(ctx):
            await self.idle(ctx, max_cycles)
            raise AssertionError(f"not done after {max_cycles} cycles")

        sim.add_testbench(main)
        sim.add_testbench(watchdog, background=True)
        sim.add_testbench(self._check_rules, background=True)
        sim.add_testbench(self._collect, background=True)
        sim.run()

    # (Plain ticks only: the ``until``/``repeat`` generators of a testbench that a failure
    # abandons complain when they are collected, which buries the failure.)
    async def idle(self, ctx, cycles):
        for _ in range(cycles):
            await ctx.tick(self.cd)

    async def tick(self, ctx, *signals):
        values = await ctx.tick(self.cd).sample(*signals)
        return values[2:]                       # (after the domain's clock and reset)

    async def _check_rules(self, ctx):
        s, m = self.dut.s_axil, self.dut.m_axis
        channels = {"R": (s.rvalid, s.rready, s.rdata, s.rresp), "B": (s.bvalid, s.bready, s.bresp),
                    "m_axis": (m.tvalid, m.tready, m.tdata, m.tlast)}
        signals = [sig for channel in channels.values() for sig in channel]
        signals.append(self.dut.accelerator.reg_reset)
        held = {}
        while True:
            values = list(await self.tick(ctx, *signals))
            self.resets += values.pop()
            for name, channel in channels.items():
                valid, ready, *payload = values[:len(channel)]
                del values[:len(channel)]
                if name in held:
                    assert valid and payload == held[name], \
                        f"{name}: VALID dropped or payload changed before READY"
                    del held[name]
                if valid and not ready:
                    held[name] = payload

    async def _collect(self, ctx):
        m = self.dut.m_axis
        while True:
            ctx.set(m.tready, self.rng.random() < self.ready_prob)
            valid, ready, data, last = await self.tick(ctx, m.tvalid, m.tready, m.tdata, m.tlast)
            if valid and ready:
                self.out.append((data, last))

    # ---- AXI4-Stream master on s_axis --------------------------------------------------------
    async def send(self, ctx, data, gap_prob=0.3):
        s = self.dut.s_axis
        for byte in data:
            while self.rng.random() < gap_prob:
                ctx.set(s.tvalid, 0)
                await self.idle(ctx, 1)
            # TLAST at random: the export must ignore it
            ctx.set(s.tvalid, 1)
            ctx.set(s.tdata, byte)
            ctx.set(s.tlast, self.rng.random() < 0.5)
            while not (await self.tick(ctx, s.tready))[0]:
                pass
        ctx.set(s.tvalid, 0)

    async def received(self, ctx, n):
        """Wait until ``n`` bytes came out; return them, and where TLAST was high (among all
        bytes so far)."""
        while len(self.out) < n:
            await self.idle(ctx, 1)
        ends = [k for k, (_, last) in enumerate(self.out) if last]
        return bytes(d for d, _ in self.out[:n]), ends

    # ---- AXI4-Lite master on s_axil ----------------------------------------------------------
    async def write(self, ctx, addr, value, strb=0xF):
        """AW and W each after a random delay (either first); B with random BREADY."""
        s, rng = self.dut.s_axil, self.rng
        ctx.set(s.awaddr, addr)
        ctx.set(s.wdata, value)
        ctx.set(s.wstrb, strb)
        aw_wait, w_wait = rng.randrange(5), rng.randrange(5)
        aw_done = w_done = False
        while not (aw_done and w_done):
            ctx.set(s.awvalid, not aw_done and aw_wait == 0)
            ctx.set(s.wvalid, not w_done and w_wait == 0)
            aw_wait, w_wait = max(aw_wait - 1, 0), max(w_wait - 1, 0)
            awv, awr, wv, wr, bv = await self.tick(ctx, s.awvalid, s.awready, s.wvalid,
                                                   s.wready, s.bvalid)
            assert not bv, "B before both AW and W were taken"
            aw_done |= bool(awv and awr)
            w_done |= bool(wv and wr)
        ctx.set(s.awvalid, 0)
        ctx.set(s.wvalid, 0)
        while True:
            ctx.set(s.bready, rng.random() < 0.5)
            bv, br, resp = await self.tick(ctx, s.bvalid, s.bready, s.bresp)
            if bv and br:
                ctx.set(s.bready, 0)
                return resp

    async def read(self, ctx, addr):
        """AR after a random delay; R with random RREADY.  Returns (RDATA, RRESP)."""
        s, rng = self.dut.s_axil, self.rng
        await self.idle(ctx, rng.randrange(4))
        ctx.set(s.araddr, addr)
        ctx.set(s.arvalid, 1)
        while not (await self.tick(ctx, s.arready))[0]:
            pass
        ctx.set(s.arvalid, 0)
        ctx.set(s.araddr, rng.randrange(256))       # AR is done: the address may change
        while True:
            ctx.set(s.rready, rng.random() < 0.5)
            rv, rr, data, resp = await self.tick(ctx, s.rvalid, s.rready, s.rdata, s.rresp)
            if rv and rr:
                ctx.set(s.rready, 0)
                return data, resp

    async def reads_in_flight(self, ctx, addrs):
        """ARs offered back to back while R stalls at random: one R per AR, in order."""
        s, rng = self.dut.s_axil, self.rng
        pending, got = list(addrs), []
        while len(got) < len(addrs):
            ctx.set(s.arvalid, bool(pending))
            ctx.set(s.araddr, pending[0] if pending else 0)
            ctx.set(s.rready, rng.random() < 0.3)
            arv, arr, rv, rr, data, resp = await self.tick(ctx, s.arvalid, s.arready, s.rvalid,
                                                           s.rready, s.rdata, s.rresp)
            if arv and arr:
                pending.pop(0)
            if rv and rr:
                got.append((data, resp))
        ctx.set(s.arvalid, 0)
        ctx.set(s.rready, 0)
        return got

    async def writes_in_flight(self, ctx, writes):
        """AW and W streams of ``writes`` (addr, value), each at its own random pace, while
        B stalls at random: one B per write, in order."""
        s, rng = self.dut.s_axil, self.rng
        aw, w, got = list(writes), list(writes), []
        while len(got) < len(writes):
            ctx.set(s.awvalid, bool(aw) and (ctx.get(s.awvalid) or rng.random() < 0.5))
            ctx.set(s.awaddr, aw[0][0] if aw else 0)
            ctx.set(s.wvalid, bool(w) and (ctx.get(s.wvalid) or rng.random() < 0.5))
            ctx.set(s.wdata, w[0][1] if w else 0)
            ctx.set(s.wstrb, 0xF)
            ctx.set(s.bready, rng.random() < 0.3)
            awv, awr, wv, wr, bv, br, resp = await self.tick(
                ctx, s.awvalid, s.awready, s.wvalid, s.wready, s.bvalid, s.bready, s.bresp)
            if awv and awr:
                aw.pop(0)
                ctx.set(s.awvalid, 0)
            if wv and wr:
                w.pop(0)
                ctx.set(s.wvalid, 0)
            if bv and br:
                got.append(resp)
        ctx.set(s.awvalid, 0)
        ctx.set(s.wvalid, 0)
        ctx.set(s.bready, 0)
        return got

    async def reg(self, ctx, register):
        data, resp = await self.read(ctx, 4 * register)
        assert resp == OKAY, f"{Register(register).name}: RRESP {resp}"
        return data


def _frame_sizes(frames):
    return [HEADER_BYTES + len(f.payload) + TRAILER_BYTES for f in frames]


def test_axi_lite_reads_and_writes():
    b = Bench(_dut(), seed=1)
    seen = {}

    async def bench(ctx):
        seen["version"] = await b.reg(ctx, Register.VERSION)
        seen["cores"] = await b.reg(ctx, Register.CORES)
        seen["max_payload"] = await b.reg(ctx, Register.MAX_PAYLOAD)
        seen["max_width"] = await b.reg(ctx, Register.MAX_WIDTH)
        seen["cycles"] = [await b.reg(ctx, Register.CYCLES) for _ in range(3)]
        seen["unaligned"] = await b.read(ctx, 4 * Register.CYCLES + 2)
        seen["writes"] = []
        for addr, value, strb in ((4 * Register.RESET, 1, 0xF),      # resets (one pulse)
                                  (4 * Register.RESET, 0, 0xF),      # 0: nothing
                                  (4 * Register.RESET, 1, 0xE),      # bit 0 not strobed
                                  (4 * Register.VERSION, 1, 0xF),    # read-only: ignored
                                  (4 * Register.RESET + 1, 1, 0xF)):  # unaligned
            seen["writes"].append((await b.write(ctx, addr, value, strb), b.resets))
        seen["version_after"] = await b.reg(ctx, Register.VERSION)
        seen["in_flight"] = await b.reads_in_flight(
            ctx, [4 * Register.VERSION, 4 * Register.CORES + 1, 4 * Register.MAX_WIDTH,
                  4 * Register.MAX_PAYLOAD])
        seen["writes_in_flight"] = await b.writes_in_flight(
            ctx, [(4 * Register.RESET, 1), (4 * Register.RESET + 2, 1), (4 * Register.RESET, 1)])
        seen["resets"] = b.resets
        seen["before_reset"] = await b.reg(ctx, Register.CYCLES)
        ctx.set(b.dut.aresetn, 0)                   # ARESETn, active low
        await b.idle(ctx, 1)
        ctx.set(b.dut.aresetn, 1)
        seen["after_reset"] = await b.reg(ctx, Register.CYCLES)

    b.run(bench)
    assert seen["version"] == VERSION and seen["cores"] == 0
    assert seen["max_payload"] == MAX_PAYLOAD and seen["max_width"] == 64
    c = seen["cycles"]
    assert c[0] < c[1] < c[2], c
    assert seen["unaligned"] == (0, SLVERR)
    assert seen["writes"] == [(OKAY, 1), (OKAY, 1), (OKAY, 1), (OKAY, 1), (SLVERR, 1)]
    assert seen["version_after"] == VERSION
    assert seen["in_flight"] == [(VERSION, OKAY), (0, SLVERR), (64, OKAY), (MAX_PAYLOAD, OKAY)]
    assert seen["writes_in_flight"] == [OKAY, SLVERR, OKAY] and seen["resets"] == 3
    assert seen["after_reset"] < 20 < seen["before_reset"], seen


def test_addresses_past_the_registers_are_slave_errors():
    b = Bench(_dut(addr_width=12), seed=2)
    seen = {}

    async def bench(ctx):
        seen["reads"] = [await b.read(ctx, a) for a in (0x000, 0x0FC, 0x100, 0xFFC)]
        seen["write"] = await b.write(ctx, 0x100 + 4 * Register.RESET, 1)   # no alias of RESET
        seen["resets"] = b.resets

    b.run(bench)
    assert seen["reads"] == [(VERSION, OKAY), (0, OKAY), (0, SLVERR), (0, SLVERR)]
    assert seen["write"] == SLVERR and seen["resets"] == 0
    for width in (7, 33):
        with pytest.raises(ValueError, match="addr_width"):
            AxiAccelerator(0, addr_width=width)


def test_a_ping_through_the_streams():
    b = Bench(_dut(), seed=3)
    payload = bytes(random.Random(3).randrange(256) for _ in range(41))
    request = encode_frame(Opcode.PING, 0xBEEF, payload, max_payload=MAX_PAYLOAD)
    got = {}

    async def bench(ctx):
        await b.send(ctx, request)
        got["bytes"], got["last"] = await b.received(ctx, len(request))
        await b.idle(ctx, 50)                           # nothing more comes
        got["total"] = len(b.out)

    b.run(bench)
    frames = FrameDecoder(MAX_PAYLOAD).feed(got["bytes"])
    assert [(f.opcode, f.status, f.tag, f.payload) for f in frames] == \
        [(Opcode.PING, Status.OK, 0xBEEF, payload)]
    assert got["last"] == [len(request) - 1] and got["total"] == len(request)


def test_frames_back_to_back_each_end_with_tlast():
    b = Bench(_dut(), seed=4)
    b.ready_prob = 0.4
    requests = [encode_frame(Opcode.PING, 1, b"\x5a" * 9, max_payload=MAX_PAYLOAD),
                encode_frame(Opcode.PING, 2, b"", max_payload=MAX_PAYLOAD),   # empty payload
                encode_frame(0x44, 3, b"xyz", max_payload=MAX_PAYLOAD),      # an ERROR reply
                encode_frame(Opcode.READ_REGS, 4, struct.pack("<HH", 0, 3))]
    expected = 12 + 9 + 4 + 16 + (16 + 1) + (16 + 12)
    got = {}

    async def bench(ctx):
        await b.send(ctx, b"".join(requests), gap_prob=0.1)
        got["bytes"], got["last"] = await b.received(ctx, expected)

    b.run(bench)
    frames = FrameDecoder(MAX_PAYLOAD).feed(got["bytes"])
    assert [(f.opcode, f.tag) for f in frames] == \
        [(Opcode.PING, 1), (Opcode.PING, 2), (Opcode.ERROR, 3), (Opcode.READ_REGS, 4)]
    assert frames[2].status == Status.BAD_OPCODE and frames[2].payload == b"\x44"
    ends, total = [], 0
    for size in _frame_sizes(frames):
        total += size
        ends.append(total - 1)
    assert total == expected and got["last"] == ends


def test_read_regs_over_the_stream_agrees_with_axi_lite():
    dut = _dut()
    constants = {r["number"]: r["value"] for r in axi_manifest(dut)["registers"] if "value" in r}
    b = Bench(dut, seed=5)
    bad_crc = bytearray(encode_frame(Opcode.PING, 7, b"abc", max_payload=MAX_PAYLOAD))
    bad_crc[-1] ^= 0x10                     # payload CRC: refused, CRC_ERRORS counts it
    bad_header = bytearray(encode_frame(Opcode.PING, 8, b"", max_payload=MAX_PAYLOAD))
    bad_header[10] ^= 0x01                  # header CRC: dropped, HEADER_ERRORS counts it
    count = 16
    read = encode_frame(Opcode.READ_REGS, 9, struct.pack("<HH", 0, count))
    got = {}

    async def bench(ctx):
        await b.send(ctx, bytes(bad_crc) + bytes(bad_header))
        await b.received(ctx, HEADER_BYTES + 1 + TRAILER_BYTES)      # the ERROR frame
        got["before"] = await b.reg(ctx, Register.CYCLES)
        await b.send(ctx, read)
        got["bytes"], _ = await b.received(
            ctx, (HEADER_BYTES + 1 + TRAILER_BYTES) + (HEADER_BYTES + 4 * count + TRAILER_BYTES))
        got["after"] = await b.reg(ctx, Register.CYCLES)
        got["axil"] = [await b.reg(ctx, r) for r in range(count)]

    b.run(bench)
    error, reply = FrameDecoder(MAX_PAYLOAD).feed(got["bytes"])
    assert (error.opcode, error.status, error.tag) == (Opcode.ERROR, Status.BAD_CRC, 7)
    assert (reply.opcode, reply.status, reply.tag) == (Opcode.READ_REGS, Status.OK, 9)
    stream = list(struct.unpack(f"<{count}I", reply.payload))
    axil = got["axil"]
    assert got["before"] < stream[Register.CYCLES] < got["after"]
    assert stream[Register.CRC_ERRORS] == axil[Register.CRC_ERRORS] == 1
    assert stream[Register.HEADER_ERRORS] == axil[Register.HEADER_ERRORS] >= 1
    for r in range(count):
        if r != Register.CYCLES:
            assert stream[r] == axil[r], Register(r).name
        if r in constants:
            assert axil[r] == constants[r], Register(r).name


def _verilog_ports(text, top):
    """{name: (direction, width)} from the ``module`` port list and its declarations."""
    match = re.search(rf"^module {top}\((.*?)\);", text, re.M | re.S)
    names = [n.strip() for n in match.group(1).split(",")]
    body = text[match.end():text.index("endmodule", match.end())]
    ports = {}
    for name in names:
        decl = re.search(rf"^\s*(input|output)\s+(?:\[(\d+):0\]\s+)?{re.escape(name)};", body,
                         re.M)
        ports[name] = (decl.group(1), int(decl.group(2) or 0) + 1)
    return ports


def test_the_verilog_of_a_full_configuration_matches_its_manifest(tmp_path):
    from dlforge.rtl.conv.config import EngineConfig
    engine = EngineConfig(rows=2, cols=2, simd=2, weight_depth=512, input_depth=2048,
                          psum_depth=256, link_bytes=16, max_reduction=1152)
    path, info = export_axi(tmp_path, cores=1, max_width=1024, max_height=1024,
                            max_payload=1024, reply_payload=2048, conv=engine)
    text = path.read_text()
    assert path.name == f"{TOP}.v" and "core0" in text and "engine" in text
    assert json.loads((tmp_path / "manifest.json").read_text()) == info
    verilog = _verilog_ports(text, TOP)
    manifest = {p["name"]: (p["direction"], p["width"]) for p in info["ports"]}
    assert manifest == verilog
    assert verilog["s_axis__tdata"] == ("input", 8) and verilog["s_axil__rdata"] == ("output", 32)
    assert set(verilog) >= {"aclk", "aresetn", "m_axis__tlast", "s_axil__bresp"}
    roles = {p["name"]: p.get("role") for p in info["ports"]}
    assert roles["s_axil__awprot"] == roles["s_axil__arprot"] == "ignored"
    assert "ignored" in roles["s_axis__tlast"] and "active low" in roles["aresetn"]
    named = {n for i in info["interfaces"].values() for n in i["signals"].values()}
    assert named | {"aclk", "aresetn"} == set(verilog)
    regs = {r["name"]: r for r in info["registers"]}
    assert regs["ARRAY"]["value"] == 2 | 2 << 8 | 2 << 16 | 8 << 24
    assert regs["CORES"]["value"] == 1 and regs["RESET"]["byte_address"] == 0x3C
    assert info["parameters"]["engine"]["weight_depth"] == 512


def _export_axi(argv):
    """``dlforge export-axi ARGV`` through the command's own parser registration."""
    parser = argparse.ArgumentParser(prog="dlforge")
    axi_commands.add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["export-axi", *argv])
    return args.func(args)


def test_the_command_writes_verilog_and_manifest(tmp_path, capsys):
    out = tmp_path / "ip"
    common = ["--cores", "0", "--max-payload", "256", "--engine", "none"]
    assert _export_axi(["-o", str(out), *common, "--addr-width", "12"]) == 0
    printed = capsys.readouterr().out
    assert str(out / f"{TOP}.v") in printed and str(out / "manifest.json") in printed
    assert f"module {TOP}(" in (out / f"{TOP}.v").read_text()
    info = json.loads((out / "manifest.json").read_text())
    assert info["parameters"]["cores"] == 0 and info["parameters"]["max_payload"] == 256
    assert info["parameters"]["reply_payload"] == 256 and info["parameters"]["engine"] is None
    assert info["interfaces"]["s_axil"]["addr_width"] == 12
    assert _export_axi(["-o", str(out), *common, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verilog"] == f"{TOP}.v"
    with pytest.raises(ValueError, match="ROWSxCOLSxLANES"):
        _export_axi(["-o", str(out), "--engine", "big"])


def test_the_reset_register_resets_the_engine():
    from dlforge.rtl.conv.config import EngineConfig
    engine = EngineConfig(rows=2, cols=2, simd=1, weight_depth=16, input_depth=32, psum_depth=8,
                          link_bytes=16, max_reduction=9)
    b = Bench(AxiAccelerator(0, 64, 64, MAX_PAYLOAD, conv=engine), seed=6)
    seen = {}

    async def bench(ctx):
        # a word that is no descriptor (wrong magic): the engine stops with an error code
        await b.send(ctx, encode_frame(Opcode.CONV_WORDS, 1, bytes(16)))
        seen["error"] = 0
        while not seen["error"]:
            seen["error"] = await b.reg(ctx, Register.CONV_ERROR)
        seen["write"] = await b.write(ctx, 4 * Register.RESET, 1)
        seen["after"] = await b.reg(ctx, Register.CONV_ERROR)
        seen["array"] = await b.reg(ctx, Register.ARRAY)

    b.run(bench)
    assert seen["error"] != 0 and seen["write"] == OKAY and seen["after"] == 0
    assert seen["array"] == 2 | 2 << 8 | 1 << 16 | 8 << 24


@pytest.mark.verilator
def test_wide_export_with_cores_and_engine_under_cocotbext_axi():
    """The export at a PCIe width (256-bit streams) with two decoder cores and the engine,
    driven by cocotbext-axi's AXI4-Stream source/sink (random pauses on both) and AXI4-Lite
    master in Verilator: images and a layer bit-exact, TLAST at every frame's end."""
    from dlforge.rtl.axi_export import AxiAccelerator
    from dlforge.rtl.conv.config import EngineConfig
    from dlforge.sim.tools.runner import run_cocotb
    conv = {"rows": 2, "cols": 2, "simd": 1, "weight_depth": 64, "input_depth": 256,
            "psum_depth": 32, "link_bytes": 16, "max_reduction": 64}
    top = AxiAccelerator(2, 64, 64, 256, conv=EngineConfig(**conv), link_bytes=32,
                         input_fifo_bytes=1024)
    result = run_cocotb(top, name="axi_c2_w64_l32_conv", test_module="dlforge.sim.tb.axi_export",
                        params={"link_bytes": 32, "cores": 2, "max_width": 64, "max_height": 64,
                                "max_payload": 256, "conv": conv, "limit": 6, "seed": 5},
                        quiet=True)
    assert result.passed, f"{result.failed} (log: {result.test_dir}/sim.log)"
    assert result.metrics["files"] == 6 and result.metrics["ok"] >= 3
