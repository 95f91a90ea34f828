"""A session's context: a JSON object saved with the session's first entry.

``agent.session(id, context=...)`` gives it; the first prompt saves it in its
``context`` field (a fork saves its source's in ``forked``), and it never changes
after. Every tool reads it as ``ToolContext.context``: the JSON object as a dict,
or, when the agent declares ``context_type`` (a Pydantic model), that model. Each
call gets its own copy (:func:`own_copy`): what a tool changes in it, however deep,
no other call, no child session and no later turn sees.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from typing import Any

from fxworld import validate
from fxworld.errors import InvalidContext, InvalidEntry
from fxworld.protocol import World
from fxworld.types import JSONObject

__all__ = [
    "context_data",
    "parse_context",
    "own_copy",
    "context_instructions",
    "same_context",
    "saved_context",
]


def context_data(value: object, context_type: type[Any] | None) -> JSONObject:
    """``value`` (a dict, or a Pydantic model) as the JSON object a session saves;
    checked against ``context_type`` when given. :class:`InvalidContext` otherwise,
    before any I/O."""
    if context_type is not None:
        import pydantic

        try:
            parsed = (
                value if isinstance(value, context_type) else context_type.model_validate(value)
            )
        except pydantic.ValidationError as e:
            raise InvalidContext(
                f"the context does not match {context_type.__name__}: {short_errors(e)}"
            ) from None
        value = parsed.model_dump(mode="json")
    else:
        dump = getattr(value, "model_dump", None)
        if callable(dump):
            value = dump(mode="json")
    if not isinstance(value, dict):
        raise InvalidContext(
            f"a session's context is a JSON object (a dict), not {type(value).__name__}"
        )
    try:
        validate.encode_data(value)
    except InvalidEntry as e:
        raise InvalidContext(f"the context is not a JSON object: {e}") from None
    return value


def parse_context(data: Mapping[str, Any] | None, context_type: type[Any] | None) -> Any:
    """The context a tool reads: a copy of ``data`` (``{}`` when the session has none),
    or ``context_type``'s model of it (``pydantic.ValidationError`` if it does not fit)."""
    body = copy.deepcopy(dict(data)) if data is not None else {}
    return body if context_type is None else context_type.model_validate(body)


def own_copy(context: Any) -> Any:
    """A copy of a parsed context (a dict or a model), deep: one call's own."""
    return copy.deepcopy(context)


async def saved_context(world: World, session_id: str) -> JSONObject | None:
    """The context session ``session_id`` was created with, as saved in its first
    entry (``None``: it has none, or the session has no log)."""
    first = await world.read(session_id, 0, limit=1)
    context = first[0].data.get("context") if first else None
    return context if isinstance(context, dict) else None


def same_context(saved: Mapping[str, Any] | None, given: JSONObject) -> bool:
    """Whether a session saved with ``saved`` was created with ``given``."""
    return saved is not None and json.dumps(saved, sort_keys=True) == json.dumps(
        given, sort_keys=True
    )


def context_instructions(show: bool | Callable[[Any], str], context: Any) -> str:
    """What the model is told of the context (``show``: ``Agent(show_context=...)``)."""
    if show is False:
        return ""
    if callable(show):
        return str(show(context))
    data = context.model_dump(mode="json") if hasattr(context, "model_dump") else context
    return "The session's context (JSON): " + json.dumps(data, ensure_ascii=False, sort_keys=True)


def short_errors(error: Any) -> str:
    """A Pydantic ``ValidationError`` in one line: each error's place and message
    (not the refused input)."""
    parts = []
    for item in error.errors(include_url=False)[:10]:
        where = ".".join(str(p) for p in item.get("loc", ())) or "(the whole value)"
        parts.append(f"{where}: {item.get('msg', 'invalid')}")
    return "; ".join(parts)
