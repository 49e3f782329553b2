"""The blocks that ``dlforge gen`` and ``dlforge sim`` know: how to build each, how to test it.

A block is a name, a constructor with its command-line parameters, the facts its manifest
reports, and the cocotb testbench (with the parameter sets its regression covers).
"""

from dataclasses import dataclass, field
from typing import Callable

from dlforge.rtl.jpeg.limits import DEFAULT_MAX_HEIGHT, DEFAULT_MAX_WIDTH

__all__ = ["Param", "Block", "BLOCKS", "get_block"]


@dataclass(frozen=True)
class Param:
    """One parameter of a generated block, as the CLI offers it and as it names the block's
    build folders."""

    name: str
    type: type
    default: object
    choices: tuple = None
    help: str = ""
    short: str = ""            # tag in module names, e.g. "p" -> idct_p8
    tag_default: bool = True   # False: the tag only where the value is not the default


@dataclass(frozen=True)
class Block:
    """A block the CLI can generate, simulate, synthesise and benchmark: one entry ties its
    gateware, its testbench, its manifest facts and its regression cases together."""

    name: str
    summary: str
    params: tuple
    build: Callable            # (**params) -> wiring.Component
    facts: Callable            # (component) -> dict for the manifest
    testbench: str             # cocotb module
    tb_params: Callable        # (component, **options) -> dict for the testbench
    regression: tuple = field(default_factory=tuple)   # parameter sets of the full regression
    bench: tuple = None        # (testcase, {testbench params}) that measures speed, or None
    cxx_opt: str = None        # gcc level of its Verilator builds (None: the runner's rule)

    def defaults(self):
        """{parameter: its default}."""
        return {p.name: p.default for p in self.params}

    def module_name(self, params):
        """Verilog module (and folder) name that says which parameters it was made with."""
        tags = [f"{p.short}{params.get(p.name, p.default)}" for p in self.params
                if p.short and (p.tag_default or params.get(p.name, p.default) != p.default)]
        return "_".join([self.name, *tags])

    def full_params(self, params):
        """``params`` completed with defaults and checked against the declared choices."""
        known = {p.name: p for p in self.params}
        unknown = set(params) - set(known)
        if unknown:
            raise ValueError(f"{self.name}: unknown parameter(s) {', '.join(sorted(unknown))}")
        out = self.defaults() | {k: v for k, v in params.items() if v is not None}
        for name, value in out.items():
            p = known[name]
            if p.choices is not None and value not in p.choices:
                raise ValueError(f"{self.name}: {name} must be one of "
                                 f"{', '.join(map(str, p.choices))}, not {value!r}")
        return out


def _idct_block():
    from dlforge.rtl.jpeg.idct import Idct, SAMPLES_PER_CLOCK

    def facts(c):
        return {
            "function": "8x8 inverse DCT bit-exact to libjpeg-turbo jpeg_idct_islow "
                        "(dequantisation, range limit included)",
            "input_order": "natural (row-major); lane k of a beat is the k-th next coefficient",
            "output_order": "raster; lane k of a beat is the k-th next sample",
            "latency_cycles": c.latency,
            "block_interval_cycles": c.block_interval,
            "throughput_samples_per_cycle": c.samples_per_clock,
        }

    def tb_params(c, blocks=2000, seed=1):
        return {"samples_per_clock": c.samples_per_clock, "latency": c.latency,
                "blocks": blocks, "seed": seed}

    return Block(
        name="idct",
        summary="8x8 islow IDCT, bit-exact to libjpeg-turbo",
        params=(Param("samples_per_clock", int, 1, SAMPLES_PER_CLOCK,
                      "coefficients in and samples out per clock", short="p"),),
        build=lambda samples_per_clock=1: Idct(samples_per_clock),
        facts=facts,
        testbench="dlforge.sim.tb.idct",
        tb_params=tb_params,
        regression=tuple({"samples_per_clock": n} for n in SAMPLES_PER_CLOCK),
        bench=("full_rate", {}),
    )


def _entropy_block():
    from dlforge.rtl.jpeg.entropy_decoder import EntropyDecoder

    def facts(c):
        return {
            "function": "JPEG entropy decoding: unstuffing, restart markers, Huffman tables "
                        "from DHT bodies, one symbol per clock",
            "status_codes": "dlforge.rtl.jpeg.status.JpegStatus",
        }

    def tb_params(c, blocks=None, seed=5):
        return {"corpus": "quick", "limit": blocks or 1000, "seed": seed, "ready_prob": 0.8}

    return Block(
        name="entropy",
        summary="JPEG unstuffer + Huffman decoder",
        params=(),
        build=lambda: EntropyDecoder(),
        facts=facts,
        testbench="dlforge.sim.tb.entropy",
        tb_params=tb_params,
        bench=("baseline_files", {"corpus": "photos", "ready_prob": 1.0}),
    )


def _blocks_block():
    from dlforge.rtl.jpeg.block_decoder import BlockDecoder
    from dlforge.rtl.jpeg.idct import SAMPLES_PER_CLOCK

    def facts(c):
        return {
            "function": "a JPEG scan's bytes to decoded 8x8 sample blocks in scan order "
                        "(entropy decoder -> coefficient buffer -> IDCT)",
            "throughput_samples_per_cycle": c.samples_per_clock,
        }

    def tb_params(c, blocks=None, seed=3):
        return {"corpus": "quick", "limit": blocks or 1000, "seed": seed, "ready_prob": 0.8,
                "samples_per_clock": c.samples_per_clock}

    return Block(
        name="blocks",
        summary="JPEG scan -> 8x8 sample blocks",
        params=(Param("samples_per_clock", int, 8, SAMPLES_PER_CLOCK,
                      "IDCT samples per clock", short="p"),),
        build=lambda samples_per_clock=8: BlockDecoder(samples_per_clock),
        facts=facts,
        testbench="dlforge.sim.tb.block_decoder",
        tb_params=tb_params,
        bench=("corpus_files", {"corpus": "photos", "ready_prob": 1.0}),
    )


def _jpeg_block():
    from dlforge.rtl.jpeg.decoder import JpegDecoder
    from dlforge.rtl.small_ram import SMALL_RAMS
    from dlforge.rtl.jpeg.raster import PIXELS_PER_BEAT

    def facts(c):
        return {
            "function": "baseline JPEG files to RGB888 raster images, bit-exact to "
                        "libjpeg-turbo (islow IDCT; fancy or fast upsampling per image)",
            "packets": "dlforge.rtl.jpeg.packets",
            "status_codes": "dlforge.rtl.jpeg.status.JpegStatus",
            "cores": len(c.units), "files_per_core": c.contexts, "dispatch": "input beats routed by dest to per-core lanes "
                                              "(input FIFO, core: the accelerator top's own); "
                                              "files may interleave; output beats of the cores "
                                              "interleave round-robin, each tagged",
            "max_width": c.max_width, "max_height": c.max_height,
            "input_bytes_per_beat": c.input_bytes, "tag_bits": c.tag_bits,
            "output_pixels_per_beat": PIXELS_PER_BEAT, "small_ram": c.small_ram,
        }

    def tb_params(c, blocks=None, seed=7):
        return {"corpus": "quick", "limit": blocks or 1000, "seed": seed, "ready_prob": 0.8,
                "modes": ["fancy", "fast"], "input_bytes": c.input_bytes,
                "tag_bits": c.tag_bits, "max_width": c.max_width, "max_height": c.max_height,
                "cores": len(c.cores)}

    return Block(
        name="jpeg",
        summary="JPEG decoder core: file bytes -> header, RGB888 raster, trailer",
        params=(Param("cores", int, 1, None, "decoder cores behind the dispatcher", short="c"),
                Param("max_width", int, DEFAULT_MAX_WIDTH, None,
                      "widest image (a multiple of 16)", short="w"),
                Param("max_height", int, DEFAULT_MAX_HEIGHT, None, "tallest image"),
                Param("input_bytes", int, 1, (1, 4), "input bytes per beat", short="b"),
                Param("small_ram", str, "block", SMALL_RAMS,
                      "FIFOs, small tables and corner turns in block RAM or LUT RAM"),
                Param("contexts", int, 1, (1, 2),
                      "files per core: 2 decodes two at once in a C-slowed core", short="x",
                      tag_default=False)),
        build=lambda cores=1, max_width=DEFAULT_MAX_WIDTH, max_height=DEFAULT_MAX_HEIGHT,
                     input_bytes=1, small_ram="block", contexts=1: JpegDecoder(
                         cores, max_width, max_height, input_bytes, small_ram=small_ram,
                         contexts=contexts),
        facts=facts,
        testbench="dlforge.sim.tb.jpeg_core",
        tb_params=tb_params,
        regression=({}, {"input_bytes": 4}, {"cores": 2}),
        # (its testbenches decode whole corpora: optimised C++ pays for its longer build)
        cxx_opt="-Os",
        # (every file checked against the golden model in the bench's run: 23 s of the
        # model for the 64 photos, beside minutes of simulation)
        bench=("decode_files", {"corpus": "photos", "ready_prob": 1.0, "modes": ["fancy"]}),
    )


def _conv_block():
    from dlforge.rtl.conv.config import EngineConfig
    from dlforge.rtl.conv.engine import ConvEngine

    def build(**params):
        return ConvEngine(EngineConfig(**params))

    def facts(c):
        cfg = c.cfg
        return {
            "function": "int8/int16 convolution tiles (output-stationary systolic array, "
                        "output channels on both dimensions), bias, per-channel requantisation, "
                        "residual add, ReLU, 2x2 max pool",
            "config": cfg.as_dict(),
            "descriptor": "dlforge.rtl.conv.descriptor.TileDescriptor",
            "errors": "dlforge.rtl.conv.descriptor.DescriptorError",
            "link_bits": 8 * cfg.link_bytes,
        }

    def tb_params(c, blocks=None, seed=1):
        from dataclasses import asdict
        return {"config": asdict(c.cfg), "layers": "resnet18",
                "names": ["layer1.0.conv1", "layer4.0.downsample.0"], "seed": seed}

    d = EngineConfig()
    return Block(
        name="conv",
        summary="convolution engine: tile descriptors and data in, int8 results out",
        params=(Param("rows", int, d.rows, None, "PE rows", short="r"),
                Param("cols", int, d.cols, None, "PE columns", short="c"),
                Param("simd", int, d.simd, None, "multipliers per PE", short="s"),
                Param("operand_bits", int, d.operand_bits, (8, 16), "operand width", short="b"),
                Param("weight_depth", int, d.weight_depth, None,
                      "weight words per PE in each half", short="w"),
                Param("input_depth", int, d.input_depth, None,
                      "input vectors in each half", short="i"),
                Param("psum_depth", int, d.psum_depth, None,
                      "pixels of partial sums / results", short="p"),
                Param("link_bytes", int, d.link_bytes, None, "bytes per link word", short="l"),
                Param("max_reduction", int, d.max_reduction, None,
                      "longest dot product (C/groups*KH*KW): sizes 16-bit accumulators")),
        build=build,
        facts=facts,
        testbench="dlforge.sim.tb.conv_engine",
        tb_params=tb_params,
        regression=({"rows": 2, "cols": 2, "simd": 1, "weight_depth": 64, "input_depth": 256,
                     "psum_depth": 32, "link_bytes": 16},),
        # (every layer checked against the golden model in the bench's run: 1.7 s of the
        # model for ResNet-18's 20 layers)
        bench=("run_layers", {"layers": "resnet18"}),
    )


def _link_block():
    from dlforge.rtl.link.protocol import LINK_WIDTHS, MAX_PAYLOAD
    from dlforge.rtl.top import AcceleratorTop

    def build(link_bytes=1, max_payload=MAX_PAYLOAD):
        return AcceleratorTop(cores=0, link_bytes=link_bytes, max_payload=max_payload)

    def facts(c):
        return {"function": "the host link alone (the accelerator top with no decoder core and "
                            "no engine): frame receiver and sender, CRCs, control plane, "
                            "registers",
                "link_bits": 8 * c.link_bytes, "max_payload": c.max_payload,
                "registers": {r.name: v for r, v in c.constant_registers().items()}}

    def tb_params(c, blocks=None, seed=1):
        return {"cores": 0, "link_bytes": c.link_bytes, "max_payload": c.max_payload,
                "seed": seed}

    return Block(
        name="link",
        summary="the host link alone: frames at W bytes a clock, CRCs, registers (what a wide "
                "link costs, out of context)",
        params=(Param("link_bytes", int, 1, LINK_WIDTHS, "link width in bytes a clock",
                      short="l"),
                Param("max_payload", int, MAX_PAYLOAD, None,
                      "largest request payload (a power of two)", short="p")),
        build=build,
        facts=facts,
        testbench="dlforge.sim.tb.accel_top",
        tb_params=tb_params,
        regression=({"link_bytes": 1}, {"link_bytes": 4}, {"link_bytes": 32},
                    {"link_bytes": 64}),
    )


def _resample_block():
    from dlforge.rtl.resample.resampler import Resampler

    def build(taps=7, max_columns=1024, max_rows=1024, lanes=4):
        return Resampler(max_columns=max_columns, max_rows=max_rows, taps=taps, lanes=lanes)

    def facts(c):
        return {"function": "crop, then resize bit-exact to Pillow 13's BILINEAR/BICUBIC "
                            "(torchvision's resized_crop on a PIL image): a horizontal pass "
                            "over a window of the last taps + lanes - 1 pixels with lanes "
                            "output units and a vertical pass over taps + 1 line buffers, "
                            "in Pillow's order for the image",
                "taps": c.taps, "max_columns": c.max_columns, "max_rows": c.max_rows,
                "lanes": c.lanes, "pixels_per_clock": c.lanes}

    def tb_params(c, blocks=None, seed=1):
        return {"taps": c.taps, "lanes": c.lanes, "seed": seed}

    return Block(
        name="resample",
        summary="crop and resize bit-exact to Pillow (torchvision's PIL path), 1-4 pixels a clock",
        params=(Param("taps", int, 7, None, "weights an output (bilinear shrinking by f needs "
                                             "2 ceil(f) + 1)", short="t"),
                Param("max_columns", int, 1024, None, "widest row in and out (pixels)",
                      short="w"),
                Param("max_rows", int, 1024, None, "most rows out", short="h"),
                Param("lanes", int, 4, (1, 2, 4), "pixels a clock (4: a decoder core's raster "
                                                 "beat; 1 fits an ECP5's multipliers)",
                      short="l")),
        build=build,
        facts=facts,
        testbench="dlforge.sim.tb.resample",
        tb_params=tb_params,
        regression=({"taps": 7, "max_columns": 128, "max_rows": 128},
                    {"taps": 7, "max_columns": 128, "max_rows": 128, "lanes": 1}),
        bench=("crop_then_resize", {"width": 96, "height": 72,
                                    "factors": [1, 1.5, 2, 3, 4, 6, 8],
                                    "valid_prob": 1.0, "ready_prob": 1.0}),
    )


_FACTORIES = {"idct": _idct_block, "entropy": _entropy_block, "blocks": _blocks_block,
              "jpeg": _jpeg_block, "conv": _conv_block, "link": _link_block,
              "resample": _resample_block}


def BLOCKS():
    """The registered blocks' names, in the order the CLI lists them."""
    return tuple(_FACTORIES)


def get_block(name):
    """The :class:`Block` called ``name`` (KeyError naming the known blocks otherwise)."""
    try:
        return _FACTORIES[name]()
    except KeyError:
        raise KeyError(f"unknown block {name!r}; known blocks: {', '.join(_FACTORIES)}") from None
