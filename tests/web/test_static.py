"""Finding 5 of issue 16: ``--static`` served dotfiles and the world's own
database. It serves neither now, and the chat example's page has its own
directory, without the agent's source."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import httpx
import pytest

from fxworld import Agent, MemoryWorld, open_world
from fxworld.commands.serve import build_app
from fxworld.errors import ConfigurationError
from fxworld.testing import ScriptedModel
from tests.web._server import REPO

pytestmark = pytest.mark.timeout(60)


def serve_args(static: Path) -> argparse.Namespace:
    return argparse.Namespace(
        host="127.0.0.1",
        allowed_host=None,
        authorize=None,
        allow_anyone=True,
        wake_path=None,
        static=str(static),
        heartbeat=15.0,
        allowed_origin=None,
        stream_lifetime=300.0,
    )


def site(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "index.html").write_text("<h1>hi</h1>")
    (root / ".env").write_text("DATABASE_URL=postgresql://app:pw@db/x")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]")
    (root / "assets" / ".hidden").mkdir(parents=True)
    (root / "assets" / ".hidden" / "key.pem").write_text("-----BEGIN")
    (root / "assets" / "app.js").write_text("console.log(1)")
    return root


async def test_static_never_serves_dotfiles(tmp_path: Path) -> None:
    root = site(tmp_path / "site")
    app = build_app(serve_args(root), Agent(ScriptedModel(["x"]), world=MemoryWorld()))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
    ) as client:
        assert (await client.get("/")).text == "<h1>hi</h1>"
        assert (await client.get("/assets/app.js")).status_code == 200
        for path in [
            "/.env",
            "/.git/config",
            "/.git/",
            "/assets/.hidden/key.pem",
            "/assets/%2Ehidden/key.pem",
            "/./.env",
            "/assets/../.env",
        ]:
            r = await client.get(path)
            assert r.status_code == 404, path
            assert "BEGIN" not in r.text and "postgresql" not in r.text


async def test_static_refuses_the_worlds_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    root = site(tmp_path / "site")
    (root / "data").mkdir()
    inside = open_world(f"sqlite:///{root / 'data' / 'world.db'}")
    elsewhere = open_world(f"sqlite:///{tmp_path / 'db' / 'world.db'}")
    default = open_world("sqlite:///.fxworld/world.db")  # the default world, in the cwd
    for world, static in [(inside, root), (inside, root / "data"), (default, tmp_path)]:
        with pytest.raises(ConfigurationError, match="refusing --static"):
            build_app(serve_args(static), Agent(ScriptedModel(["x"]), world=world))
    # The working directory of a SQLite world is refused even with the file elsewhere.
    with pytest.raises(ConfigurationError, match="working directory"):
        build_app(serve_args(Path(os.curdir)), Agent(ScriptedModel(["x"]), world=elsewhere))
    build_app(serve_args(root), Agent(ScriptedModel(["x"]), world=elsewhere))  # fine


def test_chat_example_static_dir_holds_only_the_page() -> None:
    static = REPO / "examples" / "chat" / "static"
    assert sorted(p.name for p in static.iterdir()) == ["app.js", "index.html", "style.css"]
    for doc in [REPO / "README.md", REPO / "examples" / "chat" / "agent.py"]:
        text = doc.read_text()
        assert "--static examples/chat/static" in text
        assert "--static examples/chat " not in text


async def test_serve_flags_allowed_origin_and_stream_lifetime() -> None:
    from fxworld.cli import build_parser

    args = build_parser().parse_args(
        [
            "serve",
            "examples/chat/agent.py:agent",
            "--allow-anyone",
            "--allowed-origin",
            "https://app.example",
            "--allowed-origin",
            "https://admin.example",
            "--stream-lifetime",
            "30",
        ]
    )
    assert args.stream_lifetime == 30.0
    app = build_app(args, Agent(ScriptedModel(["x"]), world=MemoryWorld()))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
    ) as client:
        for origin, status in [
            ("https://evil.example", 403),
            ("https://app.example", 202),
            ("https://admin.example", 202),
        ]:
            r = await client.post("/sessions", json={"text": "x"}, headers={"Origin": origin})
            assert r.status_code == status, origin
