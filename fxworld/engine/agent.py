"""The Agent: a model, its tools and instructions, bound to a world."""

from __future__ import annotations

import asyncio
import re
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic

from typing_extensions import TypeVar

from fxworld import validate
from fxworld.errors import ConfigurationError, InvalidArgument
from fxworld.models.base import Model
from fxworld.protocol import World

from ._run.worker import Worker
from .limits import (
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_MODEL_CALLS,
    check_max_depth,
    check_max_model_calls,
)
from .replay import RunEnd
from .session import Session
from .subagents import agent_tool
from .tools import Tool, tool
from .turn import prompts_in_flight
from .typed_output import answer_model

if TYPE_CHECKING:
    from fxworld.push.base import Push

__all__ = ["Agent", "WorkResult", "RunEnd", "DEFAULT_AGENT_NAME"]

DEFAULT_AGENT_NAME = "agent"
"""The name of an ``Agent`` built without ``name=``: stable (the same in every
process and every deploy), so the sessions of a single-agent app stay its own."""

OutputT = TypeVar("OutputT", default=str)

_setup_done: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()
_setup_done_ids: set[int] = set()  # for worlds that take no weak reference


@dataclass(frozen=True)
class WorkResult:
    """How a ``work()`` ended."""

    hit_deadline: bool
    """A turn yielded to the ``deadline`` (or the budget ran out before a step):
    work is left for the next invocation."""

    ended: Mapping[str, RunEnd] = field(default_factory=dict)
    """How each session this ``work()`` ran ended (its latest run, when it ran one
    twice), decided by the run from the state it held, with no further read:
    ``"done"`` (no turn runs and no prompt waits), ``"waiting"`` (its turn waits
    for a person's decision or for its child sessions), ``"yielded"`` (its turn
    yielded and the world pushed the wake it left, with no push failed: that
    message continues it) or ``"pending"`` (work is left that nothing pushed: a
    yield without a push or with a failed one, a run stopped, replaced or
    failed). A session it did not run is not in it. Kept by a ``work()`` that
    returns by itself (``until_idle`` or a ``deadline``); empty otherwise. What a
    queue consumer answers (:mod:`fxworld.consume`)."""


class Agent(Generic[OutputT]):
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
    unsaved text arrived.

    ``name``: the agent's name, 1..64 of ``[A-Za-z0-9._:-]`` (default ``"agent"``,
    :data:`DEFAULT_AGENT_NAME`). Each session belongs to the agent that sent its
    first prompt: a prompt through an agent of another name raises
    :class:`~fxworld.errors.WrongAgent`, and only this agent's runners run its
    sessions (``docs/engine.md``, "Many agents, one world"). Two agents sharing a
    world need two names. It also names the agent in traces (``invoke_agent
    <name>``, ``gen_ai.agent.name``: see ``docs/observability.md``).
    ``push``: a :class:`~fxworld.push.Push` or a push URL; every wake this agent's
    world makes durable is then followed by a message to that queue (``None``:
    ``$FXWORLD_PUSH``, else no push; see ``docs/serverless.md``).

    ``context_type``: a Pydantic model that each session's context must fit (checked
    when a session is named with one, and at the start of each turn); tools then
    read ``ctx.context`` as that model (a dict without it). ``show_context``:
    whether the model is told the context: ``False`` (the default), ``True`` (its
    JSON, after the instructions) or ``callable(context) -> str`` (that text).

    ``output_type``: the type the turn's final answer must fit, any type Pydantic
    validates (a Pydantic model, a dataclass, a ``TypedDict``, ``list[str]``,
    ``int``, ...): the model is asked for that JSON (a type other than a Pydantic
    model wrapped as ``{"response": ...}``), the answer is validated, ``await turn``
    returns the value, and the stream and the log carry the validated JSON
    (``turn.finished``'s ``output``; :mod:`fxworld.engine.typed_output`). An answer
    that does not validate is saved as ``output.invalid`` and the model is asked
    again with the error, at most ``output_retries`` times; then the turn fails.

    ``max_model_calls``: the model calls one turn may make (default 50; ``None``: no
    bound; a prompt may set its own: ``session.prompt(..., max_model_calls=)``).
    Counted from the log, so the bound holds across workers and crashes; a turn that
    reaches it ends with ``turn.failed`` and ``await turn`` raises
    :class:`~fxworld.engine.turn.TooManyModelCalls`. ``max_depth``: how deep agents
    as tools may nest below a session this agent runs (default 5; 0: none of its
    agent tools may be called): past it the call's result is a refusal the model
    reads, and no child session is made. See :mod:`fxworld.engine.limits`.
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
        name: str | None = None,
        push: Push | str | None = None,
        context_type: type[Any] | None = None,
        show_context: bool | Callable[[Any], str] = False,
        output_type: type[OutputT] | None = None,
        output_retries: int = 2,
        max_model_calls: int | None = DEFAULT_MAX_MODEL_CALLS,
        max_depth: int = DEFAULT_MAX_DEPTH,
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
        try:
            self.name: str = DEFAULT_AGENT_NAME if name is None else validate.agent_name(name)
        except InvalidArgument as e:
            raise ConfigurationError(str(e)) from None
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
        if context_type is not None and not _is_model(context_type):
            raise ConfigurationError(
                f"context_type must be a Pydantic model class, not {context_type!r}"
            )
        if output_type is not None:
            _check_output_type(output_type)
        if not (isinstance(show_context, bool) or callable(show_context)):
            raise ConfigurationError("show_context must be True, False or callable(context)")
        if isinstance(output_retries, bool) or not isinstance(output_retries, int):
            raise ConfigurationError("output_retries must be an int >= 0")
        if output_retries < 0:
            raise ConfigurationError("output_retries must be an int >= 0")
        self.context_type = context_type
        self.show_context = show_context
        self.output_type: type[OutputT] | None = output_type
        self.output_retries = output_retries
        try:
            self.max_model_calls = check_max_model_calls(max_model_calls)
            self.max_depth = check_max_depth(max_depth)
        except InvalidArgument as e:
            raise ConfigurationError(str(e)) from None

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

    def as_tool(self, *, name: str | None = None, description: str | None = None) -> Tool:
        """This agent as a tool of another agent: each call runs a turn of this
        agent in a child session, and its answer is the call's result.

        The model gives the tool ``{"input": "<the task>"}``; it becomes the first
        prompt of the child session, whose id is derived from the call's
        ``execution_id`` (:func:`~fxworld.engine.subagents.child_session_id`), so
        a call run again after a crash finds the same child and never starts a
        second turn. The parent's turn waits holding no worker; the child runs in
        the parent's world, belongs to this agent (claimed for its ``name``), is
        taken by this agent's workers or the parent agent's (``work(agent_tools=)``),
        and inherits the parent session's context. Its log names its parent (its first prompt's
        ``parent``), the parent's names it (``child.started``); stopping or deleting
        the parent stops the child, and a child whose parent no longer waits for it
        runs nothing; an approval inside the child is decided on the child
        session. See :mod:`fxworld.engine.subagents`.

        ``name``: the tool's name (default: this agent's ``name``), 1 to 64 of
        ``A-Z a-z 0-9 _ -``; ``description``: what the model reads of it.
        """
        chosen = self.name if name is None else name
        if not isinstance(chosen, str) or not _TOOL_NAME.fullmatch(chosen):
            raise InvalidArgument(
                f"an agent tool's name is 1 to 64 of A-Z a-z 0-9 _ -, not {chosen!r}"
            )
        if description is not None and not isinstance(description, str):
            raise InvalidArgument(f"description must be a str, not {type(description).__name__}")
        said = description if description is not None else _describe(chosen)
        return agent_tool(self, chosen, said)

    def session(self, id: str | None = None, *, context: Any = None) -> Session[OutputT]:
        """A handle on session ``id`` (a new random id when ``None``).

        ``context``: a JSON object (a dict, or a Pydantic model), saved with the
        session when its first prompt creates it, and never changed after: every
        tool reads it as ``ctx.context``. Naming an existing session with another
        context raises :class:`~fxworld.errors.ContextMismatch` when prompted (and
        writes nothing); one that is not a JSON object, or does not fit
        ``context_type``, raises :class:`~fxworld.errors.InvalidContext` here."""
        return Session(self, id, context=context)

    async def work(
        self,
        *,
        concurrency: int = 8,
        lease: float = 15.0,
        deadline: float | None = None,
        until_idle: bool = False,
        handle_signals: bool = False,
        poll_interval: float = 0.25,
        agent_tools: bool = True,
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

        It runs only this agent's sessions (those whose first prompt came through an
        agent of this ``name``) and sessions of no agent yet, which it claims; with
        ``agent_tools`` (the default) also those of the agents it reaches through
        its agent tools (their child sessions: their code is in this process).
        ``agent_tools=False``: only its own, leaving the children to workers of
        their own agents. It never runs another agent's session (docs/engine.md,
        "Many agents, one world").

        It first waits for the prompt appends this process has in flight (the
        ``accepted`` of every ``Session.prompt()`` not yet saved), so a prompt sent
        just before ``work(until_idle=True)`` in the same coroutine is answered, not
        missed because its append had not run yet. Before it returns, it waits for
        the pushes its world still sends (:meth:`fxworld.push.PushingWorld.drain`,
        each bounded by the push timeout), so a serverless invocation does not end
        before the messages its run made. Returns a :class:`WorkResult`: whether the
        deadline was hit, and how each session it ran ended.
        """
        worker = Worker(
            self,
            concurrency=concurrency,
            lease=lease,
            deadline=deadline,
            until_idle=until_idle,
            poll_interval=poll_interval,
            agent_tools=agent_tools,
        )
        self._workers.add(worker)
        try:
            pending = prompts_in_flight()
            if pending:  # prompt() then work(until_idle=True): the turn must be seen
                await asyncio.wait(pending)
            await worker.run(handle_signals=handle_signals)
        finally:
            self._workers.discard(worker)
            drain = getattr(self.world, "drain", None)  # a pushing world's pushes in flight
            if drain is not None:
                await drain()
        return WorkResult(hit_deadline=worker.hit_deadline, ended=dict(worker.ended))

    def stop(self) -> None:
        """Ask every ``work()`` of this agent in this process to stop: running
        sessions stop at their next step boundary and are handed back at once."""
        for w in list(self._workers):
            w.stop()


_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _describe(name: str) -> str:
    """An agent tool's default description."""
    return f"Ask the agent {name!r}: put the task in `input`; it answers in text."


def _check_output_type(output_type: object) -> None:
    """An ``output_type`` Pydantic can validate and describe, else ConfigurationError."""
    try:
        answer_model(output_type)
    except Exception as e:  # pydantic's schema errors, a TypeError for a non-type
        raise ConfigurationError(
            f"output_type must be a type Pydantic validates (a model, a dataclass, "
            f"list[str], int, ...), not {output_type!r}: {type(e).__name__}"
        ) from None


def _is_model(value: object) -> bool:
    """Whether ``value`` is a Pydantic model class."""
    import pydantic

    return isinstance(value, type) and issubclass(value, pydantic.BaseModel)
