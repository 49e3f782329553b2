"""Which registers of an ECP5 netlist sit behind deep logic: a census, blind to placement.

nextpnr reports one critical path per placement, and the two-file core's binding path moves
between the parser, the raster and the Huffman loop from seed to seed (docs/studies/
huffman_loop.md).  This reads the netlist yosys wrote for nextpnr (``dlforge synth ... -o
DIR`` leaves it in DIR) and estimates, for every register and memory input, the latest
arrival over the logic in front of it, with a fixed routing delay per hop: what remains
when placement is perfect.  It counts, per block, the inputs later than a threshold.

The delays are rough (ECP5 speed grade 6, as nextpnr reports them: LUT4 0.45 ns, the slice's
wide multiplexers 0.25 from their LUTs, a carry chain 0.06 per cell, a block RAM's output
3.0 after the clock, a multiplier 3.5, a LUT RAM's read 1.0); ``--hop`` is the routing per
net (0.5 ns: logic placed side by side; nextpnr's own paths run 0.4 to 3.6 ns a hop).

    .venv/bin/python docs/studies/logic_depth.py build/studies/pair_core_1024r9/*_x2.json \\
        --threshold 10 --hop 0.7
"""
import argparse
import collections
import json
import re
import sys

LUT, WIDE_MUX, CARRY_IN, CARRY_OUT, CARRY_SUM = 0.45, 0.25, 0.45, 0.06, 0.3
FF_OUT, EBR_OUT, MULT, LUTRAM_READ, SETUP_FF, SETUP_RAM = 0.5, 3.0, 3.5, 1.0, 0.1, 0.4


class Netlist:
    def __init__(self, path, hop):
        design = json.load(open(path))
        top = next(mod for mod in design["modules"].values()
                   if mod.get("attributes", {}).get("top"))
        self.cells, self.hop = top["cells"], hop
        self.names = {}                                 # bit -> its shortest visible name
        for name, net in top["netnames"].items():
            if not net.get("hide_name"):
                for bit in net["bits"]:
                    if isinstance(bit, int) and len(name) < len(self.names.get(bit, name + "-")):
                        self.names[bit] = name
        self.driver = {}
        for name, cell in self.cells.items():
            for port, bits in cell["connections"].items():
                if cell["port_directions"].get(port) == "output":
                    for bit in bits:
                        if isinstance(bit, int):
                            self.driver[bit] = (name, port)
        self.arrival = {}

    def _inputs(self, cell, ports):
        for port in ports:
            for bit in cell["connections"].get(port, []):
                if isinstance(bit, int):
                    yield bit

    def _latest(self, cell, ports, add, hop):
        return max((self.bit(b) + hop + add for b in self._inputs(cell, ports)), default=0.0)

    def bit(self, bit):
        """When ``bit`` settles after the clock edge."""
        if bit not in self.driver:
            return 0.0                                  # a port or a constant
        key = self.driver[bit]
        if key in self.arrival:
            return self.arrival[key]
        self.arrival[key] = 0.0                         # a combinational loop ends here
        name, port = key
        cell, kind, hop = self.cells[name], self.cells[name]["type"], self.hop
        if kind == "TRELLIS_FF":
            t = FF_OUT
        elif kind == "DP16KD":
            t = EBR_OUT
        elif kind == "LUT4":
            t = self._latest(cell, "ABCD", LUT, hop)
        elif kind in ("PFUMX", "L6MUX21"):
            data, select = (["ALUT", "BLUT"], ["C0"]) if kind == "PFUMX" else (["D0", "D1"], ["SD"])
            t = max(self._latest(cell, data, WIDE_MUX, 0.0), self._latest(cell, select, LUT, hop))
        elif kind == "CCU2C":
            operands = ["A0", "B0", "C0", "D0", "A1", "B1", "C1", "D1"]
            t = max(self._latest(cell, operands, CARRY_IN, hop),
                    self._latest(cell, ["CIN"], CARRY_OUT if port == "COUT" else CARRY_SUM, 0.0))
        elif kind == "TRELLIS_DPR16X4":
            t = self._latest(cell, ["RAD"], LUTRAM_READ, hop)
        elif kind == "MULT18X18D":
            t = self._latest(cell, [p for p in cell["port_directions"]
                                    if p[0] in "AB" and p[1:].isdigit()], MULT, hop)
        else:
            t = 0.0
        self.arrival[key] = t
        return t

    def endpoints(self):
        """(arrival, register or memory, port) for every clocked input; a register is
        named by its output's net (yosys may leave its cell unnamed)."""
        for name, cell in self.cells.items():
            kind = cell["type"]
            if kind == "TRELLIS_FF":
                name = self.names.get(cell["connections"]["Q"][0], name)
            if kind == "TRELLIS_FF":
                ports, setup = ["DI", "CE", "LSR"], SETUP_FF
            elif kind == "TRELLIS_DPR16X4":
                ports, setup = ["DI", "WAD", "WRE"], SETUP_RAM
            elif kind == "DP16KD":
                ports = [p for p, d in cell["port_directions"].items()
                         if d == "input" and not p.startswith("CLK")]
                setup = SETUP_RAM
            else:
                continue
            for port in ports:
                for bit in self._inputs(cell, [port]):
                    yield self.bit(bit) + self.hop + setup, name, port


def block_of(name, depth):
    """The register's hierarchical block, ``depth`` levels down, and its own name."""
    name = re.sub(r"\$.*", "", name)
    name = re.sub(r"_(first|second)?_?(TRELLIS|LUT4|CCU2C|PFUMX|L6MUX).*", "", name)
    parts = name.split(".")
    return ".".join(parts[:depth]), ".".join(parts[depth:]) or parts[-1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("netlist")
    parser.add_argument("--threshold", type=float, default=10.0, help="ns")
    parser.add_argument("--hop", type=float, default=0.5, help="ns of routing per net")
    parser.add_argument("--depth", type=int, default=4, help="hierarchy levels per block")
    parser.add_argument("--top", type=int, default=20, help="registers to list")
    args = parser.parse_args()
    sys.setrecursionlimit(1_000_000)
    netlist = Netlist(args.netlist, args.hop)
    late = [e for e in netlist.endpoints() if e[0] >= args.threshold]
    blocks = collections.Counter(block_of(name, args.depth)[0] for _, name, _ in late)
    registers = {}
    for t, name, port in late:
        key = block_of(name, args.depth)
        registers[key] = max(registers.get(key, 0.0), t)
    print(f"{len(late)} inputs at or after {args.threshold} ns ({args.hop} ns a hop)")
    for block, count in blocks.most_common():
        print(f"  {count:6d}  {block}")
    for (block, register), t in sorted(registers.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"  {t:5.1f} ns  {block}: {register}")


if __name__ == "__main__":
    main()
