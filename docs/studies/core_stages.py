"""Each stage of the JPEG core out of context at a 100 MHz target (issue 20): which stages
stand between today's core and 100 MHz, and what each costs in area.

    .venv/bin/python docs/studies/core_stages.py [STAGE ...] [--seed N]

Stages are built as the default core builds them at max width 4096 (the IDCT at 8 samples
per clock, with and without the reduced IDCTs of scaled decodes; the optional resampler at
2 pixels a clock: at 4 its 168 multipliers do not fit the 85F).  Minutes each (the IDCTs
about four); results in docs/studies/huffman_loop.md.
"""
import argparse
import json

from dlforge.boards.ooc import synthesize


def stages():
    """name -> a function that builds the stage."""
    from dlforge.rtl.jpeg.coefficient_buffer import CoefficientBuffer
    from dlforge.rtl.jpeg.entropy_decoder import EntropyDecoder
    from dlforge.rtl.jpeg.entropy_pair import EntropyDecoderPair
    from dlforge.rtl.jpeg.huffman_decoder import HuffmanDecoder
    from dlforge.rtl.jpeg.idct import Idct
    from dlforge.rtl.jpeg.marker_parser import MarkerParser
    from dlforge.rtl.jpeg.raster import Raster
    from dlforge.rtl.jpeg.unstuff import Unstuffer
    from dlforge.rtl.resample.resampler import Resampler
    return {
        "marker_parser": lambda: MarkerParser(4096, 4096),
        "unstuff": lambda: Unstuffer(),
        "huffman": lambda: HuffmanDecoder(),
        "entropy": lambda: EntropyDecoder(),              # unstuffer + Huffman decoder
        "entropy_pair": lambda: EntropyDecoderPair(),     # the same, two scans at once
        "coefficient_buffer": lambda: CoefficientBuffer(8),
        "idct8": lambda: Idct(8),
        "idct8_reduced": lambda: Idct(8, reduced=True),
        "raster4096": lambda: Raster(4096),
        "resampler_2lanes": lambda: Resampler(lanes=2),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stages", nargs="*")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--device", default="ecp5-85f")
    parser.add_argument("--out", default="build/studies/core_stages")
    args = parser.parse_args()
    built = stages()
    for name in args.stages or built:
        r = synthesize(built[name](), name, f"{args.out}/{name}", device=args.device,
                       freq_mhz=100, seed=args.seed)
        print(json.dumps({"stage": name, **{k: r[k] for k in (
            "fmax_mhz", "luts", "ffs", "lutram", "bram", "dsp", "seconds")}}), flush=True)


if __name__ == "__main__":
    main()
