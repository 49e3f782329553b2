"""``dlforge export-axi``: the accelerator as Verilog with AXI ports and its manifest
(:func:`dlforge.gen.axi_export.export_axi`, docs/axi-export.md)."""

import json

from dlforge.rtl.conv.config import parse_engine
from dlforge.rtl.jpeg.limits import DEFAULT_MAX_HEIGHT, DEFAULT_MAX_WIDTH

from ..axi_export import export_axi

__all__ = ["add_commands", "cmd_export_axi"]


def cmd_export_axi(args):
    """Write the accelerator with AXI4-Stream and AXI4-Lite ports (``dlforge_axi.v``) and its
    manifest.json into ``--output``: what a PCIe DMA shell such as XDMA integrates."""
    path, info = export_axi(args.output, cores=args.cores, max_width=args.max_width,
                            max_height=args.max_height, max_payload=args.max_payload,
                            reply_payload=args.reply_payload, conv=parse_engine(args.engine),
                            addr_width=args.addr_width, link_bytes=args.link_bytes)
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        print(f"wrote {path} and {path.parent / 'manifest.json'} "
              f"(top {info['top']}, {len(info['ports'])} ports)")
    return 0


def add_commands(sub):
    """Register ``export-axi`` on the ``dlforge`` subparsers ``sub``."""
    p = sub.add_parser("export-axi", help="the accelerator as Verilog with AXI4-Stream and "
                                          "AXI4-Lite ports plus manifest.json, for a PCIe DMA "
                                          "shell such as XDMA")
    p.add_argument("-o", "--output", required=True, help="output folder")
    p.add_argument("--cores", type=int, default=1, help="JPEG decoder cores, 0-16 (default 1)")
    p.add_argument("--max-width", type=int, default=DEFAULT_MAX_WIDTH,
                   help=f"widest image (default {DEFAULT_MAX_WIDTH})")
    p.add_argument("--max-height", type=int, default=DEFAULT_MAX_HEIGHT,
                   help=f"tallest image (default {DEFAULT_MAX_HEIGHT})")
    p.add_argument("--max-payload", type=int, default=None,
                   help="largest request payload in bytes (default 4096)")
    p.add_argument("--reply-payload", type=int, default=None,
                   help="largest reply payload in bytes (default: --max-payload)")
    p.add_argument("--engine", default="none", metavar="none|RxCxS",
                   help="convolution engine: rows x columns x int8 lanes, other sizes as "
                        "EngineConfig's defaults; or none (default)")
    p.add_argument("--addr-width", type=int, default=8,
                   help="AXI4-Lite address bits, 8-32 (default 8: the 64 registers exactly)")
    p.add_argument("--link-bytes", type=int, default=1, choices=(1, 4, 8, 16, 32, 64),
                   help="stream width in bytes: 8..64 for XDMA's 64..512-bit streams "
                        "(default 1)")
    p.add_argument("--json", action="store_true", help="print the manifest as JSON")
    p.set_defaults(func=cmd_export_axi)
