"""docs/contract.md sections 1-3 and W16: names, errors, choosing a world, namespaces.

Only public names, called as docs/contract.md writes them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import fxworld
from fxworld import Entry, Fence, NewEntry, WakeLease, World, open_world, world
from fxworld.errors import (
    ConfigurationError,
    EntryTooLarge,
)


def test_public_names() -> None:
    for name in ["World", "Entry", "NewEntry", "Fence", "WakeLease", "world", "open_world"]:
        assert name in fxworld.__all__
    for name in ["Agent", "tool"]:
        assert hasattr(fxworld, name)


def test_value_types_are_frozen_dataclasses() -> None:
    import dataclasses
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    values = [
        NewEntry(kind="k", data={"a": 1}),
        Entry(session_id="s", seq=1, kind="k", data={}, epoch=None, at=now),
        Fence(session_id="s", epoch=1, seq=1),
        WakeLease(session_id="s", token="t", attempt=1, expires_at=now),
    ]
    for v in values:
        assert dataclasses.is_dataclass(v)
        with pytest.raises(dataclasses.FrozenInstanceError):
            v.kind = "x"  # type: ignore[union-attr]
    assert Fence("s", 1, 2) == Fence(session_id="s", epoch=1, seq=2)
    assert NewEntry("k", {"a": 1}) == NewEntry(kind="k", data={"a": 1})


@pytest.mark.parametrize(
    ("url", "suggest"),
    [("sqlit:///x.db", "sqlite"), ("memroy://", "memory"), ("postgress://h/db", "postgres")],
)
def test_unknown_scheme_suggests(url: str, suggest: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        open_world(url)
    assert suggest in str(info.value)


def test_unknown_scheme_message_masks_password() -> None:
    with pytest.raises(ConfigurationError) as info:
        open_world("postgress://alice:hunter2secret@db.example/app")
    assert "hunter2secret" not in str(info.value)


def test_credentials_never_in_repr() -> None:
    w = open_world("postgresql://alice:hunter2secret@127.0.0.1:1/app?namespace=n1")
    assert "hunter2secret" not in repr(w) and "hunter2secret" not in str(w)


@pytest.fixture(autouse=True)
def _restore_process_world(monkeypatch: pytest.MonkeyPatch) -> None:
    # hygiene only: these tests set the process's world; put it back afterwards
    monkeypatch.setattr("fxworld.selection._current", None)


def test_open_world_does_not_set_process_world(tmp_path: Path) -> None:
    current = world("memory://?namespace=mine")
    other = open_world("memory://?namespace=other")
    assert world() is current and other is not current
    obj = open_world("memory://")
    assert world(obj) is obj and world() is obj


def test_world_accepts_url_and_object(tmp_path: Path) -> None:
    made = world(f"sqlite:///{tmp_path}/w.db")
    assert isinstance(made, World) and world() is made


async def test_namespaces_isolate(tmp_path: Path) -> None:
    a = open_world(f"sqlite:///{tmp_path}/one.db?namespace=tenant_a")
    b = open_world(f"sqlite:///{tmp_path}/one.db?namespace=tenant_b")
    for w in (a, b):
        await w.setup()
    try:
        fa = await a.acquire("s")
        await a.append("s", [NewEntry("k", {"who": "a"})], key="k", wake=0)
        assert await b.read("s") == []
        assert await b.take_wake(lease=5) is None
        fb = await b.acquire("s")
        assert fb.seq == 1
        assert await b.append("s", [NewEntry("k", {})], key="k") == 2  # key not shared
        await a.append("s", [NewEntry("k", {})], fence=fa)  # b's acquire fenced nothing of a
        await b.delete("s")
        assert len(await a.read("s")) == 3
    finally:
        await a.close()
        await b.close()


async def test_memory_url_options() -> None:
    w = open_world("memory://?max_entry_bytes=50")
    with pytest.raises(EntryTooLarge):
        await w.append("s", [NewEntry("k", {"x": "y" * 100})])
    with pytest.raises(ConfigurationError):
        open_world("memory://?namespce=typo")


def _run(code: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **env, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_world_default_is_sqlite_in_dot_fxworld(tmp_path: Path) -> None:
    code = """
        import asyncio
        from fxworld import world, NewEntry
        async def main():
            w = world()          # no setup(): a stranger may never call it
            await w.append("s", [NewEntry("k", {})])
            print(type(w).__name__, sorted(w.capabilities))
        asyncio.run(main())
    """
    env = {k: v for k, v in os.environ.items() if k != "FXWORLD_URL"}
    env.pop("FXWORLD_URL", None)
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert (tmp_path / ".fxworld" / "world.db").exists()
    assert "durable" in r.stdout


def test_world_reads_fxworld_url(tmp_path: Path) -> None:
    code = """
        import asyncio
        from fxworld import world, NewEntry
        async def main():
            w = world()
            await w.append("s", [NewEntry("k", {})])
        asyncio.run(main())
    """
    r = _run(code, tmp_path, {"FXWORLD_URL": f"sqlite:///{tmp_path}/env/chosen.db"})
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "env" / "chosen.db").exists()
    assert not (tmp_path / ".fxworld").exists()


def test_entry_point_group_registers_a_scheme(tmp_path: Path) -> None:
    pkg = tmp_path / "site"
    (pkg / "thirdworld").mkdir(parents=True)
    (pkg / "thirdworld" / "__init__.py").write_text(
        textwrap.dedent(
            """
            from fxworld import MemoryWorld

            class ThirdWorld(MemoryWorld):
                @classmethod
                def from_url(cls, url):
                    w = cls()
                    w.url = url
                    return w
            """
        )
    )
    dist = pkg / "thirdworld-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: thirdworld\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[fxworld.worlds]\nthird = thirdworld:ThirdWorld\n")
    code = """
        from fxworld import open_world
        w = open_world("third://anything?namespace=x")
        print(type(w).__name__, w.url)
    """
    full = {**os.environ, "PYTHONPATH": f"{pkg}:{Path(__file__).resolve().parents[2]}"}
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "ThirdWorld third://anything" in r.stdout


def test_missing_extra_names_pip_line(tmp_path: Path) -> None:
    # Pretend the postgres driver is absent: the error gives the pip install line.
    code = """
        import sys
        sys.modules["sqlalchemy"] = None
        sys.modules["asyncpg"] = None
        from fxworld import open_world
        from fxworld.errors import ConfigurationError
        try:
            open_world("postgresql://u:pw1secret@localhost/db")
        except ConfigurationError as e:
            print("MSG", e)
    """
    r = _run(code, tmp_path, {})
    assert r.returncode == 0, r.stderr
    assert "pip install 'fxworld[postgres]'" in r.stdout
    assert "pw1secret" not in r.stdout


def test_import_fxworld_loads_no_driver(tmp_path: Path) -> None:
    code = """
        import sys, fxworld
        print(sorted(m for m in ("sqlalchemy", "asyncpg", "redis", "boto3", "aiobotocore",
                                 "openai", "anthropic") if m in sys.modules))
    """
    r = _run(code, tmp_path, {})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
