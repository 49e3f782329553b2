"""The accelerator with AXI ports: a vendor-neutral IP for PCIe shells (docs/axi-export.md).

A PCIe DMA engine such as Xilinx XDMA moves the host's bytes as AXI4-Stream and maps a BAR
as AXI4-Lite.  The streams are ``link_bytes`` (W) bytes wide (8 to 512 bits: XDMA's 64- to
512-bit streams connect without a width converter), and the link's frames, padded to whole
beats (dlforge.rtl.link.protocol), are self-delimiting, so the streams carry them as they
are: ``s_axis`` (host to card) feeds the link, ``TLAST`` and ``TKEEP`` there are ignored (the
host writes whole padded frames, so every beat is full); ``m_axis`` (card to host) marks the
last beat of every frame with ``TLAST`` and keeps every byte (``TKEEP`` all ones: the padding
is part of the frame), so that a DMA read returns whole frames.  ``s_axil`` reads the same register file as the link's ``READ_REGS`` and takes the
``RESET`` write, for a driver or a monitor that does not own the stream.

Port names flatten to ``s_axis__tdata``, ``s_axil__awaddr`` and so on; ``aclk`` and
``aresetn`` (synchronous, active low) clock and reset every interface, as XDMA's
``axi_aclk``/``axi_aresetn`` do.
"""

from amaranth import ClockDomain, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .jpeg.limits import DEFAULT_MAX_HEIGHT, DEFAULT_MAX_WIDTH
from .link.control import REGISTERS
from .link.protocol import MAX_PAYLOAD, Register, header_beats, trailer_beats
from .top import AcceleratorTop

__all__ = ["AxiAccelerator", "axi_stream_signature", "axi_lite_signature", "OKAY", "SLVERR"]

OKAY = 0b00
SLVERR = 0b10


def axi_stream_signature(data_width=8):
    """AXI4-Stream, seen from the master (``TREADY`` the only signal flowing back)."""
    return wiring.Signature({"tdata": Out(data_width), "tkeep": Out(data_width // 8),
                             "tvalid": Out(1), "tready": In(1), "tlast": Out(1)})


def axi_lite_signature(addr_width=8, data_width=32):
    """AXI4-Lite, seen from the master: the AW, W, B, AR and R channels."""
    return wiring.Signature({
        "awaddr": Out(addr_width), "awprot": Out(3), "awvalid": Out(1), "awready": In(1),
        "wdata": Out(data_width), "wstrb": Out(data_width // 8), "wvalid": Out(1),
        "wready": In(1),
        "bresp": In(2), "bvalid": In(1), "bready": Out(1),
        "araddr": Out(addr_width), "arprot": Out(3), "arvalid": Out(1), "arready": In(1),
        "rdata": In(data_width), "rresp": In(2), "rvalid": In(1), "rready": Out(1),
    })


class AxiAccelerator(wiring.Component):
    """:class:`~dlforge.rtl.top.AcceleratorTop` between AXI4-Stream and AXI4-Lite ports.

    Register ``N`` sits at byte address ``4 * N`` (``N`` < 64).  Reads and writes of other
    addresses (unaligned, or above the register file when ``addr_width`` > 8) answer
    ``SLVERR``; aligned writes answer ``OKAY``, and only writing 1 to ``RESET`` (byte 0
    strobed) does anything, as over the link.
    """

    def __init__(self, cores=1, max_width=DEFAULT_MAX_WIDTH, max_height=DEFAULT_MAX_HEIGHT,
                 max_payload=MAX_PAYLOAD, *, conv=None, reply_payload=None,
                 input_fifo_bytes=None, addr_width=8, link_bytes=1):
        if not 8 <= addr_width <= 32:
            self._MustUse__silence = True
            raise ValueError(f"addr_width must be 8 to 32 (64 registers of 4 bytes), "
                             f"not {addr_width}")
        try:
            fifo = max(64, 2 * link_bytes) if input_fifo_bytes is None else input_fifo_bytes
            self.accelerator = AcceleratorTop(cores, max_width, max_height, max_payload,
                                              input_fifo_bytes=fifo, conv=conv,
                                              reply_payload=reply_payload, register_port=True,
                                              link_bytes=link_bytes)
        except ValueError:
            self._MustUse__silence = True
            raise
        self.addr_width, self.link_bytes = addr_width, link_bytes
        super().__init__({
            "aclk": In(1),
            "aresetn": In(1),
            "s_axis": In(axi_stream_signature(8 * link_bytes)),
            "m_axis": Out(axi_stream_signature(8 * link_bytes)),
            "s_axil": In(axi_lite_signature(addr_width, 32)),
        })

    def elaborate(self, platform):
        m = Module()
        # Local: the ports are the clock and reset, whatever the design around uses.
        m.domains.sync = cd = ClockDomain("sync", local=True)
        m.d.comb += [cd.clk.eq(self.aclk), cd.rst.eq(~self.aresetn)]
        m.submodules.accelerator = top = self.accelerator

        # ---- Streams ---------------------------------------------------------------------------
        rx, tx = self.s_axis, self.m_axis
        m.d.comb += [top.i.payload.eq(rx.tdata), top.i.valid.eq(rx.tvalid),
                     rx.tready.eq(top.i.ready),
                     tx.tdata.eq(top.o.payload), tx.tvalid.eq(top.o.valid),
                     top.o.ready.eq(tx.tready)]
        m.d.comb += tx.tkeep.eq(-1)
        # TLAST follows the outgoing frame: its header beats (the length is in bytes 6..8),
        # then a down-counter over payload and CRC beats (compared with constants only).
        w = self.link_bytes
        shift = (w - 1).bit_length()
        hb, tb = header_beats(w), trailer_beats(w)
        header = Signal(8 * w * hb)
        header_at = Signal(range(max(hb, 2)))
        in_body = Signal()
        left = Signal(33)
        sent = tx.tvalid & tx.tready
        with m.If(~in_body):
            with m.If(sent):
                seen = Signal(8 * w * hb)
                m.d.comb += seen.eq(header)
                m.d.comb += seen.word_select(header_at, 8 * w).eq(tx.tdata)
                m.d.sync += [header.eq(seen), header_at.eq(header_at + 1)]
                with m.If(header_at == hb - 1):
                    length = seen[48:72]
                    m.d.sync += [header_at.eq(0), in_body.eq(1),
                                 left.eq(((length + w - 1) >> shift) + tb)]
        with m.Else():
            m.d.comb += tx.tlast.eq(left == 1)
            with m.If(sent):
                m.d.sync += left.eq(left - 1)
                with m.If(left == 1):
                    m.d.sync += in_body.eq(0)

        # ---- AXI4-Lite ---------------------------------------------------------------------------
        bus = self.s_axil

        def decodes(addr):
            """An aligned address inside the register file."""
            inside = addr[:2] == 0
            if self.addr_width > 8:
                inside &= addr[8:] == 0
            return inside
        assert REGISTERS == 64                          # addr[2:8] indexes them

        # Writes: AW and W are taken in any order, one write at a time; B answers both.
        aw_full, w_full = Signal(), Signal()
        awaddr = Signal(self.addr_width)
        wdata = Signal(32)
        wstrb = Signal(4)
        m.d.comb += [bus.awready.eq(~aw_full), bus.wready.eq(~w_full)]
        with m.If(bus.awvalid & ~aw_full):
            m.d.sync += [aw_full.eq(1), awaddr.eq(bus.awaddr)]
        with m.If(bus.wvalid & ~w_full):
            m.d.sync += [w_full.eq(1), wdata.eq(bus.wdata), wstrb.eq(bus.wstrb)]
        with m.If(aw_full & w_full & ~bus.bvalid):
            ok = decodes(awaddr)
            m.d.sync += [aw_full.eq(0), w_full.eq(0), bus.bvalid.eq(1),
                         bus.bresp.eq(Mux(ok, OKAY, SLVERR))]
            m.d.comb += top.reg_reset.eq(ok & (awaddr[2:8] == Register.RESET) & wstrb[0]
                                         & wdata[0])
        with m.Elif(bus.bvalid & bus.bready):
            m.d.sync += bus.bvalid.eq(0)

        # Reads: the value is captured when AR is taken, so RDATA holds still while the
        # master stalls R (CYCLES would not).
        m.d.comb += [bus.arready.eq(~bus.rvalid), top.reg_addr.eq(bus.araddr[2:8])]
        with m.If(bus.arvalid & bus.arready):
            ok = decodes(bus.araddr)
            m.d.sync += [bus.rvalid.eq(1), bus.rdata.eq(Mux(ok, top.reg_data, 0)),
                         bus.rresp.eq(Mux(ok, OKAY, SLVERR))]
        with m.Elif(bus.rvalid & bus.rready):
            m.d.sync += bus.rvalid.eq(0)
        return m
