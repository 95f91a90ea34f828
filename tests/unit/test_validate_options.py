"""One way to refuse: every first-party backend refuses the same bad constructor or
URL option, and the same bad lease, with the same error type, through
``fxworld.validate``."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from fxworld import MemoryWorld, SqliteWorld, WakeLease, open_world, validate
from fxworld.errors import ConfigurationError, InvalidArgument, InvalidSessionId
from fxworld_postgres import PostgresWorld

BAD_LIMITS: list[Any] = [0, -1, "0", "x", 1.5, True, None]


def make(kind: str, tmp_path: Path, limit: Any) -> object:
    if kind == "memory":
        return MemoryWorld(max_entry_bytes=limit)
    if kind == "sqlite":
        return SqliteWorld(tmp_path / "w.db", max_entry_bytes=limit)
    return PostgresWorld("postgresql://u@127.0.0.1:1/db", max_entry_bytes=limit)


@pytest.mark.parametrize("limit", BAD_LIMITS, ids=repr)
@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
def test_a_bad_max_entry_bytes_is_a_configuration_error_everywhere(
    kind: str, limit: Any, tmp_path: Path
) -> None:
    with pytest.raises(ConfigurationError, match="max_entry_bytes"):
        make(kind, tmp_path, limit)


@pytest.mark.parametrize("text", ["0", "-5", "1.5", "many"])
@pytest.mark.parametrize(
    "base", ["memory://", "sqlite:///TMP/w.db", "postgresql://u@127.0.0.1:1/db"]
)
def test_a_bad_max_entry_bytes_in_the_url_is_a_configuration_error_everywhere(
    base: str, text: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigurationError, match="max_entry_bytes"):
        open_world(base.replace("TMP", str(tmp_path)) + f"?max_entry_bytes={text}")


LARGEST = {  # what each store holds in one entry (docs/large-values.md), and a URL
    "sqlite:///TMP/w.db": 1_000_000_000 - 1024,
    "postgresql://u@127.0.0.1:1/db": (1 << 30) - (1 << 20),
    "redis://127.0.0.1:1/0": 512 << 20,
    "s3://bucket/p?endpoint_url=http://127.0.0.1:1": (5 << 30) // 2 - (1 << 20),
}


@pytest.mark.parametrize(("base", "largest"), list(LARGEST.items()))
async def test_a_max_entry_bytes_over_what_the_store_holds_is_refused_at_construction(
    base: str, largest: int, tmp_path: Path
) -> None:
    url = base.replace("TMP", str(tmp_path)) + ("&" if "?" in base else "?")
    with pytest.raises(ConfigurationError, match=f"over the largest entry .* {largest} bytes"):
        open_world(f"{url}max_entry_bytes={largest + 1}")
    world = open_world(f"{url}max_entry_bytes={largest}")
    assert world.max_entry_bytes == largest  # type: ignore[attr-defined]
    await world.close()


@pytest.mark.parametrize(
    ("lease", "error"),
    [
        ("not a lease", InvalidArgument),
        (WakeLease("s", "", 1, datetime.now(UTC)), InvalidArgument),
        (WakeLease("bad id", "t", 1, datetime.now(UTC)), InvalidSessionId),
    ],
    ids=["not-a-lease", "empty-token", "bad-session"],
)
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_bad_lease_is_refused_alike(
    kind: str, lease: Any, error: type[Exception], tmp_path: Path
) -> None:
    world = MemoryWorld() if kind == "memory" else SqliteWorld(tmp_path / "w.db")
    await world.setup()
    try:
        with pytest.raises(error):
            await world.finish_wake(lease)
        with pytest.raises(error):
            await world.renew_wake(lease, lease=5)
    finally:
        await world.close()
    with pytest.raises(error):
        validate.held(lease)


def test_seconds_options() -> None:
    assert validate.seconds_option("t", "2.5") == 2.5
    for bad in (0, -1, "soon", True, 1e9):
        with pytest.raises(ConfigurationError, match="t must be"):
            validate.seconds_option("t", bad)
