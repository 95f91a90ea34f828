"""Entry data may nest MAX_DATA_DEPTH deep and no deeper, on every Python (3.13's json
encodes 5,000 levels where 3.11's ran out of recursion): a typed error, nothing written."""

from __future__ import annotations

import json

import pytest

from fxworld import MemoryWorld, NewEntry
from fxworld.errors import InvalidEntry
from fxworld.validate import MAX_DATA_DEPTH, encode_data


def nested(depth: int) -> dict[str, object]:
    """An object ``depth`` containers deep (itself included), lists and objects mixed."""
    inner: object = {}
    for i in range(depth - 2):
        inner = [inner] if i % 2 else {"a": inner}
    return {"a": inner}


def test_the_deepest_allowed_data_encodes() -> None:
    assert (
        encode_data(nested(MAX_DATA_DEPTH)).count("{")
        + encode_data(nested(MAX_DATA_DEPTH)).count("[")
        == MAX_DATA_DEPTH
    )


@pytest.mark.parametrize("depth", [MAX_DATA_DEPTH + 1, 5_000, 100_000])
async def test_deeper_data_is_refused_and_nothing_is_written(depth: int) -> None:
    with pytest.raises(InvalidEntry, match=f"nested more than {MAX_DATA_DEPTH} deep"):
        encode_data(nested(depth))
    w = MemoryWorld()
    with pytest.raises(InvalidEntry):
        await w.append("s", [NewEntry("m", {"ok": 1}), NewEntry("m", nested(depth))])
    assert await w.read("s", 0) == []


def test_wide_data_is_not_deep() -> None:
    wide = {f"k{i}": [[i]] for i in range(2_000)}
    assert encode_data(wide).startswith("{")


@pytest.mark.parametrize(
    ("data", "why"),
    [
        ({"a": [{"b": {2: "x"}}]}, "key that is not a string"),
        ({"a": [1, [2, (3,)]]}, "tuple"),
        ({"a": {"b": [{"c": ()}]}}, "tuple"),
        ({"a": [{None: 1}]}, "key that is not a string"),
        ({"a": [float("nan")]}, "not JSON"),
        ({"a": {"b": {1, 2}}}, "not JSON"),
    ],
    ids=["deep-int-key", "tuple-in-list", "tuple-in-object", "none-key", "nan", "set"],
)
def test_data_json_would_change_is_refused_at_any_depth(data: dict[str, object], why: str) -> None:
    with pytest.raises(InvalidEntry, match=why):
        encode_data(data)


def test_accepted_data_decodes_back_to_itself() -> None:
    data = {"a": [1, 2.5, -0.0, 10**30, "é\n", None, True, {"b": [[], {}]}], "": {"x": "y"}}
    assert json.loads(encode_data(data)) == data
