"""Write a block's Verilog and its manifest.json into a folder."""

import json
from pathlib import Path

from amaranth.back import verilog

from .blocks import get_block
from .manifest import manifest

__all__ = ["generate"]


def generate(block_name, out_dir, **params):
    """Generate ``block_name`` with ``params`` into ``out_dir``; return (verilog path, manifest)."""
    block = get_block(block_name)
    params = block.full_params(params)
    component = block.build(**params)
    top = block.module_name(params)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{top}.v"
    path.write_text(verilog.convert(component, name=top, emit_src=False))
    info = manifest(block.name, component, params, block.facts(component))
    info["top"] = top
    info["verilog"] = path.name
    (out_dir / "manifest.json").write_text(json.dumps(info, indent=2) + "\n")
    return path, info
