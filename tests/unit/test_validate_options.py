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
