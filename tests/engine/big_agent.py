"""The agent of ``test_large_crash.py``, run in worker subprocesses: the model calls
``fetch_page`` (idempotent), which returns a page of :data:`SIZE` bytes; then it
answers. Each run of the tool is a line of ``runs.jsonl`` (``ENGINE_TEST_DIR``), and
it touches ``returned-<pid>`` as it returns, so a test can kill the worker while it
saves the result. Each model request is a line of ``model.jsonl`` with the length
and digest of every tool result it heard (not the text: 32 MiB a line).

``ENGINE_TEST_ENCRYPTED=1``: the agent's world is an ``EncryptedWorld`` (keys from
``FXWORLD_ENCRYPTION_KEYS``) over the world of ``FXWORLD_URL``.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

from fxworld import Agent, ToolContext, tool
from fxworld.models.base import ModelEvent, ModelRequest
from fxworld.testing import ScriptedModel

DIR = Path(os.environ.get("ENGINE_TEST_DIR", "."))
SIZE = 32 * 1024 * 1024
FINAL = "I read the whole page."
URL = "https://example.com/long"


def page() -> str:
    """:data:`SIZE` bytes of text, with what JSON escapes (quotes, newlines) in it."""
    line = 'a "quoted" line\twith a tab, é\n'
    return (line * (SIZE // len(line.encode()) + 1)).encode()[:SIZE].decode(errors="ignore")


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _record(name: str, line: dict[str, object]) -> None:
    with open(DIR / name, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")


@tool(idempotent=True)
def fetch_page(url: str, ctx: ToolContext) -> str:
    """Fetch a web page (idempotent)."""
    _record("runs.jsonl", {"execution_id": ctx.execution_id, "attempt": ctx.attempt})
    text = page()
    (DIR / f"returned-{os.getpid()}").touch()
    return text


class Heard(ScriptedModel):
    """The script; records the size and digest of each tool result it is given."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        heard = [(len(m.text), digest(m.text)) for m in request.messages if m.role == "tool"]
        _record("model.jsonl", {"pid": os.getpid(), "tool_results": heard})
        async for event in super().stream(request):
            yield event


def _world() -> object:
    if os.environ.get("ENGINE_TEST_ENCRYPTED") != "1":
        return None  # the worker's --world
    from fxworld import EncryptedWorld, open_world

    return EncryptedWorld.from_env(open_world(os.environ["FXWORLD_URL"]))


agent = Agent(
    Heard([{"tool": "fetch_page", "input": {"url": URL}}, FINAL]),
    tools=[fetch_page],
    instructions="You read pages.",
    world=_world(),  # type: ignore[arg-type]
)
