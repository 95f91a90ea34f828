"""Retry a failed turn, as the inspector's Retry button does.

What a retry is, in the engine's terms: the prompt the failed turn answered, sent
again as a new ``prompt`` entry (the same text), unfenced, with a wake, as
``session.prompt`` sends one. A worker answers it as a new turn; the failed
turn stays in the log and in the conversation (its prompt and what the model
said before it failed), so the model hears the prompt again after it.

The prompt's idempotency key is ``retry-<seq of the turn.failed>`` (appended
under ``prompt:retry-<seq>``, as ``session.prompt`` keys its prompts), so Retry
sent twice, from two pages or by a double click, writes one prompt (W6). Only the
session's latest turn can be retried, and only while no other prompt waits: a
turn that runs, or a prompt sent since, answers 409 and writes nothing.
"""

from __future__ import annotations

from fxworld.engine import log
from fxworld.engine.tail import replay_latest_turn
from fxworld.protocol import World
from fxworld.types import Entry

from ._refusals import HTTPError

__all__ = ["RETRY_PREFIX", "retry_key", "retry_failed_turn"]

RETRY_PREFIX = "retry-"
"""How the key of a prompt sent by Retry starts."""


def retry_key(failed_seq: int) -> str:
    """The key of the prompt that retries the turn that failed at ``failed_seq``."""
    return f"{RETRY_PREFIX}{failed_seq}"


async def retry_failed_turn(world: World, sid: str) -> tuple[int, int]:
    """Send the prompt of session ``sid``'s failed latest turn again (see the
    module): the seq of the ``turn.failed`` and of the new prompt."""
    failed: list[Entry] = []
    prompts: dict[int, Entry] = {}

    def watch(e: Entry) -> None:
        if e.kind == log.TURN_FAILED:
            failed.append(e)
        elif e.kind == log.PROMPT:
            prompts[e.seq] = e

    state = await replay_latest_turn(world, sid, watch=watch)
    if state.current is not None or state.last_end != log.TURN_FAILED or not failed:
        raise HTTPError(409, "not_failed", "the latest turn of this session did not fail")
    end = failed[-1]
    key = retry_key(end.seq)
    waiting = state.pending_prompt()
    if waiting is not None and prompts[waiting].data.get("key") != key:
        raise HTTPError(409, "prompt_waiting", "a prompt sent since waits for its turn already")
    answered = prompts.get(int(end.data["prompt"]))
    if answered is None:  # (the replay starts at the prompt the latest turn answers)
        raise HTTPError(409, "not_failed", "the failed turn's prompt is not in the log")
    text = str(answered.data.get("text", ""))
    seq = await world.append(
        sid, [log.entry(log.PROMPT, text=text, key=key)], key=f"prompt:{key}", wake=0.0
    )
    return end.seq, seq
