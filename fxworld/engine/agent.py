"""The Agent: a model, its tools and instructions, bound to a world."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fxworld.errors import ConfigurationError
from fxworld.models.base import Model
from fxworld.protocol import World

from .session import Session
from .tools import Tool, tool
from .turn import prompts_in_flight
from .worker import Worker

if TYPE_CHECKING:
    from fxworld.push.base import Push

__all__ = ["Agent", "WorkResult"]

_setup_done: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()
_setup_done_ids: set[int] = set()  # for worlds that take no weak reference


@dataclass(frozen=True)
class WorkResult:
    """How a ``work()`` ended."""

    hit_deadline: bool
    """A turn yielded to the ``deadline`` (or the budget ran out before a step):
    work is left for the next invocation."""


class Agent:
    """One agent for your server: what runs each session's turns.

    ``model`` is a :class:`~fxworld.models.base.Model` or a model string such as
    ``"anthropic/claude-opus-5.5"``, resolved here, at build time, by
    :func:`fxworld.models.resolve.resolve_model` (a bad string fails now with
    ``ConfigurationError``, not at the first turn). ``tools`` are :class:`Tool`
    values (``@tool``) or plain functions (made non-idempotent tools).
    ``world`` is a World, a URL, or ``None``: the process's world,
    :func:`fxworld.world`, looked up at use time.

    ``model_retries``: how many times a retryable ``ModelError`` is retried (with
    backoff) before the turn fails. ``max_deliveries``: a turn whose wake was
    delivered this many times without the turn ending (each worker crashed or hung
    on it) fails with ``turn.failed`` instead of crashing workers forever.
    ``text_chunk_chars`` / ``text_chunk_interval``: streamed text is saved whenever
    this many characters have gathered, or this many seconds after the oldest
    unsaved text arrived. ``name`` names the agent in traces (``invoke_agent <name>``,
    ``gen_ai.agent.name``: see ``docs/observability.md``).
    ``push``: a :class:`~fxworld.push.Push` or a push URL; every wake this agent's
    world makes durable is then followed by a message to that queue (``None``:
    ``$FXWORLD_PUSH``, else no push; see ``docs/serverless.md``).
    """

    def __init__(
        self,
        model: Model | str,
        tools: Iterable[Tool | Callable[..., Any]] = (),
        instructions: str = "",
        world: World | str | None = None,
        *,
        model_retries: int = 3,
        max_deliveries: int = 10,
        text_chunk_chars: int = 200,
        text_chunk_interval: float = 0.05,
        name: str = "agent",
        push: Push | str | None = None,
    ) -> None:
        if isinstance(model, str):
            from fxworld.models.resolve import resolve_model

            model = resolve_model(model)
        if not isinstance(model, Model):
            raise ConfigurationError(
                f"model must be a Model or a model string, not {type(model).__name__}"
            )
        self.model: Model = model
        self.tools: dict[str, Tool] = {}
        for t in tools:
            made = t if isinstance(t, Tool) else tool(t)
            if made.name in self.tools:
                raise ConfigurationError(f"two tools are named {made.name!r}")
            self.tools[made.name] = made
        self.instructions = instructions
        self.name = name
        self._world = world
        if isinstance(push, str):  # a bad URL fails now, like a bad model string
            from fxworld.push.choose import push_from_url

            push = push_from_url(push)
        self._push = push
        self.model_retries = model_retries
        self.max_deliveries = max_deliveries
        self.text_chunk_chars = text_chunk_chars
        self.text_chunk_interval = text_chunk_interval
        self._workers: set[Worker] = set()

    def __repr__(self) -> str:
        return f"Agent(model={getattr(self.model, 'name', '?')!r}, tools={list(self.tools)})"

    @property
    def world(self) -> World:
        """The world this agent uses: the one given, else :func:`fxworld.world()`;
        wrapped to push after each wake when a push is set (:mod:`fxworld.push`)."""
        if isinstance(self._world, str):
            from fxworld.selection import open_world

            self._world = open_world(self._world)
        from fxworld.push.choose import with_push
        from fxworld.selection import world

        return with_push(self._world if self._world is not None else world(), self._push)

    async def ready(self) -> World:
        """The world, set up (``setup()`` runs once per world object in a process).
        Call it at startup to fail early on a bad world."""
        w = self.world
        try:
            done = _setup_done.get(w, False)
        except TypeError:
            done = id(w) in _setup_done_ids
        if not done:
            await w.setup()  # idempotent: two first calls at once are harmless
            try:
                _setup_done[w] = True
            except TypeError:
                _setup_done_ids.add(id(w))
        return w

    def session(self, id: str | None = None) -> Session:
        """A handle on session ``id`` (a new random id when ``None``)."""
        return Session(self, id)

    async def work(
        self,
        *,
        concurrency: int = 8,
        lease: float = 15.0,
        deadline: float | None = None,
        until_idle: bool = False,
        handle_signals: bool = False,
        poll_interval: float = 0.25,
    ) -> WorkResult:
        """Run as a worker: take wakes and run the sessions' turns.

        ``concurrency``: how many sessions this process runs at once.
        ``lease``: the lease (seconds) wakes are taken under; it is renewed while a
        session runs, and a worker that dies is replaced once it runs out.
        ``deadline``: a time budget in SECONDS from this call (e.g. the time limit
        of a serverless invocation), not an absolute time. Before a step that could
        outrun it, a running turn appends ``turn.yielded`` with a wake and stops,
        so the next invocation continues it; no new session is taken once it is
        close, or once a turn yielded; ``work()`` returns when the budget is spent
        or nothing runs any more.
        ``until_idle``: return as soon as no wake is due and nothing runs (a wake
        handler or a serverless invocation uses it, with a ``deadline``).
        ``handle_signals``: on SIGTERM/SIGINT, stop at the next step boundary and
        hand every running session back at once (``fxworld worker`` sets it).
        ``poll_interval``: the longest wait between two looks for due wakes.
        Otherwise it runs until :meth:`stop` is called.

        It first waits for the prompt appends this process has in flight (the
        ``accepted`` of every ``Session.prompt()`` not yet saved), so a prompt sent
        just before ``work(until_idle=True)`` in the same coroutine is answered, not
        missed because its append had not run yet. Returns a :class:`WorkResult`.
        """
        worker = Worker(
            self,
            concurrency=concurrency,
            lease=lease,
            deadline=deadline,
            until_idle=until_idle,
            poll_interval=poll_interval,
        )
        self._workers.add(worker)
        try:
            pending = prompts_in_flight()
            if pending:  # prompt() then work(until_idle=True): the turn must be seen
                await asyncio.wait(pending)
            await worker.run(handle_signals=handle_signals)
        finally:
            self._workers.discard(worker)
        return WorkResult(hit_deadline=worker.hit_deadline)

    def stop(self) -> None:
        """Ask every ``work()`` of this agent in this process to stop: running
        sessions stop at their next step boundary and are handed back at once."""
        for w in list(self._workers):
            w.stop()
