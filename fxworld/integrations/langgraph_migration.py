"""Moving LangGraph threads into a :class:`~fxworld.integrations.langgraph.WorldSaver`.

:func:`copy_threads` reads threads from any ``BaseCheckpointSaver`` (LangGraph's
``AsyncPostgresSaver`` and ``PostgresSaver``, ``langgraph-checkpoint-redis``'s savers,
``InMemorySaver``, or another ``WorldSaver``) and puts them into a ``WorldSaver``
through the saver interface LangGraph itself uses: every checkpoint of every
namespace (subgraphs included), oldest first, each with its parent, metadata and
pending writes (interrupts included). A copied thread resumes where it stood in the
source: ``Command(resume=...)`` answers an interrupt that was pending there.

The incumbents number channel versions with strings (``"<32 digits>.<random>"``);
:func:`next_version` continues that scheme on a thread that was copied with it, and
the integer scheme on any other, so a copied thread runs on.

A copy can be run again (after an interruption, or to bring over what the source
wrote since): a checkpoint or a write already copied is not copied twice (each is
put under an idempotency key, W6).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

__all__ = ["copy_threads", "next_version"]


def next_version(current: int | float | str | None) -> int | str:
    """The version after ``current``: an integer one more, or, for a thread written
    with the incumbents' string scheme, the next string of that scheme (versions of
    one thread must all compare with each other, LangGraph takes their ``max``)."""
    if isinstance(current, str):
        number = int(current.split(".", 1)[0]) + 1
        return f"{number:032}.{random.random():016}"
    if current is None:
        return 1
    return int(current) + 1


async def copy_threads(
    source: BaseCheckpointSaver[Any],
    target: BaseCheckpointSaver[Any],
    *,
    thread_ids: Sequence[str] | None = None,
) -> int:
    """Copy the threads ``thread_ids`` (every thread of ``source`` when ``None``)
    from ``source`` into ``target`` (a ``WorldSaver``; any saver works); returns the
    number of checkpoints copied.

    A thread missing from ``source`` copies nothing. A sync-only saver
    (``PostgresSaver``) is read from a worker thread. ``thread_ids`` must be a
    sequence of strings (``TypeError`` otherwise, before anything is read)."""
    if isinstance(thread_ids, str) or (
        thread_ids is not None and not all(isinstance(t, str) for t in thread_ids)
    ):
        raise TypeError("copy_threads: thread_ids is a sequence of thread id strings, or None")
    wanted = list(thread_ids) if thread_ids is not None else await _all_threads(source)
    copied = 0
    for thread_id in wanted:
        found = [t async for t in _tuples(source, {"configurable": {"thread_id": thread_id}})]
        found.sort(key=lambda t: str(t.config["configurable"]["checkpoint_id"]))  # oldest first
        for tup in found:
            await _put(target, thread_id, tup)
            copied += 1
    return copied


async def _all_threads(source: BaseCheckpointSaver[Any]) -> list[str]:
    """Every thread id of ``source``, in the order its listing first names them."""
    seen: dict[str, None] = {}
    async for tup in _tuples(source, None):
        seen.setdefault(str(tup.config["configurable"]["thread_id"]), None)
    return list(seen)


async def _tuples(
    source: BaseCheckpointSaver[Any], config: RunnableConfig | None
) -> AsyncIterator[CheckpointTuple]:
    """``source.alist(config)``, or its sync ``list`` from a worker thread for a saver
    that has no async methods (LangGraph's base class raises NotImplementedError)."""
    try:
        async for tup in source.alist(config):
            yield tup
    except NotImplementedError:
        for tup in await asyncio.to_thread(lambda: list(source.list(config))):
            yield tup


async def _put(target: BaseCheckpointSaver[Any], thread_id: str, tup: CheckpointTuple) -> None:
    """One checkpoint into ``target``, with its parent and its pending writes."""
    conf = tup.config["configurable"]
    ns = str(conf.get("checkpoint_ns", ""))
    parent = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    where: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}
    if parent is not None:
        where["configurable"]["checkpoint_id"] = parent
    checkpoint = tup.checkpoint
    saved = await target.aput(where, checkpoint, tup.metadata, checkpoint["channel_versions"])
    by_task: dict[str, list[tuple[str, Any]]] = {}
    for task_id, channel, value in tup.pending_writes or ():
        by_task.setdefault(task_id, []).append((channel, value))
    for task_id, writes in by_task.items():
        await target.aput_writes(saved, writes, task_id)
