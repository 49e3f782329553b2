"""Describe a generated component for tools outside Python: ports, payload layouts, parameters.

The manifest is what a user wiring the Verilog into a shell reads instead of our source.
"""

from amaranth.hdl import Shape, ShapeCastable, Value
from amaranth.lib import data, wiring

__all__ = ["describe_shape", "describe_ports", "manifest"]


def describe_shape(shape):
    """A JSON-able description of a shape: bit widths, signedness, field offsets."""
    if isinstance(shape, data.ArrayLayout):
        return {"kind": "array", "width": shape.size, "length": shape.length,
                "stride": Shape.cast(shape.elem_shape).width,
                "element": describe_shape(shape.elem_shape)}
    if isinstance(shape, data.StructLayout):
        return {"kind": "struct", "width": shape.size,
                "fields": {name: {"offset": field.offset, **describe_shape(field.shape)}
                           for name, field in shape}}
    if isinstance(shape, ShapeCastable):
        return describe_shape(Shape.cast(shape)) | {"kind": type(shape).__name__}
    shape = Shape.cast(shape)
    return {"kind": "signed" if shape.signed else "unsigned", "width": shape.width}


def describe_ports(component):
    """Verilog ports of ``component`` in the order Amaranth emits them, plus clock and reset."""
    ports = [
        {"name": "clk", "direction": "input", "width": 1, "role": "clock (rising edge)"},
        {"name": "rst", "direction": "input", "width": 1, "role": "synchronous reset, active high"},
    ]
    for path, member, value in component.signature.flatten(component):
        name = "__".join(str(p) for p in path)
        direction = "input" if member.flow == wiring.In else "output"
        entry = {"name": name, "direction": direction, "width": len(Value.cast(value))}
        if member.shape is not None:
            entry["shape"] = describe_shape(member.shape)
        ports.append(entry)
    return ports


def manifest(block, component, parameters, extra=None):
    """A block's manifest: its name, parameters and ports (:func:`describe_ports`), then the
    block's own facts ``extra``; ``dlforge gen`` writes it beside the Verilog."""
    return {
        "block": block,
        "top": block,
        "parameters": dict(parameters),
        "ports": describe_ports(component),
        **(extra or {}),
    }
