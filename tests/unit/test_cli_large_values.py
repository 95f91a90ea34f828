"""``fxworld sessions show`` prints a large value as its size and first 4 KiB,
and names the command that prints it whole; ``fxworld sessions value`` prints it
whole (issue 46, item 5)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from fxworld import open_world
from fxworld.cli import main
from fxworld.engine import log
from tests.web import _console


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'w.db'}"

    async def seed() -> None:
        world = open_world(url)
        await world.setup()
        await _console.big_result(world)
        await world.close()

    asyncio.run(seed())
    return url


def _output(url: str) -> str:
    async def read() -> str:
        world = open_world(url)
        try:
            entries = await world.read("s-big", 0)
        finally:
            await world.close()
        return str(next(e.data["output"] for e in entries if e.kind == log.TOOL_FINISHED))

    return asyncio.run(read())


def test_show_prints_a_large_values_size_and_start(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sessions", "show", "s-big", "--full", "--world", url]) == 0
    out = capsys.readouterr().out
    assert len(out) < 20_000  # not 3 MiB
    assert "[3.0 MiB (3,145,728 bytes); its first 4.0 KiB:] Terms of service, section 0." in out
    assert (
        "/output: a large value, 3.0 MiB; the whole: fxworld sessions value s-big 6 /output" in out
    )
    assert main(["sessions", "show", "s-big", "--world", url]) == 0  # cut lines: the note stays
    assert "the whole: fxworld sessions value s-big 6 /output" in capsys.readouterr().out


def test_value_prints_it_whole(url: str, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    assert main(["sessions", "value", "s-big", "6", "/output", "--world", url]) == 0
    assert capsysbinary.readouterr().out.decode() == _output(url)
    assert main(["sessions", "value", "s-big", "6", "/nothing", "--world", url]) == 1
    assert b"no value at /nothing" in capsysbinary.readouterr().err
    assert main(["sessions", "value", "s-big", "99", "--world", url]) == 1
