"""Byte-level view of a scan's entropy-coded data: stuffing removed, markers turned into tokens.

``FF 00`` becomes a data byte FF; ``FF D0``..``FF D7`` a restart token; any other ``FF xx``
(after optional ``FF`` fill bytes) ends the scan with an END token carrying ``xx``; the end
of the packet (``last``) without a marker gives an EOF token.  After END or EOF no byte is
taken until ``restart`` is pulsed: what follows belongs to the marker parser.
"""

from enum import IntEnum

from amaranth import Module, Signal
from amaranth.lib import wiring, stream, data
from amaranth.lib.wiring import In, Out

from .syntax import Marker

__all__ = ["TokenKind", "TokenLayout", "ByteLayout", "Unstuffer"]


class TokenKind(IntEnum):
    """What the unstuffer passes on besides data bytes: the scan's segment boundaries, which the
    Huffman decoder must check in the golden model's order."""

    DATA = 0
    RESTART = 1      # value: n of RSTn
    END = 2          # value: the marker code that ended the scan
    EOF = 3          # the packet ended inside the scan


TokenLayout = data.StructLayout({"value": 8, "kind": 2})
ByteLayout = data.StructLayout({"byte": 8, "last": 1})


class Unstuffer(wiring.Component):
    """Takes the byte-level syntax (FF stuffing, fill bytes, markers) out of the scan before
    Huffman decoding, so that the decoder's one-clock loop sees only data bits and tokens."""

    i: In(stream.Signature(ByteLayout))
    o: Out(stream.Signature(TokenLayout))
    restart: In(1)          # forget the state of the previous scan
    stopped: Out(1)         # an END or EOF token has been produced

    def elaborate(self, platform):
        m = Module()
        ff_seen = Signal()
        eof_pending = Signal()        # the last byte gave a token; EOF follows it
        free = ~self.o.valid | self.o.ready
        m.d.comb += self.i.ready.eq(free & ~self.stopped & ~eof_pending)
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += self.o.valid.eq(0)

        def emit(kind, value):
            m.d.sync += [self.o.valid.eq(1), self.o.payload.kind.eq(kind),
                         self.o.payload.value.eq(value)]
            if kind in (TokenKind.END, TokenKind.EOF):
                m.d.sync += self.stopped.eq(1)

        byte, last = self.i.payload.byte, self.i.payload.last
        is_rst = (byte >= Marker.RST0) & (byte <= Marker.RST7)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += ff_seen.eq(0)
            with m.If(~ff_seen & (byte != 0xFF)):
                emit(TokenKind.DATA, byte)
            with m.Elif(ff_seen & (byte == 0x00)):
                emit(TokenKind.DATA, 0xFF)
            with m.Elif(byte == 0xFF):                         # a marker's FF, or fill
                with m.If(last):
                    emit(TokenKind.EOF, 0)
                with m.Else():
                    m.d.sync += ff_seen.eq(1)
            with m.Elif(is_rst):
                emit(TokenKind.RESTART, byte[:3])
            with m.Else():
                emit(TokenKind.END, byte)
            # The packet ends on a data byte or a restart: the scan is cut short.
            ended = ff_seen & (byte != 0x00) & (byte != 0xFF) & ~is_rst
            with m.If(last & ~ended & ~(byte == 0xFF)):
                m.d.sync += eof_pending.eq(1)
        with m.Elif(eof_pending & free):
            emit(TokenKind.EOF, 0)
            m.d.sync += eof_pending.eq(0)
        with m.If(self.restart):
            m.d.sync += [ff_seen.eq(0), self.stopped.eq(0), self.o.valid.eq(0), eof_pending.eq(0)]
        return m
