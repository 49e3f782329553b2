"""The project's import rule, read from the source with ``ast`` (imports inside functions
included), so that the layers stay layers: gateware knows nothing of the host, golden models
know nothing of testbenches, and no two files need each other.

Each part of the tree may import the parts listed for it (and itself):

=================  ============================================================================
part               may import
=================  ============================================================================
``rtl``            nothing else of the project
``boards``         ``rtl``
``sim.models``     ``rtl``; of ``host`` only the network program contract (:data:`CONTRACTS`)
``sim.corpus``     ``rtl``
``sim.tools``      nothing else of the project
``sim.board``      ``rtl``, ``sim.tools`` (it builds with Verilator)
``host``           ``rtl``, ``sim.models``; ``sim.board`` only where it launches the simulated
                   board (:data:`LAUNCHERS`)
``sim.tb``         anything but ``gen``
``gen``            anything
=================  ============================================================================

and no cycle of imports between files.

One narrow exception, :data:`CONTRACTS`: a contract module that more than one part must read
lives where its writers are, and the readers named for it may import that one module (not its
part); in return it may import only the parts named for it.  There is one:
``dlforge.host.conv.program``, the network program format (its layers and host operations,
the input's quantisation and check), which the host's compiler and quantiser write and its
runners run, and which the golden network model (``sim.models.network_model``) runs too.  It
is written once, with the host that makes it, instead of in the golden model that the host
had to import for it; it imports only ``rtl`` (and so do the packages above it, which run
when it is imported), so the golden model still sees nothing of the host but that format, and
``sim.models`` importing any other host module stays a break.
"""

import ast

__all__ = ["PARTS", "LAUNCHERS", "CONTRACTS", "module_imports", "violations", "cycles"]

#: part -> the parts it may import besides itself (None: anything)
PARTS = {
    "rtl": (),
    "boards": ("rtl",),
    "sim.models": ("rtl",),
    "sim.corpus": ("rtl",),
    "sim.tools": (),
    "sim.board": ("rtl", "sim.tools"),
    "host": ("rtl", "sim.models"),
    "sim.tb": ("rtl", "boards", "sim", "host"),
    "gen": None,
}

#: (importing module, imported module) pairs allowed beyond PARTS: the host starting the
#: simulated board it then talks to over its own link
LAUNCHERS = {("dlforge.host.device.accelerator", "dlforge.sim.board.process")}

#: contract module -> (the parts that may import it beyond PARTS, the only parts it may
#: import): the network program format, which the golden network model runs
CONTRACTS = {"dlforge.host.conv.program": (("sim.models",), ("rtl",))}

PACKAGE = "dlforge"


def module_name(root, path):
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([PACKAGE] + parts)


def source_modules(root):
    """{module name: path} of every Python file of the package's parts under ``root``."""
    tops = {p.split(".")[0] for p in PARTS}
    return {module_name(root, p): p for top in sorted(tops)
            for p in sorted((root / top).rglob("*.py"))}


def module_imports(name, path, known):
    """The project modules ``name`` imports (``known``: every module name), with the line of
    each: ``from pkg import module`` counts as importing the module."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [module] + [f"{module}.{a.name}" for a in node.names
                                  if f"{module}.{a.name}" in known]
        else:
            continue
        for target in targets:
            if not (target == PACKAGE or target.startswith(PACKAGE + ".")):
                continue
            while target not in known and "." in target:
                target = target.rsplit(".", 1)[0]
            if target in known and target != name and target != PACKAGE:
                found.setdefault(target, node.lineno)
    return found


def part_of(module):
    """The longest part of PARTS ``module`` lies in (None: outside every part)."""
    rest = module[len(PACKAGE) + 1:]
    best = None
    for part in PARTS:
        if rest == part or rest.startswith(part + "."):
            if best is None or len(part) > len(best):
                best = part
    return best


def within(part, parts):
    """Whether ``part`` (None: outside every part) is one of ``parts`` or inside one."""
    return part is not None and any(part == p or part.startswith(p + ".") for p in parts)


def allowed(importer, imported):
    if (importer, imported) in LAUNCHERS:
        return True
    mine, theirs = part_of(importer), part_of(imported)
    for contract, (_, imports) in CONTRACTS.items():
        if importer == contract or contract.startswith(importer + "."):
            return within(theirs, imports)       # (its packages run when it is imported)
    if imported in CONTRACTS and within(mine, CONTRACTS[imported][0]):
        return True
    if mine is None or theirs is None or mine == theirs:
        return True
    rule = PARTS[mine]
    if rule is None:
        return True
    if mine == "sim.tb":
        return theirs != "gen"
    return within(theirs, rule)


def graph(root):
    modules = source_modules(root)
    known = set(modules)
    return {name: module_imports(name, path, known) for name, path in modules.items()}, modules


def violations(root):
    """Every import that breaks PARTS: "file:line: importer imports imported"."""
    edges, modules = graph(root)
    out = []
    for importer, targets in sorted(edges.items()):
        for imported, line in sorted(targets.items()):
            if not allowed(importer, imported):
                rel = modules[importer].relative_to(root)
                out.append(f"{rel}:{line}: {importer} ({part_of(importer)}) imports "
                           f"{imported} ({part_of(imported)})")
    return out


def cycles(root):
    """Each import cycle between files, as a list of module names (Tarjan's strongly
    connected components with more than one module, or a module importing itself)."""
    edges, _ = graph(root)
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found
