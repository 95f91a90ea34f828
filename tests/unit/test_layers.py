"""The layer rules of the house (docs: ../shared/design/style.md, "Imports we expect
never to see"), checked on the real import graph.

1. The contract (``fxworld.protocol``, ``fxworld.types``, ``fxworld.errors``) imports
   nothing of fxworld outside the contract.
2. A backend (``fxworld_postgres``, ``fxworld_redis``, ``fxworld_s3``,
   ``fxworld.embedded``) imports its own package, the contract and the plumbing in
   :data:`PLUMBING`, nothing else of fxworld.
3. The engine (``fxworld.engine`` and below) imports no concrete world, no web layer,
   no command line.
4. The kit (``fxworld_conformance``) imports no private module of fxworld, reaches the
   engine only through ``fxworld.engine`` itself (or the engine's names on ``fxworld``),
   and loads it lazily: importing one of the kit's doors (:data:`KIT_DOORS`) loads no
   engine module.
5. The engine's private worker side, ``fxworld.engine._run``, is imported only by the
   modules in :data:`RUN_DOORS`.

The graph is read from the source (``tests/support/imports.py``): every ``import``
counts, in a function or under ``if TYPE_CHECKING:`` too, except where a rule is about
what loads at import time (rule 4's laziness). Each rule is a function of a source
root that returns its violations, one line each: the importing file, its line, the
import statement and what it breaks. The tests below run each on the repository, and
on a small tree written in ``tmp_path`` that breaks it on purpose.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.imports import PACKAGES, Import, imports, modules

REPO = Path(__file__).resolve().parents[2]
CONTRACT = frozenset({"fxworld.protocol", "fxworld.types", "fxworld.errors"})

PLUMBING = {
    "fxworld.validate": "the contract's input checks and limits (W-numbered), one copy for all",
    "fxworld.urls": "URL parsing and urls.mask, so every backend masks credentials the same way",
    "fxworld.follow": "poll_follow, the follow loop a world without a push channel runs",
    "fxworld.jsondata": "entry data to and from JSON at the cost of its bytes for large values",
}
"""Modules of fxworld a backend may import beside the contract, each with its reason.
Not the engine, web, commands, cli or integrations; not a private module."""

BACKENDS = ("fxworld_postgres", "fxworld_redis", "fxworld_s3", "fxworld.embedded")

ENGINE_MUST_NOT_REACH = {
    "fxworld.embedded": "a concrete world: the engine takes a World, or world()",
    "fxworld_postgres": "a concrete world",
    "fxworld_redis": "a concrete world",
    "fxworld_s3": "a concrete world",
    "fxworld.encryption": "a concrete (wrapping) world",
    "fxworld.web": "the web layer sits above the engine",
    "fxworld.commands": "the command line sits above the engine",
    "fxworld.cli": "the command line sits above the engine",
}

KIT_DOORS = (
    "fxworld_conformance",
    "fxworld_conformance.plugin",
    "fxworld_conformance.suite",
    "fxworld_conformance.runner",
    "fxworld_conformance.cli",
)
"""What loads the kit: the package, the pytest plugin (loaded in every pytest run), the
pytest door, the code door and the command line."""

RUN = "fxworld.engine._run"
RUN_DOORS = {
    "fxworld.engine.agent": "Agent.work() runs the worker",
    "fxworld.testing": "the test helpers drive the worker's faults and clock",
}


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _is_fxworld(module: str) -> bool:
    return _within(module, "fxworld")


def contract_violations(root: Path) -> list[str]:
    """Rule 1: the contract imports nothing of fxworld outside the contract."""
    return [
        i.describe(root, "the contract imports nothing else of fxworld")
        for i in imports(root)
        if i.module in CONTRACT and _is_fxworld(i.target) and i.target not in CONTRACT
    ]


def backend_violations(root: Path) -> list[str]:
    """Rule 2: a backend imports its own package, the contract and PLUMBING only."""
    found = []
    for i in imports(root):
        home = next((b for b in BACKENDS if _within(i.module, b)), None)
        if home is None or _within(i.target, home):
            continue
        if i.target in CONTRACT or i.target in PLUMBING:
            continue
        if _is_fxworld(i.target) or i.target.split(".")[0] in PACKAGES:
            found.append(i.describe(root, "a backend imports only the contract and PLUMBING"))
    return found


def engine_violations(root: Path) -> list[str]:
    """Rule 3: the engine reaches no concrete world, web layer or command line."""
    found = []
    for i in imports(root):
        if not _within(i.module, "fxworld.engine"):
            continue
        for above, why in ENGINE_MUST_NOT_REACH.items():
            if _within(i.target, above):
                found.append(i.describe(root, f"the engine must not import {above}: {why}"))
    return found


def _is_private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split("."))


def kit_lazy_violations(root: Path) -> list[str]:
    """Rule 4's laziness: import-time imports that lead from a kit door to the engine,
    each named by the kit's last import on the way, with the whole chain."""
    eager: dict[str, list[Import]] = {}
    for i in imports(root):
        if i.at_import_time:
            eager.setdefault(i.module, []).append(i)
    reported: dict[Import, str] = {}
    seen: set[str] = set(KIT_DOORS)
    frontier: list[tuple[str, list[Import]]] = [(door, []) for door in KIT_DOORS]
    while frontier:
        module, path = frontier.pop(0)
        if _within(module, "fxworld.engine"):
            last = [i for i in path if _within(i.module, "fxworld_conformance")][-1]
            chain = " -> ".join([path[0].module, *(i.target for i in path)])
            why = f"the kit loads the engine at import time ({chain})"
            reported.setdefault(last, last.describe(root, why))
            continue
        for i in eager.get(module, []):
            if i.target not in seen:
                seen.add(i.target)
                frontier.append((i.target, [*path, i]))
    return list(reported.values())


def kit_violations(root: Path) -> list[str]:
    """Rule 4: the kit uses public names of fxworld only, the engine as fxworld.engine."""
    wrong = []
    for i in imports(root):
        if not _within(i.module, "fxworld_conformance") or not _is_fxworld(i.target):
            continue
        if _is_private(i.target):
            wrong.append(i.describe(root, "the kit imports public names of fxworld only"))
        elif _within(i.target, "fxworld.engine") and i.target != "fxworld.engine":
            wrong.append(i.describe(root, "the kit reaches the engine as fxworld.engine only"))
    return wrong


def run_violations(root: Path) -> list[str]:
    """Rule 5: only RUN_DOORS import the engine's private worker side."""
    return [
        i.describe(root, f"only {', '.join(RUN_DOORS)} import {RUN}")
        for i in imports(root)
        if _within(i.target, RUN) and not _within(i.module, RUN) and i.module not in RUN_DOORS
    ]


RULES: dict[str, Callable[[Path], list[str]]] = {
    "the contract imports nothing else of fxworld": contract_violations,
    "backends import the contract and plumbing only": backend_violations,
    "the engine imports no concrete world, web or command line": engine_violations,
    "the kit imports public names only": kit_violations,
    "the kit loads the engine lazily": kit_lazy_violations,
    "only Agent.work() and fxworld.testing reach the worker side": run_violations,
}


@pytest.mark.parametrize("rule", list(RULES))
def test_the_repository_keeps_the_layer_rule(rule: str) -> None:
    found = RULES[rule](REPO)
    assert not found, f"{rule}:\n" + "\n".join(found)


def test_the_rules_name_modules_that_exist() -> None:
    """A door or an allowed module renamed away would make its rule hold vacuously."""
    known = set(modules(REPO))
    named = {*CONTRACT, *PLUMBING, *BACKENDS, *ENGINE_MUST_NOT_REACH, *KIT_DOORS, *RUN_DOORS}
    assert sorted(named - known) == []


def test_docs_backends_md_names_what_a_backend_may_import() -> None:
    """docs/backends.md lists the modules a backend may import: the same as here."""
    text = (REPO / "docs" / "backends.md").read_text()
    listed = text.split("third-party package would:", 1)[1].split(". Never", 1)[0]
    named = set(re.findall(r"`(fxworld\.\w+)`", listed))
    assert named == CONTRACT | set(PLUMBING)


def _tree(root: Path, files: dict[str, str]) -> Path:
    """A small source tree: path -> source (packages get an empty __init__.py)."""
    for name, source in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(root).parents:
            if parent != Path(".") and not (root / parent / "__init__.py").exists():
                (root / parent / "__init__.py").write_text("")
        path.write_text(source)
    return root


def test_the_contract_rule_names_the_file_and_import(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "fxworld/protocol.py": "from fxworld.types import Entry\n",
            "fxworld/types.py": "from fxworld.validate import check\n",
            "fxworld/validate.py": "",
        },
    )
    assert contract_violations(root) == [
        "fxworld/types.py:1: `from fxworld.validate import check` (fxworld.validate): "
        "the contract imports nothing else of fxworld"
    ]


def test_the_backend_rule_names_the_engine_a_private_module_and_another_backend(
    tmp_path: Path,
) -> None:
    root = _tree(
        tmp_path,
        {
            "fxworld/errors.py": "",
            "fxworld/urls.py": "",
            "fxworld/_select.py": "",
            "fxworld/engine/__init__.py": "__all__ = ['Agent']\n",
            "fxworld/embedded/memory.py": "from fxworld import errors, urls\n",
            "fxworld_redis/_world.py": "from fxworld_redis import _errors\n"
            "def f():\n    from fxworld.engine import Agent\n",
            "fxworld_redis/_errors.py": "import fxworld._select\n",
            "fxworld_s3/_world.py": "from fxworld.embedded import memory\n",
        },
    )
    assert [line.split(": `")[0] for line in backend_violations(root)] == [
        "fxworld_redis/_errors.py:1",
        "fxworld_redis/_world.py:3",
        "fxworld_s3/_world.py:1",
    ]


def test_the_engine_rule_names_a_concrete_world_web_and_commands(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "fxworld/selection.py": "",
            "fxworld/encryption/world.py": "",
            "fxworld/web/__init__.py": "",
            "fxworld/cli.py": "",
            "fxworld_postgres/__init__.py": "",
            "fxworld/engine/agent.py": "from fxworld.selection import world\n"
            "from fxworld.encryption.world import EncryptedWorld\n",
            "fxworld/engine/session.py": "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    import fxworld_postgres\n"
            "def f():\n    from fxworld import web, cli\n",
        },
    )
    found = engine_violations(root)
    assert [line.split(": `")[0] for line in found] == [
        "fxworld/engine/agent.py:2",
        "fxworld/engine/session.py:3",
        "fxworld/engine/session.py:5",
        "fxworld/engine/session.py:5",
    ]
    assert "(fxworld.cli)" in found[2] + found[3] and "(fxworld.web)" in found[2] + found[3]


def test_the_kit_rule_names_a_private_module_an_engine_module_and_an_eager_engine(
    tmp_path: Path,
) -> None:
    root = _tree(
        tmp_path,
        {
            "fxworld/__init__.py": "",
            "fxworld/_select.py": "",
            "fxworld/engine/__init__.py": "__all__ = ['Agent']\n",
            "fxworld/engine/worker.py": "",
            "fxworld_conformance/__init__.py": "from fxworld_conformance import target\n",
            "fxworld_conformance/target.py": "from fxworld._select import pick\n",
            "fxworld_conformance/suite.py": "from fxworld_conformance import tier\n",
            "fxworld_conformance/tier.py": "from fxworld import Agent\n"
            "def f():\n    from fxworld.engine.worker import work\n",
            "fxworld_conformance/runner.py": "def run():\n    from fxworld.engine import Agent\n",
        },
    )
    assert [*kit_violations(root), *kit_lazy_violations(root)] == [
        "fxworld_conformance/target.py:1: `from fxworld._select import pick` (fxworld._select): "
        "the kit imports public names of fxworld only",
        "fxworld_conformance/tier.py:3: `from fxworld.engine.worker import work` "
        "(fxworld.engine.worker): the kit reaches the engine as fxworld.engine only",
        "fxworld_conformance/tier.py:1: `from fxworld import Agent` (fxworld.engine): "
        "the kit loads the engine at import time "
        "(fxworld_conformance.suite -> fxworld_conformance.tier -> fxworld.engine)",
    ]


def test_the_run_rule_lets_only_its_doors_in(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "fxworld/engine/_run/worker.py": "from fxworld.engine._run import state\n",
            "fxworld/engine/_run/state.py": "",
            "fxworld/engine/agent.py": "from fxworld.engine._run.worker import work\n",
            "fxworld/engine/approvals.py": "from ._run import state\n",
            "fxworld/testing.py": "from fxworld.engine._run import state\n",
            "fxworld/web/_wake.py": "import fxworld.engine._run.worker\n",
        },
    )
    assert [line.split(": `")[0] for line in run_violations(root)] == [
        "fxworld/engine/approvals.py:1",
        "fxworld/web/_wake.py:1",
    ]
