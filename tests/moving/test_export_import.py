"""``fxworld export`` then ``fxworld import``: the sessions come back whole, with their
wake; a rerun or a later export is refused (import only creates sessions); a bad file
(missing, another format version, a corrupt line, cut short) or an unknown URL is
one line, a non-zero exit, and writes nothing."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from fxworld import NewEntry, SqliteWorld
from fxworld.cli import main
from tests.moving.logs import fill_sqlite, same_sqlite

pytestmark = pytest.mark.timeout(60)


def test_export_then_import_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source, target, file = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "out.jsonl"
    asyncio.run(fill_sqlite(source))
    assert main(["export", "--world", f"sqlite:///{source}", "--out", str(file)]) == 0
    lines = [json.loads(line) for line in file.read_text().splitlines()]
    assert lines[0]["t"] == "header" and lines[0]["version"] == 1
    assert lines[-1] == {"t": "end", "sessions": 4, "entries": len(lines) - 3}
    wakes = [n for n, x in enumerate(lines) if x["t"] == "wake"]
    assert [lines[n]["session"] for n in wakes] == ["chat"]  # after chat's entries
    assert lines[wakes[0] - 1]["session"] == "chat" != lines[wakes[0] + 1]["session"]
    prompt = next(x for x in lines if x["t"] == "entry" and x["kind"] == "prompt")
    assert prompt["key"] == f"prompt:{prompt['data']['key']}"
    assert main(["import", "--world", f"sqlite:///{target}", str(file)]) == 0
    assert f"{len(lines) - 3} entries written, 0 already there" in capsys.readouterr().err
    # Again: the target has the sessions now, so the import is refused and writes nothing.
    assert main(["import", "--world", f"sqlite:///{target}", str(file)]) == 2
    assert "already has 4 of the file's 4 sessions" in capsys.readouterr().err
    asyncio.run(same_sqlite(source, target))


def test_a_later_export_is_refused_where_copy_brings_it_up_to_date(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, target = tmp_path / "a.db", tmp_path / "b.db"
    asyncio.run(_grow(source, 0))
    assert main(["export", "--world", f"sqlite:///{source}", "--out", str(tmp_path / "1")]) == 0
    assert main(["import", "--world", f"sqlite:///{target}", str(tmp_path / "1")]) == 0
    asyncio.run(_grow(source, 3))
    assert main(["export", "--world", f"sqlite:///{source}", "--out", str(tmp_path / "2")]) == 0
    assert main(["import", "--world", f"sqlite:///{target}", str(tmp_path / "2")]) == 2
    assert "fxworld copy brings one up to date" in capsys.readouterr().err
    assert main(["copy", "--from", f"sqlite:///{source}", "--to", f"sqlite:///{target}"]) == 0
    assert "copied 1 of 1 sessions, 3 entries written" in capsys.readouterr().err


async def _grow(path: Path, start: int) -> None:
    world = SqliteWorld(path)
    try:
        await world.append("s", [NewEntry("note", {"i": start + i}) for i in range(3)])
    finally:
        await world.close()


def _bad_files(good: str) -> dict[str, tuple[str, str]]:
    """name -> (file text, what the one line of error says)."""
    lines = good.splitlines(keepends=True)
    newer = lines[0].replace('"version":1', '"version":2')
    middle = len(lines) // 2
    return {
        "version": (newer + "".join(lines[1:]), "format version 2"),
        "other-format": ('{"hello": 1}\n' + "".join(lines[1:]), "not an fxworld export"),
        "corrupt-line": (
            "".join(lines[:middle]) + "{not json\n" + "".join(lines[middle + 1 :]),
            f":{middle + 1}: not a line of an fxworld export",
        ),
        "cut-short": ("".join(lines[:-1]), "the file was cut short"),
        "reserved-kind": (good.replace('"kind":"note"', '"kind":"fence.x"', 1), "reserved"),
        "out-of-order": (good.replace('"seq":2', '"seq":3', 1), "seq 3 where 2 was due"),
        "twice": ("".join(lines[:-1]) + lines[1] + lines[-1], "session 'a' appears twice"),
        "slash": (good.replace('"session":"b"', '"session":"b/../a"'), "is not 1..128"),
        "dot-dot": (good.replace('"session":"b"', '"session":".."'), "is a path segment"),
        "nul": (good.replace('"session":"b"', '"session":"b\\u0000"'), "is not 1..128"),
        "lying-count": (good.replace('"entries":8', '"entries":7'), "the file holds 2 and 8"),
        "after-end": (good + lines[1], "a line after the end line"),
    }


@pytest.mark.parametrize("bad", ["version", "other-format", "corrupt-line", "cut-short",
                                 "reserved-kind", "out-of-order", "twice", "slash", "dot-dot",
                                 "nul", "lying-count", "after-end", "not-utf-8", "missing",
                                 "unknown-url"])  # fmt: skip
def test_a_bad_import_is_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: str
) -> None:
    source, target, file = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "x.jsonl"
    asyncio.run(_two_sessions(source))
    assert main(["export", "--world", f"sqlite:///{source}", "--out", str(file), "--quiet"]) == 0
    url = f"sqlite:///{target}"
    if bad == "missing":
        file, said = tmp_path / "nope.jsonl", "cannot read it"
    elif bad == "unknown-url":
        url, said = "sqlit:///x.db", "did you mean"
    elif bad == "not-utf-8":
        file.write_bytes(file.read_bytes().replace(b'"i":1', b'"i":"\xff"', 1))
        said = "x.jsonl:3: not UTF-8 text"
    else:
        text, said = _bad_files(file.read_text())[bad]
        file.write_text(text)
    capsys.readouterr()
    assert main(["import", "--world", url, str(file)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err, err
    assert not target.exists()  # nothing written, not even an empty world


async def _two_sessions(path: Path) -> None:
    world = SqliteWorld(path)
    try:
        for sid in ("a", "b"):
            await world.append(sid, [NewEntry("note", {"i": i}) for i in range(4)])
    finally:
        await world.close()


def test_export_to_a_missing_directory_or_unknown_url(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "a.db"
    asyncio.run(_two_sessions(source))
    out = tmp_path / "no" / "such" / "x.jsonl"
    assert main(["export", "--world", f"sqlite:///{source}", "--out", str(out)]) == 2
    assert "cannot write" in capsys.readouterr().err
    assert main(["export", "--world", f"sqlite:///{tmp_path}/none.db", "--out", "x"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "none.db").exists() and not out.parent.exists()
