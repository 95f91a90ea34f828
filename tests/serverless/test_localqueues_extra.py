"""``pip install 'fxworld[localqueues]'`` installs everything ``fxworld demo
--serverless`` and :mod:`fxworld.localqueues` import: each third-party module they
import comes from a requirement of the extra (or of what it requires)."""

from __future__ import annotations

import ast
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, packages_distributions, requires
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def _closure(extra: str) -> set[str]:
    """The distributions ``fxworld[extra]`` installs (fxworld's own requirements
    included), following each requirement's requirements in the environment."""
    project = PYPROJECT["project"]
    todo = [Requirement(r) for r in project["dependencies"]]
    todo += [Requirement(f"fxworld[{extra}]")]
    seen: set[str] = set()
    asked: set[tuple[str, str]] = set()
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        for wanted in [*sorted(req.extras), ""]:
            if (name, wanted) in asked:
                continue
            asked.add((name, wanted))
            if name == "fxworld":
                listed = project["optional-dependencies"].get(wanted, []) if wanted else []
                todo += [Requirement(r) for r in listed]
                continue
            seen.add(name)
            try:
                found = requires(req.name) or []
            except PackageNotFoundError:
                continue
            for line in found:
                sub = Requirement(line)
                if sub.marker is None or sub.marker.evaluate({"extra": wanted}):
                    todo.append(sub)
    return seen


def _imports(paths: list[Path]) -> set[str]:
    """The top-level modules these files import, other than fxworld and the stdlib."""
    found: set[str] = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return {m for m in found if m != "fxworld" and m not in sys.stdlib_module_names}


def test_the_localqueues_extra_installs_what_the_serverless_demo_imports() -> None:
    files = sorted((REPO / "fxworld" / "localqueues").glob("*.py"))
    files += sorted((REPO / "fxworld" / "commands").glob("_demo_serverless*.py"))
    installed = _closure("localqueues")
    providers = packages_distributions()
    missing = {
        module: providers.get(module, [module])
        for module in sorted(_imports(files))
        if not {canonicalize_name(d) for d in providers.get(module, [module])} & installed
    }
    assert not missing, f"fxworld[localqueues] does not install: {missing}"
    assert "httpx" in _imports(files)  # what Platform posts deliveries with
