"""The decoder's size limits are defined once (``rtl/jpeg/limits.py``): no signature, class
attribute or defaults table repeats them as literals, and the marker parser takes up to the
hard limits and no further."""

import ast
from pathlib import Path

import pytest

from dlforge.rtl.jpeg.limits import (DEFAULT_MAX_HEIGHT, DEFAULT_MAX_WIDTH, LIMIT_MAX_HEIGHT,
                                     LIMIT_MAX_WIDTH)
from dlforge.rtl.jpeg.marker_parser import MarkerParser

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("rtl", "host", "gen", "sim", "boards")
NAMES = {"max_width", "max_height"}


def _is_number(node):
    return isinstance(node, ast.Constant) and type(node.value) is int


def _literal_limits(tree):
    """(line, name) of every max_width/max_height given a number where a default is set: a
    parameter's default, a class attribute, a string-keyed dict entry."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = node.args
            positional = args.posonlyargs + args.args
            pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
            pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
            for arg, default in pairs:
                if arg.arg in NAMES and _is_number(default):
                    yield default.lineno, arg.arg
        elif isinstance(node, ast.ClassDef):
            for stmt in node.body:
                if isinstance(stmt, ast.Assign):
                    targets = [t.id for t in stmt.targets if isinstance(t, ast.Name)]
                elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    targets = [stmt.target.id]
                else:
                    continue
                if NAMES & set(targets) and stmt.value is not None and _is_number(stmt.value):
                    yield stmt.lineno, targets[0]
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value in NAMES and _is_number(value):
                    yield value.lineno, key.value


def test_no_literal_size_limit_defaults():
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            found += [f"{path.relative_to(ROOT)}:{line}: {name}"
                      for line, name in _literal_limits(tree)]
    assert not found, "use dlforge.rtl.jpeg.limits instead of literals:\n" + "\n".join(found)


def test_the_checker_sees_literals():
    tree = ast.parse("def f(a, max_width=4096, *, max_height=65535): pass\n"
                     "g = lambda max_width=4096: 0\n"
                     "class C:\n    max_height: int = 65535\n"
                     "D = {'max_width': 4096}\n"
                     "def ok(max_width=DEFAULT_MAX_WIDTH, max_height=None): pass\n")
    assert sorted(_literal_limits(tree)) == [(1, "max_height"), (1, "max_width"),
                                             (2, "max_width"), (4, "max_height"),
                                             (5, "max_width")]


def test_defaults_lie_within_the_hard_limits():
    assert 1 <= DEFAULT_MAX_WIDTH <= LIMIT_MAX_WIDTH and DEFAULT_MAX_WIDTH % 16 == 0
    assert 1 <= DEFAULT_MAX_HEIGHT <= LIMIT_MAX_HEIGHT


def test_marker_parser_takes_the_hard_limits_and_no_more():
    parser = MarkerParser(LIMIT_MAX_WIDTH, LIMIT_MAX_HEIGHT)
    parser._MustUse__silence = True         # built only to see it accepted
    assert (parser.max_width, parser.max_height) == (LIMIT_MAX_WIDTH, LIMIT_MAX_HEIGHT)
    default = MarkerParser()
    default._MustUse__silence = True
    assert (default.max_width, default.max_height) == (DEFAULT_MAX_WIDTH, DEFAULT_MAX_HEIGHT)
    for width, height in ((LIMIT_MAX_WIDTH + 1, 16), (16, LIMIT_MAX_HEIGHT + 1)):
        with pytest.raises(ValueError, match=f"outside 1..{LIMIT_MAX_WIDTH} x "
                                             f"1..{LIMIT_MAX_HEIGHT}"):
            MarkerParser(width, height)
