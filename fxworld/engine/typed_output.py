"""Typed answers: ``Agent(output_type=...)``.

``output_type`` is any type Pydantic validates: a Pydantic model, a dataclass, a
``TypedDict``, ``list[str]``, ``int``, a ``Literal``, ... A Pydantic model is asked
for as is; any other type is asked for wrapped as ``{"response": <the value>}``
(:func:`answer_model`, as the OpenAI Agents SDK wraps it), so the answer is always
one JSON object, saved whole in ``turn.finished``'s ``output``; ``await turn``
returns the value (:func:`output_value`).

The model is asked (in its instructions) for a final answer that is one JSON
object matching the answer's JSON Schema; the answer is validated here, by
Pydantic, whatever the model claims. A valid answer ends the turn with
``turn.finished`` carrying the validated JSON as ``output``; an invalid one is
saved as ``output.invalid`` and the model hears the error and answers again, at
most ``output_retries`` times, after which the turn fails. An answer whose
validator raises something other than ``ValueError`` (a bug, or a ``TypeError``),
or whose validated JSON the log cannot keep (``NaN``, ``Infinity``), is such an
invalid answer too, named as the answer's fault: never "the model call failed".
"""

from __future__ import annotations

import json
import sys
from typing import Any

from fxworld import validate
from fxworld.errors import InvalidEntry
from fxworld.scrub import scrub
from fxworld.types import JSONObject

from .context import short_errors

__all__ = [
    "answer_model",
    "type_name",
    "output_instructions",
    "check_output",
    "output_value",
    "retry_message",
]

_WRAPPED: dict[Any, Any] = {}
"""Each output type that is not a Pydantic model -> its ``{"response": ...}`` model."""


def answer_model(output_type: Any) -> Any:
    """The Pydantic model an answer is validated as: ``output_type`` itself when it
    is a Pydantic model, else a model of one field, ``response``, of that type.
    Raises ``pydantic.PydanticSchemaGenerationError`` (or ``TypeError``) for a type
    Pydantic cannot validate."""
    import pydantic

    if isinstance(output_type, type) and issubclass(output_type, pydantic.BaseModel):
        return output_type
    if isinstance(output_type, str):  # pydantic would read it as a forward reference
        raise TypeError(f"an output type is a type, not the string {output_type!r}")
    model = _WRAPPED.get(output_type)
    if model is None:
        model = pydantic.create_model(
            f"{type_name(output_type).title().replace('[', '').replace(']', '')}Answer",
            response=(output_type, ...),
        )
        model.model_json_schema()  # a type it cannot describe fails here, not at a turn
        _WRAPPED[output_type] = model
    return model


def type_name(output_type: Any) -> str:
    """How an error names the type: ``Invoice``, ``list[str]``."""
    if isinstance(output_type, type) and not getattr(output_type, "__args__", None):
        return output_type.__name__
    return str(output_type).replace("typing.", "")


def output_value(output_type: Any, output: JSONObject) -> Any:
    """What ``await turn`` returns for a saved ``output``: the Pydantic model's
    instance, or the wrapped value itself."""
    model = answer_model(output_type)
    parsed = model.model_validate(output)
    return parsed if model is output_type else parsed.response


def output_instructions(output_type: Any) -> str:
    """What the model is told of the answer it must give."""
    model = answer_model(output_type)
    schema = json.dumps(model.model_json_schema(), ensure_ascii=False, sort_keys=True)
    return (
        "When you give your final answer (a reply without tool calls), reply with ONLY "
        "one JSON object, with no text or code fence around it, that matches this JSON "
        f"Schema:\n{schema}"
    )


def check_output(output_type: Any, text: str) -> tuple[JSONObject | None, str]:
    """The answer ``text`` validated against ``output_type``: ``(its JSON, "")``, or
    ``(None, why not)``. A Markdown code fence around the JSON is allowed."""
    import pydantic

    body = text.strip()
    if body.startswith("```") and body.endswith("```") and "\n" in body:
        body = body[body.index("\n") + 1 : -3].strip()
    try:
        parsed = answer_model(output_type).model_validate_json(body)
        dumped: JSONObject = parsed.model_dump(mode="json")
    except pydantic.ValidationError as e:
        return None, short_errors(e)
    except Exception as e:  # a validator's own error: the answer is refused, named
        return None, f"validating it as {type_name(output_type)} raised {type(e).__name__}: " + (
            scrub(str(e))[:200]
        )
    try:  # what the log refuses (NaN, Infinity) is refused here, as the answer's
        validate.encode_data({"output": dumped}, max_bytes=sys.maxsize)  # (size: later)
    except InvalidEntry as e:
        return None, f"its JSON cannot be saved ({scrub(str(e))})"
    return dumped, ""


def retry_message(error: str) -> str:
    """What the model hears after an answer that did not validate."""
    return (
        f"Your answer does not match the required JSON Schema: {error}. "
        "Reply again with only a JSON object that matches it."
    )
