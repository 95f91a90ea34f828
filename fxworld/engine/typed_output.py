"""Typed answers: ``Agent(output_type=SomeModel)``.

The model is asked (in its instructions) for a final answer that is one JSON
object matching the model's JSON Schema; the answer is validated here, by
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

__all__ = ["output_instructions", "check_output", "retry_message"]


def output_instructions(output_type: type[Any]) -> str:
    """What the model is told of the answer it must give."""
    schema = json.dumps(output_type.model_json_schema(), ensure_ascii=False, sort_keys=True)
    return (
        "When you give your final answer (a reply without tool calls), reply with ONLY "
        "one JSON object, with no text or code fence around it, that matches this JSON "
        f"Schema:\n{schema}"
    )


def check_output(output_type: type[Any], text: str) -> tuple[JSONObject | None, str]:
    """The answer ``text`` validated against ``output_type``: ``(its JSON, "")``, or
    ``(None, why not)``. A Markdown code fence around the JSON is allowed."""
    import pydantic

    body = text.strip()
    if body.startswith("```") and body.endswith("```") and "\n" in body:
        body = body[body.index("\n") + 1 : -3].strip()
    try:
        parsed = output_type.model_validate_json(body)
        dumped: JSONObject = parsed.model_dump(mode="json")
    except pydantic.ValidationError as e:
        return None, short_errors(e)
    except Exception as e:  # a validator's own error: the answer is refused, named
        return None, f"validating it as {output_type.__name__} raised {type(e).__name__}: " + (
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
