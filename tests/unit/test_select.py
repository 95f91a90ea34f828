"""Choosing a world: world() / open_world(), FXWORLD_URL, the embedded default,
scheme errors with suggestions and install hints, third-party schemes through
the ``fxworld.worlds`` entry-point group, masked credentials, namespaces."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import fxworld
from fxworld import MemoryWorld, NewEntry, SqliteWorld, World, open_world, selection, world
from fxworld.errors import ConfigurationError, InvalidArgument, WorldError
from fxworld.urls import mask

SECRET = "s3cretpw"


@pytest.fixture(autouse=True)
def fresh_selection(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No process world set and no FXWORLD_URL, before and after each test."""
    monkeypatch.setattr(selection, "_current", None)
    monkeypatch.setattr(selection, "_current_from", None)
    monkeypatch.delenv("FXWORLD_URL", raising=False)
    yield


def test_open_world_builds_without_setting_the_process_world() -> None:
    made = open_world("memory://")
    assert isinstance(made, MemoryWorld)
    assert selection._current is None
    assert open_world("memory://") is not made


def test_world_sets_and_returns_the_process_world() -> None:
    mine = MemoryWorld(namespace="mine")
    assert world(mine) is mine
    assert world() is mine  # no argument: the world already set
    by_url = world("memory://?namespace=other")
    assert isinstance(by_url, MemoryWorld) and by_url.namespace == "other"
    assert world() is by_url
    with pytest.raises(ConfigurationError, match="takes a World or a URL"):
        world(42)  # type: ignore[arg-type]
    assert world() is by_url


def test_world_reads_fxworld_url(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FXWORLD_URL", f"sqlite:///{tmp_path}/env.db?namespace=from_env")
    chosen = world()
    assert isinstance(chosen, SqliteWorld)
    assert chosen.path == f"{tmp_path}/env.db" and chosen.namespace == "from_env"
    assert world() is chosen  # made once
    monkeypatch.setenv("FXWORLD_URL", "memory://?namespace=changed")
    changed = world()  # the variable changed: the world it names now
    assert isinstance(changed, MemoryWorld) and changed.namespace == "changed"
    mine = world(MemoryWorld(namespace="mine"))
    monkeypatch.setenv("FXWORLD_URL", "memory://?namespace=ignored")
    assert world() is mine  # a world set by world(x) wins over the environment


async def test_the_default_is_sqlite_in_dot_fxworld(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    chosen = world()
    assert isinstance(chosen, SqliteWorld)
    assert chosen.path == f"{tmp_path}/.fxworld/world.db"  # absolute
    await chosen.append("s", [NewEntry("prompt", {"text": "hi"})])
    await chosen.close()
    assert (tmp_path / ".fxworld" / "world.db").is_file()
    reopened = SqliteWorld(tmp_path / ".fxworld" / "world.db")
    assert [x.data for x in await reopened.read("s")] == [{"text": "hi"}]
    await reopened.close()


@pytest.mark.parametrize(
    ("url", "suggestion"),
    [
        ("sqlte:///x.db", "sqlite://"),
        ("memroy://", "memory://"),
        ("postgresq://h/db", "postgresql://"),
        ("rediss2://h", "rediss://"),
    ],
)
def test_unknown_scheme_suggests_the_closest(url: str, suggestion: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        open_world(url)
    assert f"did you mean {suggestion}?" in str(info.value)
    assert "known:" in str(info.value)


@pytest.mark.parametrize("url", ["no-scheme-here", "", "/tmp/world.db"])
def test_a_url_without_scheme_is_refused_with_examples(url: str) -> None:
    with pytest.raises(ConfigurationError, match="has no scheme"):
        open_world(url)


@pytest.mark.parametrize(
    ("module", "url", "extra"),
    [
        ("fxworld_redis", "redis://localhost:6379/0", "redis"),
        ("fxworld_s3", "s3://bucket/prefix", "s3"),
        ("fxworld_postgres", "postgresql://localhost/db", "postgres"),
    ],
)
def test_a_missing_extra_names_the_pip_install_line(
    monkeypatch: pytest.MonkeyPatch, module: str, url: str, extra: str
) -> None:
    # As if the backend's driver were not installed: importing the package fails.
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ConfigurationError) as info:
        open_world(url)
    assert f"pip install 'fxworld[{extra}]'" in str(info.value)


# -- third-party backends through the fxworld.worlds entry-point group -----------------


@pytest.fixture
def third_party(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A real installed distribution on sys.path: a module and a .dist-info whose
    entry_points.txt registers schemes in the group fxworld.worlds."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "acme_world.py").write_text(
        textwrap.dedent(
            """
            from fxworld import MemoryWorld
            from fxworld.urls import split_query

            class AcmeWorld(MemoryWorld):
                opened_with: list[str] = []

                @classmethod
                def from_url(cls, url):
                    cls.opened_with.append(url)
                    _, params = split_query(url)
                    return cls(namespace=params.get("namespace", "default"))

            def not_a_world(url):
                return object()
            """
        )
    )
    dist = site / "acme_world-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-world\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[fxworld.worlds]\n"
        "acme = acme_world:AcmeWorld\n"
        "acmebad = acme_world:not_a_world\n"
        "acmebroken = acme_world_missing:World\n"
    )
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "acme_world", raising=False)
    return site


def test_a_third_party_scheme_from_an_entry_point(third_party: Path) -> None:
    made = open_world("acme://anything/here?namespace=tenant_7")
    assert type(made).__name__ == "AcmeWorld"
    assert isinstance(made, World)
    assert made.namespace == "tenant_7"  # type: ignore[attr-defined]
    assert made.opened_with == ["acme://anything/here?namespace=tenant_7"]  # type: ignore[attr-defined]
    # Registered names take part in suggestions.
    with pytest.raises(ConfigurationError, match=r"did you mean acme://\?"):
        open_world("acmee://x")


def test_a_broken_third_party_backend_is_a_configuration_error(third_party: Path) -> None:
    with pytest.raises(ConfigurationError, match="failed to import"):
        open_world("acmebroken://x")
    with pytest.raises(ConfigurationError, match="not a World"):
        open_world("acmebad://x")


# -- credentials ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        f"postgrez://alice:{SECRET}@db.internal:5432/app",
        f"alice:{SECRET}@db.internal/app",
        f"postgresql:/alice:{SECRET}@db.internal/app",
        f"s3://bucket/prefix?aws_secret_access_key={SECRET}&endpoint_url=http://127.0.0.1:9",
        f"sqlite:///x.db?password={SECRET}",
        f"sqlite://alice:{SECRET}@host/x.db",
    ],
)
def test_credentials_never_appear_in_errors(url: str) -> None:
    with pytest.raises(WorldError) as info:
        open_world(url)
    assert SECRET not in str(info.value)
    assert SECRET not in repr(info.value)
    assert SECRET not in mask(url)


@pytest.mark.parametrize("module", ["fxworld_postgres", "fxworld_redis", "fxworld_s3"])
def test_credentials_never_appear_in_missing_extra_errors(
    monkeypatch: pytest.MonkeyPatch, module: str
) -> None:
    scheme = {"fxworld_postgres": "postgresql", "fxworld_redis": "redis", "fxworld_s3": "s3"}
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ConfigurationError) as info:
        open_world(f"{scheme[module]}://alice:{SECRET}@host:1/x?secret={SECRET}")
    assert SECRET not in str(info.value)


def test_credentials_never_appear_in_a_world_repr() -> None:
    try:
        made = open_world(f"postgresql://alice:{SECRET}@db.internal:5432/app")
    except ConfigurationError as e:  # the backend is not available here
        assert SECRET not in str(e)
        return
    assert SECRET not in repr(made) and SECRET not in str(made)


def test_mask_keeps_what_helps_and_hides_secrets() -> None:
    assert mask(f"postgresql://alice:{SECRET}@h:5432/db") == "postgresql://alice:***@h:5432/db"
    # userinfo without a ":" may be a token (https://TOKEN@host): hidden whole
    assert mask("postgresql://alice@h/db") == "postgresql://alice@h/db"  # the role, no secret
    assert mask("postgresql+asyncpg://alice@h/db") == "postgresql+asyncpg://alice@h/db"
    masked = mask(f"s3://b/p?endpoint_url=http://127.0.0.1:9000&token={SECRET}&namespace=n")
    assert SECRET not in masked
    assert "endpoint_url=http://127.0.0.1:9000" in masked and "namespace=n" in masked


# -- namespaces -------------------------------------------------------------------------


async def test_namespaces_isolate_worlds_opened_by_url(tmp_path: Path) -> None:
    base = f"sqlite:///{tmp_path}/shared.db"
    a, b = open_world(base + "?namespace=alpha"), open_world(base + "?namespace=beta")
    try:
        await a.append("s", [NewEntry("prompt", {"who": "alpha"})], wake=0)
        assert await b.read("s") == []
        assert await b.take_wake(lease=5) is None
        await b.append("s", [NewEntry("prompt", {"who": "beta"})])
        assert [x.data for x in await a.read("s")] == [{"who": "alpha"}]
        assert [x.data for x in await b.read("s")] == [{"who": "beta"}]
    finally:
        await a.close()
        await b.close()
    with pytest.raises(InvalidArgument):
        open_world("memory://?namespace=bad/name")
    assert open_world("memory://?namespace=n1").namespace == "n1"  # type: ignore[attr-defined]


def test_the_public_surface() -> None:
    for name in ("World", "Entry", "Fence", "NewEntry", "WakeLease", "world", "open_world"):
        assert name in fxworld.__all__ and hasattr(fxworld, name)
    assert fxworld.SqliteWorld is SqliteWorld and fxworld.MemoryWorld is MemoryWorld
    with pytest.raises(AttributeError):
        _ = fxworld.NoSuchWorld  # type: ignore[attr-defined]


def test_mask_keeps_a_path_url_as_written() -> None:
    assert mask("sqlite:////abs/world.db") == "sqlite:////abs/world.db"
    assert (
        mask("sqlite:///.fxworld/world.db?namespace=n") == "sqlite:///.fxworld/world.db?namespace=n"
    )


# -- schemes registered in one process (register_scheme) ------------------------------


def test_broken_sqlite_is_unknown_to_a_plain_process(tmp_path: Path) -> None:
    """The kit's broken worlds were registered in the product's entry-point group,
    so every user's ``world()`` could open ``broken+sqlite://``; now only a process
    that registers the scheme (the kit's tests) knows it."""
    code = (
        "from fxworld import open_world\n"
        "from fxworld.errors import ConfigurationError\n"
        "try:\n"
        f"    open_world('broken+sqlite:///{tmp_path}/w.db?defect=wake_two_steps')\n"
        "except ConfigurationError as e:\n"
        "    print('refused:', e)\n"
        "else:\n"
        "    print('opened')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert out.stdout.startswith("refused: unknown world URL scheme 'broken+sqlite'"), out.stdout
    assert not (tmp_path / "w.db").exists()


def test_a_registered_scheme_opens_until_it_is_unregistered(tmp_path: Path) -> None:
    url = f"broken+sqlite:///{tmp_path}/w.db?defect=wake_two_steps"
    fxworld.register_scheme("broken+sqlite", "fxworld_conformance.broken.url:open_broken")
    try:
        assert fxworld.registered_schemes() == {
            "broken+sqlite": "fxworld_conformance.broken.url:open_broken"
        }
        assert type(open_world(url)).__name__ == "WakeTwoSteps"
    finally:
        fxworld.unregister_scheme("broken+sqlite")
    assert fxworld.registered_schemes() == {}
    with pytest.raises(ConfigurationError, match="unknown world URL scheme"):
        open_world(url)


@pytest.mark.parametrize(
    ("scheme", "target"),
    [("", "m:a"), ("a://", "m:a"), ("ok", "module"), ("ok", ":attr"), ("ok", None)],
)
def test_register_scheme_refuses_bad_input(scheme: str, target: object) -> None:
    with pytest.raises(ConfigurationError):
        fxworld.register_scheme(scheme, target)  # type: ignore[arg-type]
    assert fxworld.registered_schemes() == {}
