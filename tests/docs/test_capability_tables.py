"""The docs' per-backend capability statements, held against the code: the
``WakeLister`` and ``SessionLister`` lists of docs/inspector.md and docs/backends.md,
the ``NamespaceDropper`` list of docs/conformance.md,
the capabilities column of the README's table of worlds, and the extras that
docs/contract.md names. Worlds are built without connecting to anything."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from fxworld.embedded.memory import MemoryWorld
from fxworld.embedded.sqlite import SqliteWorld
from fxworld.protocol import NamespaceDropper, SessionLister, WakeLister

ROOT = Path(__file__).resolve().parents[2]
NAMES = {  # how the docs name each backend
    "memory": "MemoryWorld",
    "SQLite": "SqliteWorld",
    "PostgreSQL": "PostgresWorld",
    "Redis": "RedisWorld",
    "S3": "S3World",
}


def _worlds(tmp_path: Path) -> dict[str, Any]:
    from fxworld_postgres import PostgresWorld
    from fxworld_redis import RedisWorld
    from fxworld_s3 import S3World

    return {
        "MemoryWorld": MemoryWorld(),
        "SqliteWorld": SqliteWorld(str(tmp_path / "w.db")),
        "PostgresWorld": PostgresWorld("postgresql://u:p@127.0.0.1:1/db"),
        "RedisWorld": RedisWorld.from_url("redis://127.0.0.1:1/0"),
        "S3World": S3World.from_url("s3://bucket/prefix?endpoint_url=http://127.0.0.1:1"),
    }


def _having(worlds: dict[str, Any], protocol: type) -> set[str]:
    return {name for name, w in worlds.items() if isinstance(w, protocol)}


def _named(text: str) -> set[str]:
    return {cls for word, cls in NAMES.items() if re.search(rf"\b{word}\b", text)}


def test_the_wake_lister_table_of_the_inspector_doc_is_the_code(tmp_path: Path) -> None:
    text = (ROOT / "docs/inspector.md").read_text()
    rows = re.findall(r"^\| [^|]*\(`(\w+)`[^|]*\| (yes|no|not yet) \|", text, re.M)
    assert {cls for cls, _ in rows} == set(NAMES.values())
    says = {cls for cls, answer in rows if answer == "yes"}
    assert says == _having(_worlds(tmp_path), WakeLister)


def test_the_wake_lister_list_of_the_backends_doc_is_the_code(tmp_path: Path) -> None:
    text = (ROOT / "docs/backends.md").read_text()
    listed = re.search(r"\(([^()]*) have it: see `docs/inspector.md`\)", text)
    assert listed is not None
    assert _named(listed.group(1)) == _having(_worlds(tmp_path), WakeLister)


def test_the_session_lister_list_of_the_inspector_doc_is_the_code(tmp_path: Path) -> None:
    text = (ROOT / "docs/inspector.md").read_text()
    listed = re.search(r"\(`SessionLister`: ([^)]*)\)", text)
    assert listed is not None
    assert _named(listed.group(1)) == _having(_worlds(tmp_path), SessionLister)


def test_the_namespace_dropper_list_of_the_kit_doc_is_the_code(tmp_path: Path) -> None:
    text = " ".join((ROOT / "docs/conformance.md").read_text().split())
    listed = re.search(r"\(`fxworld\.protocol\.NamespaceDropper`\), which the (.*?) worlds", text)
    assert listed is not None
    assert _named(listed.group(1)) == _having(_worlds(tmp_path), NamespaceDropper)


def test_the_capabilities_column_of_the_readme_is_the_code(tmp_path: Path) -> None:
    text = (ROOT / "README.md").read_text()
    rows = dict(re.findall(r"^\| `(\w+World)` \| [^|]*\| ([^|]*) \|", text, re.M))
    worlds = _worlds(tmp_path)
    assert set(rows) == set(worlds)
    for cls, cell in rows.items():
        promised = {c.strip() for c in cell.split(";")[0].split(",")}
        conditional = set(re.findall(r"(\w+) only with", cell))  # e.g. Redis's durable
        assert promised <= set(worlds[cls].capabilities) | conditional, cls
        assert set(worlds[cls].capabilities) - conditional <= promised, cls


@pytest.mark.parametrize("doc", ["docs/contract.md"])
def test_the_extras_a_doc_names_are_the_packages(doc: str) -> None:
    text = " ".join((ROOT / doc).read_text().split())
    named = re.search(r"One distribution, `fxworld`, with the extras (.*?)\.", text)
    assert named is not None
    extras = set(re.findall(r"`([\w-]+)`", named.group(1)))
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert extras == set(declared["optional-dependencies"]) - {"dev"}
