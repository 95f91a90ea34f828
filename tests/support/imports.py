"""The import graph of the fxworld packages, read from the source (the AST), for the
tests that check it (tests/unit/test_import_graph.py, tests/unit/test_layers.py).

Every ``import`` and ``from ... import`` counts, at module level or inside a
function, under ``if TYPE_CHECKING:`` too, since each is an arrow a reader has to
follow; each :class:`Import` says whether it runs when its module is imported. An
import goes from a module to each fxworld module it names: ``from pkg import name``
goes to ``pkg.name`` when that is a module, else to ``pkg`` (and ``from fxworld
import Agent``, a name fxworld loads from its engine, to ``fxworld.engine``). A
package's ``__init__`` is the package's own node, and ``from . import x`` in it
points at its submodule ``x``.
"""

from __future__ import annotations

import ast
import functools
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGES = ("fxworld", "fxworld_postgres", "fxworld_redis", "fxworld_s3", "fxworld_conformance")


@dataclass(frozen=True)
class Import:
    """One fxworld module named by one import statement."""

    module: str
    file: Path
    line: int
    statement: str
    target: str
    """The fxworld module imported (the package for a name that is not a module)."""
    at_import_time: bool
    """Run when the module is imported: not in a function, not under TYPE_CHECKING."""

    def describe(self, root: Path, why: str) -> str:
        where = self.file.relative_to(root).as_posix()
        return f"{where}:{self.line}: `{self.statement}` ({self.target}): {why}"


def _parse(path: Path) -> ast.Module:
    """``ast.parse``, again on CPython 3.11's "AST constructor recursion depth
    mismatch" (a SystemError when another thread of the process converts an AST at
    the same moment: the recursion counter is shared; seen once under pytest-xdist)."""
    for _ in range(3):
        try:
            return ast.parse(path.read_text(), str(path))
        except SystemError:
            time.sleep(0.1)
    return ast.parse(path.read_text(), str(path))


def modules(root: Path) -> dict[str, Path]:
    """Every module of the packages under ``root``: dotted name -> file."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def engine_names(root: Path) -> frozenset[str]:
    """The engine's names (its ``__all__``): ``from fxworld import Agent`` loads it."""
    path = root / "fxworld" / "engine" / "__init__.py"
    if not path.exists():
        return frozenset()
    for node in _parse(path).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return frozenset(ast.literal_eval(node.value))
    return frozenset()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _statements(tree: ast.AST, eager: bool = True) -> Iterator[tuple[ast.stmt, bool]]:
    """Every import statement with whether it runs at import time."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, eager
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _statements(node, False)
        elif isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.body:
                yield from _statements(ast.Module(body=[child], type_ignores=[]), False)
            for child in node.orelse:
                yield from _statements(ast.Module(body=[child], type_ignores=[]), eager)
        else:
            yield from _statements(node, eager)


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base.pop()
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _owner(name: str, known: dict[str, Path]) -> str:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name


@functools.cache
def imports(root: Path) -> tuple[Import, ...]:
    """Every fxworld module every module under ``root`` imports, one per statement
    (read once per root: the rules share it)."""
    known = modules(root)
    engine_names_ = engine_names(root)
    found: list[Import] = []
    for module, path in known.items():
        for node, eager in _statements(_parse(path)):
            named: set[str] = set()
            if isinstance(node, ast.Import):
                named.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                origin = _absolute(module, path.name == "__init__.py", node)
                for alias in node.names:
                    sub = f"{origin}.{alias.name}"
                    if origin == "fxworld" and alias.name in engine_names_:
                        sub = "fxworld.engine"  # fxworld's lazy name loads the engine
                    named.add(sub if sub in known else origin)
            for name in named:
                target = _owner(name, known)
                if target and target != module:
                    statement = ast.unparse(node)
                    found.append(Import(module, path, node.lineno, statement, target, eager))
    return tuple(sorted(found, key=lambda i: (i.module, i.line, i.target)))


def graph(root: Path) -> dict[str, set[str]]:
    """Every module under ``root`` -> the fxworld modules it imports anywhere."""
    edges: dict[str, set[str]] = {module: set() for module in modules(root)}
    for i in imports(root):
        edges[i.module].add(i.target)
    return edges
