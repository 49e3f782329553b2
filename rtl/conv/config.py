"""The convolution engine's generator parameters, shared by the gateware and the host planner.

The array has ``rows x cols`` processing elements (PEs) of ``simd`` multipliers each.  Both
array dimensions hold output channels: one tile of work computes ``rows * cols`` output
channels of one output pixel at a time, each PE owning one channel's accumulator, with the
``simd`` lanes summing that many input channels per clock (see docs/conv-engine.md for why).
"""

from dataclasses import dataclass, asdict

__all__ = ["EngineConfig", "parse_engine"]


@dataclass(frozen=True)
class EngineConfig:
    """The engine's sizes in one place, so that the gateware generator and the host's tiling
    planner build and plan for the same engine (a device reports them in its registers)."""

    rows: int = 8
    cols: int = 8
    simd: int = 8
    operand_bits: int = 8           # 8 or 16
    weight_depth: int = 1024        # S-operand words per PE in each half of the weight buffer
    input_depth: int = 8192         # S-operand words in each half of the input buffer
    psum_depth: int = 1024          # pixels of partial sums (rows * cols accumulators each)
    link_bytes: int = 32            # bytes per stream word on the host link, in and out
    max_reduction: int = 4608       # longest dot product a layer may have: C/groups * KH * KW

    def __post_init__(self):
        for name in ("rows", "cols", "simd", "weight_depth", "input_depth", "psum_depth",
                     "max_reduction"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.operand_bits not in (8, 16):
            raise ValueError("operand_bits must be 8 or 16")
        lane_bytes = self.simd * self.operand_bits // 8
        if self.link_bytes < 16 or self.link_bytes & (self.link_bytes - 1):
            raise ValueError(f"link_bytes must be a power of two of at least 16 (a descriptor "
                             f"is one word), got {self.link_bytes}")
        if self.link_bytes % lane_bytes or self.link_bytes % self.rows:
            raise ValueError(f"link_bytes {self.link_bytes} must be a multiple of a "
                             f"{lane_bytes}-byte operand vector and of rows ({self.rows})")

    @property
    def channels(self):
        """Output channels computed at once (all PEs)."""
        return self.rows * self.cols

    @property
    def macs_per_clock(self):
        return self.rows * self.cols * self.simd

    @property
    def vector_bytes(self):
        """Bytes of one ``simd``-operand word."""
        return self.simd * self.operand_bits // 8

    @property
    def acc_bits(self):
        """Accumulator width for exact sums of ``max_reduction`` products plus a bias.

        For 8-bit operands the contract keeps every result inside int32, and sums modulo 2**32
        of exact products are exact whenever the result fits, so 32 bits suffice whatever the
        order of the additions.  Wider operands get the bits their longest sum needs.
        """
        if self.operand_bits == 8:
            return 32
        largest = self.max_reduction << (2 * self.operand_bits - 2)   # (-2**(b-1))**2 each
        return max(32, (largest + (1 << 31)).bit_length() + 1)        # plus an int32 bias

    def as_dict(self):
        return asdict(self) | {"acc_bits": self.acc_bits, "macs_per_clock": self.macs_per_clock}


def parse_engine(text, like=None):
    """An engine from a command line: ``none`` (None) or ``ROWSxCOLSxLANES``; the other sizes
    as ``like`` (default: EngineConfig's)."""
    from dataclasses import replace
    if text is None or str(text).lower() == "none":
        return None
    try:
        rows, cols, simd = (int(v) for v in str(text).lower().split("x"))
        return replace(like or EngineConfig(), rows=rows, cols=cols, simd=simd)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"--engine {text!r}: give none or ROWSxCOLSxLANES, e.g. 2x2x4 "
                         f"({exc})") from None
