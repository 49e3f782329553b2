"""Options that more than one command family takes, each defined once: a block's parameters
(``gen``, ``sim``, ``synth`` and the block benches), a ``1/N`` scale (``decode``, ``stream``,
``bench device``) and the check that ``--plot`` can draw (``synth``, the benches that plot)."""

import argparse

__all__ = ["add_block_params", "block_params", "require_matplotlib", "scale"]


def add_block_params(parser, block):
    """``block``'s parameters as options of ``parser``, and no other block's: a parameter the
    block does not take is refused by argparse.  Each defaults to None (the block's default
    then applies), so :func:`block_params` passes on only what the user chose; the choices
    are checked by :meth:`~dlforge.gen.blocks.Block.full_params`, whose message names them."""
    for p in block.params:
        choices = f"; one of {', '.join(map(str, p.choices))}" if p.choices else ""
        parser.add_argument(f"--{p.name.replace('_', '-')}", type=p.type, default=None,
                            help=f"{p.help} (default {p.default}{choices})")


def block_params(block, args):
    """The block parameters the command line chose: {name: value}."""
    return {p.name: getattr(args, p.name) for p in block.params
            if getattr(args, p.name) is not None}


def scale(text):
    """``--scale 1/N`` as argparse's type: 2, 4 or 8 (1 for full size)."""
    from dlforge.host.jpeg.scaled_decode import parse_scale
    try:
        return parse_scale(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def require_matplotlib():
    """Refuse ``--plot`` before a long run if matplotlib (an optional extra) is missing."""
    import importlib.util
    if importlib.util.find_spec("matplotlib") is None:
        raise RuntimeError("--plot needs matplotlib, which is not installed: "
                           "pip install 'dlforge[plot]' (or pip install matplotlib)")
