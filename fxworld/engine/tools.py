"""Tools: functions the model may call, marked idempotent or not.

``@tool`` turns a function into a :class:`Tool`. Its input schema comes from the
function's signature (through pydantic, imported on first use) unless given
explicitly, each parameter described by its docstring's ``Args:`` section
(:mod:`fxworld.engine.docstring`). A parameter named ``ctx`` is not part of the
input: it receives a :class:`ToolContext` whose ``execution_id`` stays the same
each time that call runs, so a tool can pass it to a service as an idempotency
key. ``@tool(timeout=seconds)`` bounds a call: past it the call is cancelled and
raises :class:`ToolTimedOut`, which the model reads as the call's error.
docs/tools.md is the user's page of all this.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, cast, overload

from typing_extensions import TypeVar

from fxworld.errors import InvalidArgument, WorldError
from fxworld.models.base import ToolSpec

from .context import short_errors
from .docstring import read_docstring
from .steps import step_key

if TYPE_CHECKING:
    from .steps import StepJournal

__all__ = ["Tool", "ToolContext", "ToolTimedOut", "tool"]

ContextT = TypeVar("ContextT", default=dict[str, Any])


class ToolTimedOut(WorldError, TimeoutError):
    """A call ran longer than its tool's ``timeout`` and was cancelled (a sync
    tool's thread runs on: a thread cannot be stopped). The model reads it as
    the call's error; it may have partly run."""

    def __init__(self, name: str, seconds: float) -> None:
        super().__init__(
            f"tool {name!r} did not finish within its timeout of {seconds:g} s and was "
            "cancelled; it may have partly run"
        )
        self.name = name
        self.seconds = seconds


@dataclass(frozen=True)
class ToolContext(Generic[ContextT]):
    """What a running tool call may know about itself.

    ``execution_id`` identifies the call: the same value every time this call runs
    (an idempotent call that is run again after a crash keeps it). ``attempt`` is
    1 the first time, 2 on the first re-run, and so on. ``context`` is the
    session's context, as saved when the session was created: a dict (``{}`` for a
    session created without one), or the agent's ``context_type`` model of it
    (annotate ``ctx: ToolContext[MyContext]`` for a typed ``ctx.context``).
    """

    execution_id: str
    session_id: str
    call_id: str
    tool_name: str
    attempt: int = 1
    context: ContextT = field(default_factory=cast("Callable[[], Any]", dict))
    journal: StepJournal | None = field(default=None, repr=False, compare=False)
    """Where this call's steps are saved (``None``: outside a worker's run)."""

    def step(
        self,
        name: str,
        fn: Callable[..., Any],
        /,
        *args: Any,
        idempotent: bool = False,
        **kwargs: Any,
    ) -> Coroutine[Any, Any, Any]:
        """Run ``fn(*args, **kwargs)`` (sync or async) once as the durable step
        ``name``, and return its result, saved in the log (JSON) before it returns.

        Run again after a crash (``@tool(resumable=True)``), a finished step returns
        its saved result without running; one that started and did not finish runs
        again if ``idempotent``, else raises
        :class:`~fxworld.engine.steps.StepInterrupted`. Names are unique per call
        (a repeat raises :class:`~fxworld.errors.InvalidArgument`), and so is a
        result that is not JSON.

        It must be awaited, in an async tool: called from a sync tool it raises
        ``InvalidArgument`` at once, and a step never awaited when the tool returns
        fails the call with ``InvalidArgument`` naming it (its effect did not run).
        """
        if self.journal is None:
            return _outside_a_worker()
        return self.journal.begin(name, fn, args, kwargs, idempotent)

    def step_key(self, name: str) -> str:
        """The stable key of step ``name`` (``<execution_id>:<name>``), the same on
        every run of this call: pass it to a service as an idempotency key."""
        return step_key(self.execution_id, name)


@dataclass(frozen=True)
class Tool:
    """A tool the model can call.

    ``idempotent``: safe to run twice. A call that was started but not finished
    when its worker died runs again on resume if and only if this is true;
    otherwise the model is told it may have partly run.

    ``needs_approval``: each call waits for a person (``session.approve`` /
    ``session.deny``) before it runs; the turn holds no worker meanwhile.
    ``approval_timeout``: seconds after which an undecided call counts as denied
    (``None``: wait forever).

    ``resumable``: its effects are all inside ``ctx.step`` calls, so a call that was
    started but not finished runs again after a crash, each finished step
    returning its saved result (:mod:`fxworld.engine.steps`).

    ``timeout``: seconds a call may run (``None``: no bound); past them the call
    is cancelled and raises :class:`ToolTimedOut`. A sync tool's thread cannot be
    stopped: it runs on, and what it returns or raises is dropped.

    ``agent``: set by ``Agent.as_tool()``, the agent whose turn each call runs in a
    child session (:mod:`fxworld.engine.subagents`); ``fn`` is then not called.
    """

    name: str
    description: str
    input_schema: dict[str, Any]
    fn: Callable[..., Any]
    idempotent: bool = False
    needs_approval: bool = False
    approval_timeout: float | None = None
    resumable: bool = False
    timeout: float | None = None
    agent: Any = field(default=None, repr=False, compare=False)
    _takes_ctx: bool = field(default=False, repr=False)
    _model: Any = field(default=None, repr=False, compare=False)
    is_async: bool = field(init=False, repr=False, compare=False)
    """Whether ``fn`` is a coroutine function (else it runs in a thread)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "is_async", inspect.iscoroutinefunction(self.fn))
        _check_seconds("approval_timeout", self.approval_timeout)
        _check_seconds("timeout", self.timeout)

    @property
    def reruns(self) -> bool:
        """Whether a call found started but not finished runs again: an idempotent
        or resumable tool's (its steps are saved), or an agent tool's (it finds its
        child session again)."""
        return self.idempotent or self.resumable or self.agent is not None

    @property
    def spec(self) -> ToolSpec:
        """The tool as the model sees it."""
        return ToolSpec(self.name, self.description, self.input_schema)

    async def call(self, input: dict[str, Any], ctx: ToolContext) -> Any:
        """Validate ``input`` and run the function (a sync function runs in a
        thread), within ``timeout`` (else :class:`ToolTimedOut`)."""
        if self.timeout is None:
            return await self._call(input, ctx)
        bound = asyncio.timeout(self.timeout)
        try:
            async with bound:
                return await self._call(input, ctx)
        except TimeoutError:
            if bound.expired():  # (else: the tool's own TimeoutError, passed on as is)
                raise ToolTimedOut(self.name, self.timeout) from None
            raise

    async def _call(self, input: dict[str, Any], ctx: ToolContext) -> Any:
        kwargs: dict[str, Any]
        if self._model is not None:
            import pydantic  # loaded already: the model was built with it

            try:
                parsed = self._model.model_validate(input)
            except pydantic.ValidationError as e:  # what the model hears: no docs URL
                raise InvalidArgument(
                    f"invalid input for tool {self.name!r}: {short_errors(e)}"
                ) from None
            kwargs = {name: getattr(parsed, name) for name in type(parsed).model_fields}
        else:
            kwargs = dict(input)
        if self._takes_ctx:
            kwargs["ctx"] = ctx
        try:
            if self.is_async:
                result = await self.fn(**kwargs)
            else:
                result = await asyncio.to_thread(self.fn, **kwargs)
                if inspect.isawaitable(result):
                    result = await result
        except BaseException:
            if ctx.journal is not None:
                ctx.journal.forget()  # the tool's own error is the call's
            raise
        if ctx.journal is not None:
            ctx.journal.check()  # a step not awaited: the call fails, naming it
        return result


async def _outside_a_worker() -> Any:
    raise InvalidArgument("ctx.step runs only inside a tool call of a worker")


def _check_seconds(name: str, value: object) -> None:
    """``value`` is ``None`` or a finite number of seconds > 0; else InvalidArgument."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgument(f"{name} must be seconds > 0 or None, not {value!r}")
    if not (math.isfinite(value) and value > 0):
        raise InvalidArgument(f"{name} must be seconds > 0 or None, not {value!r}")


def render_output(value: Any) -> str:
    """A tool's return value as the text the model reads: a str as is, else JSON."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=_default)
    except (TypeError, ValueError):
        return repr(value)


def _default(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    return str(value)


def _build(
    fn: Callable[..., Any],
    *,
    name: str | None,
    description: str | None,
    idempotent: bool,
    input_schema: dict[str, Any] | None,
    needs_approval: bool,
    approval_timeout: float | None,
    resumable: bool,
    timeout: float | None,
) -> Tool:
    sig = inspect.signature(fn)
    takes_ctx = "ctx" in sig.parameters
    doc = read_docstring(inspect.getdoc(fn) or "")
    unknown = sorted(doc.params.keys() - sig.parameters.keys())
    if unknown:
        raise InvalidArgument(
            f"the docstring of {fn.__name__!r} describes {unknown[0]!r} in its Args section, "
            f"which is not one of its parameters {list(sig.parameters)}"
        )
    model = None
    if input_schema is None:
        model = _signature_model(fn, sig, doc.params)
        input_schema = model.model_json_schema()
        input_schema.pop("title", None)
    return Tool(
        name=name or fn.__name__,
        description=description if description is not None else doc.description,
        input_schema=input_schema,
        fn=fn,
        idempotent=idempotent,
        needs_approval=needs_approval,
        approval_timeout=approval_timeout,
        resumable=resumable,
        timeout=timeout,
        _takes_ctx=takes_ctx,
        _model=model,
    )


def _signature_model(
    fn: Callable[..., Any], sig: inspect.Signature, described: dict[str, str]
) -> Any:
    """The pydantic model of ``fn``'s input: a field per parameter (``ctx`` and
    ``*args``/``**kwargs`` left out), typed by its hint (``Any`` without one),
    described by ``described`` unless its hint carries a description of its own."""
    import typing

    import pydantic

    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception:
        hints = {}
    fields: dict[str, Any] = {}
    for pname, param in sig.parameters.items():
        if pname == "ctx" or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        annotation = hints.get(pname, Any)
        default = ... if param.default is inspect.Parameter.empty else param.default
        text = described.get(pname)
        if text and not _described(annotation):
            default = pydantic.Field(default, description=text)
        fields[pname] = (annotation, default)
    return pydantic.create_model(f"{fn.__name__}_input", **fields)


def _described(annotation: Any) -> bool:
    """Whether ``annotation`` is ``Annotated[T, Field(description=...), ...]``."""
    import pydantic.fields

    return any(
        isinstance(m, pydantic.fields.FieldInfo) and m.description
        for m in getattr(annotation, "__metadata__", ())
    )


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    idempotent: bool = False,
    input_schema: dict[str, Any] | None = None,
    needs_approval: bool = False,
    approval_timeout: float | None = None,
    resumable: bool = False,
    timeout: float | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    idempotent: bool = False,
    input_schema: dict[str, Any] | None = None,
    needs_approval: bool = False,
    approval_timeout: float | None = None,
    resumable: bool = False,
    timeout: float | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a function a :class:`Tool`: ``@tool``, ``@tool(idempotent=True)`` or
    ``@tool(needs_approval=True, approval_timeout=None)`` or ``@tool(resumable=True)``
    or ``@tool(timeout=30)``.

    The description defaults to the docstring without its ``Args:`` section; the
    input schema to the JSON Schema of the function's parameters (``ctx``
    excluded), each described by its entry in that section. Given
    ``input_schema``, the input is passed as keyword arguments without
    validation. A ``timeout`` or ``approval_timeout`` that is not a number of
    seconds > 0 (or ``None``), or an ``Args:`` entry that names no parameter,
    raises :class:`~fxworld.errors.InvalidArgument` here.
    """
    _check_seconds("approval_timeout", approval_timeout)  # here: the decorator's line
    _check_seconds("timeout", timeout)
    options: dict[str, Any] = {
        "name": name,
        "description": description,
        "idempotent": idempotent,
        "input_schema": input_schema,
        "needs_approval": needs_approval,
        "approval_timeout": approval_timeout,
        "resumable": resumable,
        "timeout": timeout,
    }
    if fn is not None:
        return _build(fn, **options)

    def wrap(f: Callable[..., Any]) -> Tool:
        return _build(f, **options)

    return wrap
