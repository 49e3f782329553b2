"""From a float PyTorch model to the engine's layer list: a ``torch.export`` graph walked
node by node, every convolution and fully connected layer becoming one engine layer with what
the engine fuses behind it, and the rest either a host operation or a clear refusal.

Fused into an engine layer, in the engine's order (BRIEF section 3):

* ``batch_norm`` right after the convolution: folded into its weights and bias;
* ``add``: the residual (a ResNet shortcut).  Of two operands that are both fresh
  convolutions, the one with more multiply-accumulates keeps its accumulators and the other
  becomes the residual (the shortcut's 1x1, not the 3x3);
* ``relu``;
* ``max_pool2d`` 2x2, stride 2, no padding.

``linear`` is a convolution: on a (C, 1, 1) value a 1x1 one, on a flattened (C, H, W) value
one whose kernel covers the whole H x W (torch's flatten order is C, H, W).  On the host:
other max pools (ResNet's 3x3/2 stem pool) and a global average pool (``adaptive_avg_pool2d``
to 1x1 or a mean over H and W).  ``flatten``, ``dropout`` (eval) and views to (N, -1) are
bookkeeping.  Anything else raises :class:`UnsupportedOperator` naming the node and the
operator.  The result is a :class:`FloatNetwork`; :func:`run_float` runs it in PyTorch for
calibration and to check that the fused form computes what the model does.
"""

import operator
from dataclasses import dataclass, field

import numpy as np

from dlforge.host.conv.program import HostOp

__all__ = ["FloatLayer", "FloatNetwork", "UnsupportedOperator", "compile_exported",
           "compile_module", "run_float", "export_model"]


class UnsupportedOperator(ValueError):
    """A model the engine program cannot express, naming the operator and the node."""


@dataclass
class FloatLayer:
    """An engine layer before quantisation: float weights with the batch norm folded in."""
    name: str
    source: int
    output: int
    weight: np.ndarray          # float64 (OC, C/groups, KH, KW)
    bias: np.ndarray            # float64 (OC)
    stride: int = 1
    padding: int = 0
    groups: int = 1
    relu: bool = False
    pool: bool = False
    residual: int | None = None
    macs: int = 0

    @property
    def kind(self):
        return "engine"


@dataclass
class FloatNetwork:
    ops: list
    shapes: dict                # value -> (C, H, W)
    output: int
    flatten_output: bool = True
    names: dict = field(default_factory=dict)   # value -> the graph node that made it

    @property
    def input_shape(self):
        return self.shapes[0]


def export_model(model, example):
    """``torch.export`` of a float model in eval mode for an example batch."""
    import torch
    model = model.eval()
    with torch.no_grad():
        return torch.export.export(model, (example,))


def compile_module(model, example):
    """A :class:`FloatNetwork` from an ``nn.Module`` and an example input batch."""
    return compile_exported(export_model(model, example))


def _pair(value, name, node):
    if isinstance(value, int):
        return value
    value = list(value)
    if len(value) == 1:
        return value[0]
    if len(value) != 2 or value[0] != value[1]:
        raise UnsupportedOperator(f"{node.name}: {name} {value} is not square "
                                  f"(the engine takes one size for both axes)")
    return value[0]


class _Compiler:
    def __init__(self, ep):
        self.ep = ep
        sig = ep.graph_signature
        state = dict(ep.state_dict)
        state.update(getattr(ep, "constants", {}) or {})
        self.params = {}
        for spec in sig.input_specs:
            name = getattr(spec.arg, "name", None)
            if spec.target is not None and spec.target in state:
                self.params[name] = state[spec.target].detach().double().numpy()
        self.user_inputs = [s.arg.name for s in sig.input_specs
                            if s.kind.name == "USER_INPUT"]
        self.env = {}           # node -> ("value", id) | ("param", array) | ("const", obj)
        self.ops, self.shapes, self.names = [], {}, {}
        self.producer = {}      # value -> FloatLayer that can still take fusions
        self.flat = set()       # values seen through a flatten
        self.uses = {}

    # -- values ------------------------------------------------------------------------------
    def new_value(self, node):
        vid = len(self.shapes)
        shape = tuple(node.meta["val"].shape)
        if len(shape) == 2:
            shape = (shape[1], 1, 1)
        elif len(shape) != 4:
            raise UnsupportedOperator(f"{node.name}: a value of shape {shape}; the engine "
                                      "program holds (N, C, H, W) and (N, F) tensors")
        self.shapes[vid] = shape[-3:]
        self.names[vid] = node.name
        return vid

    def value(self, arg, node):
        kind, obj = self.env.get(arg, ("const", arg)) if hasattr(arg, "op") else ("const", arg)
        if kind != "value":
            raise UnsupportedOperator(f"{node.name}: {node.target} on a "
                                      f"{'parameter' if kind == 'param' else 'constant'}; "
                                      "only activations are supported here")
        return obj

    def param(self, arg, node):
        if arg is None:
            return None
        kind, obj = self.env.get(arg, ("const", None))
        if kind != "param":
            raise UnsupportedOperator(f"{node.name}: {node.target} with a computed weight")
        return obj

    def fusable(self, vid, node, after):
        """The layer that made ``vid`` if ``node`` may fuse into it at stage ``after``."""
        layer = self.producer.get(vid)
        if layer is None or self.uses.get(layer.output, 0) != 1:
            return None
        stage = {"bn": not (layer.relu or layer.pool or layer.residual is not None),
                 "add": not (layer.relu or layer.pool or layer.residual is not None),
                 "relu": not layer.relu, "pool": not layer.pool}[after]
        return layer if stage else None

    # -- the walk ----------------------------------------------------------------------------
    def run(self):
        graph = self.ep.graph
        for node in graph.nodes:
            self.uses_of(node)
        if len(self.user_inputs) != 1:
            raise UnsupportedOperator(f"the model takes {len(self.user_inputs)} inputs; the "
                                      "engine program takes one image batch")
        for node in graph.nodes:
            if node.op == "placeholder":
                if node.name in self.params:
                    self.env[node] = ("param", self.params[node.name])
                else:
                    vid = self.new_value(node)
                    if vid != 0:
                        raise UnsupportedOperator(f"{node.name}: a second input")
                    self.env[node] = ("value", vid)
            elif node.op == "call_function":
                self.call(node)
            elif node.op == "output":
                outs = node.args[0]
                outs = outs if isinstance(outs, (list, tuple)) else [outs]
                if len(outs) != 1:
                    raise UnsupportedOperator(f"the model returns {len(outs)} tensors; one "
                                              "is supported")
                vid = self.value(outs[0], node)
                rank = len(outs[0].meta["val"].shape)
                return FloatNetwork(self.ops, self.shapes, vid, rank == 2, self.names)
            else:
                raise UnsupportedOperator(f"{node.name}: graph node kind {node.op}")
        raise UnsupportedOperator("the graph has no output")

    def uses_of(self, node):
        self.uses[node] = len(node.users)

    def alias(self, node, vid):
        """``node`` is ``vid`` (a fusion or a view): its users count for the layer."""
        self.env[node] = ("value", vid)
        layer = self.producer.get(vid)
        if layer is not None:
            self.uses[layer.output] = len(node.users)

    def call(self, node):
        target = str(node.target)
        name = target.split(".")[1] if target.startswith("aten.") else target
        args = list(node.args)
        handler = getattr(self, "op_" + name.rstrip("_"), None)
        if node.target is operator.getitem:
            handler = self.op_getitem
        if handler is None:
            raise UnsupportedOperator(f"{node.name}: operator {target} is not supported on "
                                      "the engine or the host (supported: conv2d, batch_norm, "
                                      "relu, add, max_pool2d, adaptive_avg_pool2d / mean, "
                                      "flatten, linear, dropout)")
        handler(node, args, dict(node.kwargs))

    # -- operators -----------------------------------------------------------------------------
    def add_layer(self, node, source, weight, bias, stride, padding, groups, name):
        out = self.new_value(node)
        oc, cg, kh, kw = weight.shape
        _, oh, ow = self.shapes[out]
        layer = FloatLayer(name, source, out, weight,
                           np.zeros(oc) if bias is None else bias.astype(np.float64),
                           stride, padding, groups, macs=oc * cg * kh * kw * oh * ow)
        self.ops.append(layer)
        self.producer[out] = layer
        self.uses[out] = len(node.users)
        self.env[node] = ("value", out)

    def op_conv2d(self, node, args, kw):
        names = ("input", "weight", "bias", "stride", "padding", "dilation", "groups")
        a = dict(zip(names, args)) | kw
        src = self.value(a["input"], node)
        if src in self.flat:
            raise UnsupportedOperator(f"{node.name}: a convolution of a flattened value")
        if isinstance(a.get("padding", 0), str):
            raise UnsupportedOperator(f"{node.name}: padding {a['padding']!r}; give numbers")
        if _pair(a.get("dilation", 1), "dilation", node) != 1:
            raise UnsupportedOperator(f"{node.name}: dilated convolution")
        self.add_layer(node, src, self.param(a["weight"], node), self.param(a.get("bias"), node),
                       _pair(a.get("stride", 1), "stride", node),
                       _pair(a.get("padding", 0), "padding", node), a.get("groups", 1),
                       self._module_name(node))

    def op_linear(self, node, args, kw):
        names = ("input", "weight", "bias")
        a = dict(zip(names, args)) | kw
        src = self.value(a["input"], node)
        c, h, w = self.shapes[src]
        if src not in self.flat and (h, w) != (1, 1):
            raise UnsupportedOperator(f"{node.name}: linear on a (C, H, W) value; flatten it "
                                      "first")
        weight = self.param(a["weight"], node)
        if weight.shape[1] != c * h * w:
            raise UnsupportedOperator(f"{node.name}: linear of {weight.shape[1]} inputs on a "
                                      f"value of {c * h * w}")
        self.add_layer(node, src, weight.reshape(weight.shape[0], c, h, w),
                       self.param(a.get("bias"), node), 1, 0, 1, self._module_name(node))

    def _fold_bn(self, node, src, gamma, beta, mean, var, eps):
        layer = self.fusable(src, node, "bn")
        if layer is None:
            raise UnsupportedOperator(f"{node.name}: a batch norm not right after a "
                                      "convolution whose output it alone uses")
        scale = (np.ones_like(mean) if gamma is None else gamma) / np.sqrt(var + eps)
        layer.weight = layer.weight * scale[:, None, None, None]
        layer.bias = (layer.bias - mean) * scale + (0 if beta is None else beta)
        self.alias(node, src)

    def op_batch_norm(self, node, args, kw):
        names = ("input", "weight", "bias", "running_mean", "running_var", "training",
                 "momentum", "eps")
        a = dict(zip(names, args)) | kw
        if a.get("training"):
            raise UnsupportedOperator(f"{node.name}: batch norm in training mode; export the "
                                      "model in eval mode")
        self._fold_bn(node, self.value(a["input"], node), self.param(a["weight"], node),
                      self.param(a["bias"], node), self.param(a["running_mean"], node),
                      self.param(a["running_var"], node), a.get("eps", 1e-5))

    def op__native_batch_norm_legit_no_training(self, node, args, kw):
        names = ("input", "weight", "bias", "running_mean", "running_var", "momentum", "eps")
        a = dict(zip(names, args)) | kw
        self._fold_bn(node, self.value(a["input"], node), self.param(a["weight"], node),
                      self.param(a["bias"], node), self.param(a["running_mean"], node),
                      self.param(a["running_var"], node), a.get("eps", 1e-5))

    def op_getitem(self, node, args, kw):
        kind, obj = self.env[args[0]]
        if args[1] != 0 or kind != "value":
            raise UnsupportedOperator(f"{node.name}: output {args[1]} of {args[0].name}")
        self.alias(node, obj)

    def op_relu(self, node, args, kw):
        src = self.value(args[0], node)
        layer = self.fusable(src, node, "relu")
        if layer is None:
            raise UnsupportedOperator(f"{node.name}: relu that follows no convolution (the "
                                      "engine applies ReLU inside a layer)")
        layer.relu = True
        self.alias(node, src)

    def op_add(self, node, args, kw):
        if kw.get("alpha", 1) != 1 or len(args) > 2:
            raise UnsupportedOperator(f"{node.name}: add with alpha")
        a, b = (self.value(x, node) for x in args[:2])
        if a == b:
            raise UnsupportedOperator(f"{node.name}: add of a value to itself (the engine "
                                      "adds another layer's output as the residual)")
        if self.shapes[a] != self.shapes[b]:
            raise UnsupportedOperator(f"{node.name}: add of shapes {self.shapes[a]} and "
                                      f"{self.shapes[b]}")
        options = [(self.fusable(v, node, "add"), v, other) for v, other in ((a, b), (b, a))]
        options = [o for o in options if o[0] is not None]
        if not options:
            raise UnsupportedOperator(f"{node.name}: add whose operands are not a fresh "
                                      "convolution (the engine adds a residual to a layer)")
        layer, main, other = max(options, key=lambda o: o[0].macs)
        layer.residual = other
        # the layer runs once its residual exists; nothing reads it before this add
        self.ops.remove(layer)
        self.ops.append(layer)
        self.alias(node, main)

    def op_max_pool2d(self, node, args, kw):
        names = ("input", "kernel_size", "stride", "padding", "dilation", "ceil_mode")
        a = dict(zip(names, args)) | kw
        src = self.value(a["input"], node)
        k = _pair(a["kernel_size"], "kernel", node)
        s = _pair(a.get("stride") or a["kernel_size"], "stride", node)
        p = _pair(a.get("padding", 0), "padding", node)
        if _pair(a.get("dilation", 1), "dilation", node) != 1 or a.get("ceil_mode"):
            raise UnsupportedOperator(f"{node.name}: max pool with dilation or ceil_mode")
        layer = self.fusable(src, node, "pool") if (k, s, p) == (2, 2, 0) else None
        if layer is not None:
            layer.pool = True
            out = src
            self.shapes[src] = tuple(node.meta["val"].shape[1:])
            self.alias(node, out)
            return
        out = self.new_value(node)
        self.ops.append(HostOp(self._module_name(node), "max_pool", src, out, k, s, p))
        self.env[node] = ("value", out)

    def _global_pool(self, node, src):
        out = self.new_value(node)
        self.ops.append(HostOp(self._module_name(node), "global_avg_pool", src, out))
        self.env[node] = ("value", out)

    def op_adaptive_avg_pool2d(self, node, args, kw):
        src = self.value(args[0], node)
        if list(args[1]) not in ([1, 1], [1]):
            raise UnsupportedOperator(f"{node.name}: adaptive average pool to {list(args[1])}; "
                                      "only the global one (1x1) runs on the host")
        self._global_pool(node, src)

    def op_mean(self, node, args, kw):
        src = self.value(args[0], node)
        dims = sorted(d % 4 for d in args[1]) if len(args) > 1 else []
        if dims != [2, 3]:
            raise UnsupportedOperator(f"{node.name}: mean over {args[1:2]}; only the mean over "
                                      "H and W (a global average pool) is supported")
        self._global_pool(node, src)
        if not (len(args) > 2 and args[2]) and not kw.get("keepdim"):
            self.flat.add(self.env[node][1])

    def _flatten(self, node, src):
        self.flat.add(src)
        self.alias(node, src)

    def op_flatten(self, node, args, kw):
        src = self.value(args[0], node)
        start = args[1] if len(args) > 1 else kw.get("start_dim", 0)
        end = args[2] if len(args) > 2 else kw.get("end_dim", -1)
        if start != 1 or end not in (-1, 3):
            raise UnsupportedOperator(f"{node.name}: flatten({start}, {end}); only "
                                      "flatten(1) is supported")
        self._flatten(node, src)

    def _view(self, node, args):
        src = self.value(args[0], node)
        shape = list(node.meta["val"].shape)
        if len(shape) == 2:
            self._flatten(node, src)
        elif tuple(shape[1:]) == tuple(self.shapes[src]):
            self.alias(node, src)
        else:
            raise UnsupportedOperator(f"{node.name}: reshape to {shape}")

    def op_view(self, node, args, kw):
        self._view(node, args)

    def op_reshape(self, node, args, kw):
        self._view(node, args)

    def op_dropout(self, node, args, kw):
        if (args[2] if len(args) > 2 else kw.get("train", False)):
            raise UnsupportedOperator(f"{node.name}: dropout in training mode")
        self.alias(node, self.value(args[0], node))

    def op_clone(self, node, args, kw):
        self.alias(node, self.value(args[0], node))

    op_contiguous = op_alias = op_identity = op_clone

    @staticmethod
    def _module_name(node):
        stack = node.meta.get("nn_module_stack")
        if stack:
            path = list(stack.values())[-1][0]
            if path:
                return path
        return node.name


def compile_exported(ep):
    """A :class:`FloatNetwork` from an ``ExportedProgram`` (torch.export)."""
    return _Compiler(ep).run()


def run_float(net, x, absmax=None):
    """The network's float output for a float batch (torch float32), fused as the engine
    runs it; ``absmax`` (a dict) collects every value's largest magnitude."""
    import torch
    import torch.nn.functional as F

    x = torch.as_tensor(np.asarray(x, np.float32))
    values = {0: x}

    def note(vid, t):
        if absmax is not None:
            absmax[vid] = max(absmax.get(vid, 0.0), float(t.abs().max()))

    note(0, x)
    with torch.no_grad():
        for op in net.ops:
            src = values[op.source]
            if op.kind == "engine":
                w = torch.as_tensor(op.weight, dtype=torch.float32)
                src = src.reshape(src.shape[0], *net.shapes[op.source])
                y = F.conv2d(src, w, torch.as_tensor(op.bias, dtype=torch.float32), op.stride,
                             op.padding, 1, op.groups)
                if op.residual is not None:
                    y = y + values[op.residual]
                if op.relu:
                    y = F.relu(y)
                if op.pool:
                    y = F.max_pool2d(y, 2, 2)
            elif op.kind == "max_pool":
                y = F.max_pool2d(src, op.kernel, op.stride, op.padding)
            else:
                y = src.mean(dim=(2, 3), keepdim=True)
            values[op.output] = y
            note(op.output, y)
    out = values[net.output]
    return out.reshape(out.shape[0], -1) if net.flatten_output else out
