"""The import graph of the fxworld packages has no circle, and the engine never
imports the web layer.

The graph is read from the source (the AST), not from running it
(tests/support/imports.py): every ``import`` counts, at module level or inside a
function, under ``if TYPE_CHECKING:`` too (a lazy import only hides a circle until
the day it runs first).
"""

from __future__ import annotations

from pathlib import Path

from tests.support.imports import graph

REPO = Path(__file__).resolve().parents[2]


def _graph() -> dict[str, set[str]]:
    return graph(REPO)


def _components(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module: each holds a
    circle (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        component.add(top)
                        if top == node:
                            break
                    if len(component) > 1:
                        components.append(component)
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return components


def _circle(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest circle from the component's first module back to itself."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & component):
                if child == start:
                    return [*paths[node], start]
                if child not in paths:
                    paths[child] = [*paths[node], child]
                    following.append(child)
        frontier = following
    raise AssertionError("a component of more than one module has a circle")


def test_the_reader_finds_a_circle_and_a_lazy_import(tmp_path: Path) -> None:
    """The checker itself: a circle through a function-level and a TYPE_CHECKING import."""
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _components(edges) == [{"a", "b", "c"}]
    assert _circle(edges, {"a", "b", "c"}) == ["a", "b", "c", "a"]
    engine = tmp_path / "fxworld" / "engine"
    (tmp_path / "fxworld" / "web").mkdir(parents=True)
    engine.mkdir()
    for path in (tmp_path / "fxworld", engine, tmp_path / "fxworld" / "web"):
        (path / "__init__.py").write_text("")
    (engine / "b.py").write_text("")
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import X\n"
    source += "def f():\n    from fxworld.web import y\n"
    (engine / "a.py").write_text(source)
    assert graph(tmp_path)["fxworld.engine.a"] == {"fxworld.engine.b", "fxworld.web"}


def test_no_import_circle() -> None:
    graph = _graph()
    found = [
        f"{' -> '.join(_circle(graph, c))}  (modules in circles with it: {', '.join(sorted(c))})"
        for c in _components(graph)
    ]
    assert not found, "import circles:\n" + "\n".join(found)


def test_the_engine_never_imports_the_web_layer() -> None:
    graph = _graph()
    up = sorted(
        f"{m} -> {t}"
        for m, targets in graph.items()
        if m == "fxworld.engine" or m.startswith("fxworld.engine.")
        for t in targets
        if t == "fxworld.web" or t.startswith("fxworld.web.")
    )
    assert not up, "the engine imports the web layer: " + ", ".join(up)


SANCTIONED = {("fxworld.testing", "fxworld.engine._run")}
"""(importer, private package) pairs the design allows: the test helpers reach the
engine's private worker side (test_layers.py, rule 5, names who else may)."""


def _sanctioned(module: str, target: str) -> bool:
    return any(
        module == importer and (target == home or target.startswith(home + "."))
        for importer, home in SANCTIONED
    )


def _private_crossings(graph: dict[str, set[str]]) -> list[str]:
    """Imports of a private module (a ``_name`` part) from outside the package that
    holds it: ``fxworld.web._app`` only from inside ``fxworld.web``; the pairs in
    :data:`SANCTIONED` too."""
    found = []
    for module, targets in graph.items():
        for target in targets:
            if _sanctioned(module, target):
                continue
            parts = target.split(".")
            private = [i for i, part in enumerate(parts) if part.startswith("_")]
            if not private:
                continue
            home = ".".join(parts[: private[0]])  # the package the private part lives in
            if module != home and not module.startswith(home + "."):
                found.append(f"{module} -> {target}")
    return sorted(found)


def test_the_private_crossing_reader_finds_one() -> None:
    graph = {"fxworld.web._app": set(), "fxworld.web": {"fxworld.web._app"}}
    graph["fxworld.commands.serve"] = {"fxworld.web._app", "fxworld.web"}
    graph["fxworld.testing"] = {"fxworld.engine._run.faults", "fxworld.web._app"}
    assert _private_crossings(graph) == [
        "fxworld.commands.serve -> fxworld.web._app",
        "fxworld.testing -> fxworld.web._app",
    ]


def test_no_private_module_is_imported_from_outside_its_package() -> None:
    """A part that needs another's internals gets a public seam instead."""
    crossings = _private_crossings(_graph())
    assert not crossings, "private modules imported across packages: " + ", ".join(crossings)
