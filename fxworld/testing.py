"""Test helpers: :class:`ScriptedModel`, a deterministic model, and crash points.

``ScriptedModel(replies)`` answers ``replies[n]`` where ``n`` is the number of
assistant messages already in the request's conversation, so it gives the same
answer to the same conversation in any process: a worker that replaces a crashed
one hears exactly what the first one would have. A reply is

- a ``str``: the final text, streamed as several :class:`TextDelta` pieces;
- a dict ``{"tool": name, "input": {...}}``: one tool call;
- a list of such dicts: parallel tool calls.

``record_to=path`` appends each request it receives to ``path`` as one JSON line
(instructions, messages, tool names), so a test can check what the model heard.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict
from operator import attrgetter
from pathlib import Path
from typing import Any

from fxworld.engine._run.faults import crash_point
from fxworld.engine.clock import Clock, moved_clock
from fxworld.models.base import (
    ModelError,
    ModelEvent,
    ModelRequest,
    ModelResponse,
    TextDelta,
    ToolCall,
    Usage,
)

__all__ = ["Clock", "ScriptedModel", "Reply", "crash_point", "moved_clock", "read_recording"]

Reply = str | dict[str, Any] | list[dict[str, Any]]

_ROLE = attrgetter("role")
_TEXT = attrgetter("text")


class ScriptedModel:
    """A model that plays a script; deterministic across processes.

    ``pieces``: how many :class:`TextDelta` pieces a text reply streams as (at
    most one per character). ``delay``: seconds to sleep before each piece, so
    tests can stop a worker while text streams.
    """

    name = "scripted"

    def __init__(
        self,
        replies: Sequence[Reply],
        record_to: str | os.PathLike[str] | None = None,
        *,
        pieces: int = 4,
        delay: float = 0.0,
    ) -> None:
        self.replies = list(replies)
        for r in self.replies:
            _check_reply(r)
        self.record_to = Path(record_to) if record_to is not None else None
        self.pieces = max(1, pieces)
        self.delay = delay

    def __repr__(self) -> str:
        return f"ScriptedModel({len(self.replies)} replies)"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        # O(len(messages)) per call either way, but in C: a long turn asks many times
        roles = list(map(_ROLE, request.messages))
        n = roles.count("assistant")
        if self.record_to is not None:
            line = json.dumps(
                {
                    "n": n,
                    "instructions": request.instructions,
                    "messages": [asdict(m) for m in request.messages],
                    "tools": [t.name for t in request.tools],
                },
                ensure_ascii=False,
            )
            _append_line(self.record_to, line)
        if n >= len(self.replies):
            raise ModelError(
                f"ScriptedModel has {len(self.replies)} replies; asked for reply {n + 1}"
            )
        reply = self.replies[n]
        usage = Usage(input_tokens=sum(map(len, map(_TEXT, request.messages))), output_tokens=0)
        if isinstance(reply, str):
            for piece in _split(reply, self.pieces):
                if self.delay:
                    await asyncio.sleep(self.delay)
                yield TextDelta(piece)
            yield ModelResponse(
                text=reply,
                usage=Usage(usage.input_tokens, len(reply)),
                stop_reason="end_turn",
            )
            return
        calls = [reply] if isinstance(reply, dict) else list(reply)
        if self.delay:
            await asyncio.sleep(self.delay)
        yield ModelResponse(
            tool_calls=tuple(
                ToolCall(f"call_{n}_{i}", str(c["tool"]), dict(c.get("input") or {}))
                for i, c in enumerate(calls)
            ),
            usage=usage,
            stop_reason="tool_use",
        )


def _append_line(path: Path, line: str) -> None:
    # One small O_APPEND write: lines from several processes never interleave.
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")


def _check_reply(r: object) -> None:
    """Refuse, when the script is made, a reply that could not be played: a model
    call would otherwise fail only when it reaches it."""
    if isinstance(r, str):
        return
    items = [r] if isinstance(r, dict) else r
    if not isinstance(items, list) or not items:
        raise TypeError(f"a scripted reply is a str, a tool-call dict or a list of them: {r!r}")
    for c in items:
        shape = f"a scripted tool call is {{'tool': name, 'input': {{...}}}}, not {c!r}"
        if not isinstance(c, dict) or not set(c) <= {"tool", "input"}:
            raise TypeError(shape)
        if not isinstance(c.get("tool"), str) or not c["tool"]:
            raise TypeError(shape)
        tool_input = c.get("input", {})
        if not isinstance(tool_input, dict):
            raise TypeError(shape)
        try:
            json.dumps(tool_input, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise TypeError(f"a scripted tool call's input must be JSON: {c!r} ({e})") from None


def _split(text: str, pieces: int) -> list[str]:
    if not text:
        return []
    k = min(pieces, len(text))
    size, extra = divmod(len(text), k)
    out, i = [], 0
    for j in range(k):
        n = size + (1 if j < extra else 0)
        out.append(text[i : i + n])
        i += n
    return out


def read_recording(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The requests a :class:`ScriptedModel` recorded to ``path``, in order."""
    p = Path(path)
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line]
