"""Golden model of a whole int8 network as dlforge runs it: a
:class:`~dlforge.host.conv.program.NetworkProgram`'s engine layers by the brief's section 3
contract (:func:`~dlforge.sim.models.conv_model.conv_layer`) and its host operations between
them.

The program's format, the input's quantisation and check, and the host operations are the
network program contract (host/conv/program.py), which the compiler and the quantiser
produce and every device runs: the simulated board and a real one layer by layer through the
engine, the ``cpu`` device through this model.  This model imports that contract (the import
rule's one exception for a golden model, tests/import_rule.py) and adds only the engine
layers' arithmetic, so a device's result is either equal to it or wrong.
"""

from dlforge.host.conv.program import check_input, run_host_op
from dlforge.sim.models.conv_model import conv_layer

__all__ = ["run_network", "run_engine_layer"]


def run_engine_layer(op, x, residual=None):
    """The int8 output of :class:`~dlforge.host.conv.program.EngineLayer` ``op`` on ``x``
    (and its int8 ``residual``), by the engine's contract."""
    return conv_layer(x, op.weight, op.bias, op.multiplier, op.shift, op.stride, op.padding,
                      op.groups, op.relu, op.pool, residual)


def run_network(program, x, keep=False):
    """int8 outputs for a quantised int8 input batch (N, C, H, W); with ``keep`` also every
    value (for layer-by-layer comparisons)."""
    x = check_input(program, x)
    values = {0: x}
    for op in program.ops:
        if op.kind == "engine":
            res = None if op.residual is None else values[op.residual]
            values[op.output] = run_engine_layer(op, values[op.source], res)
        else:
            values[op.output] = run_host_op(op, values[op.source])
    out = values[program.output]
    if program.flatten_output:
        out = out.reshape(out.shape[0], -1)
    return (out, values) if keep else out
