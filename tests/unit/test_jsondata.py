"""Entry data with large strings is encoded and parsed fast (fxworld.jsondata) and
exactly as the standard library does it: the same text, size and value back."""

from __future__ import annotations

import json

import pytest

from fxworld import jsondata
from fxworld.errors import EntryTooLarge, InvalidEntry
from fxworld.validate import encode_data

BIG = 'a"b\\c\n\x00\x1f\x7fé😀\u2028 ' * (jsondata.LARGE_STRING // 10)
STDLIB = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


@pytest.mark.parametrize(
    "data",
    [
        {"x": BIG},
        {"a": [1, {"b": BIG, "c": [BIG, "small"]}], "n": 1.5, "k": None, "t": True},
        {"x": "v" * jsondata.LARGE_STRING, "y": "w" * jsondata.LARGE_STRING, "z": {}},
        {"x": "v" * (jsondata.LARGE_STRING - 1)},
    ],
)
def test_large_strings_encode_as_the_standard_library_and_decode_back(data: dict) -> None:
    text = encode_data(data)
    assert text == STDLIB.encode(data)
    assert jsondata.decode(text) == data
    assert jsondata.decode(text.encode()) == data


def test_the_size_counted_is_the_utf8_size() -> None:
    data = {"x": "é" * jsondata.LARGE_STRING}
    size = len(STDLIB.encode(data).encode())
    assert encode_data(data, max_bytes=size)
    with pytest.raises(EntryTooLarge) as caught:
        encode_data(data, max_bytes=size - 1)
    assert caught.value.size == size


@pytest.mark.parametrize(
    ("data", "why"),
    [
        ({"x": "a\ud800" * jsondata.LARGE_STRING}, "not valid Unicode"),
        ({"x": "v" * jsondata.LARGE_STRING, "y": float("nan")}, "not JSON"),
        ({"x": "v" * jsondata.LARGE_STRING, "y": object()}, "not JSON"),
        ({"x": "v" * jsondata.LARGE_STRING, "y": (1,)}, "tuple"),
    ],
)
def test_what_is_not_json_is_refused_beside_a_large_string(data: dict, why: str) -> None:
    with pytest.raises(InvalidEntry, match=why):
        encode_data(data)


def test_a_caller_string_that_holds_the_placeholder_is_still_encoded_right(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(jsondata.secrets, "token_hex", lambda n: "t" * 24)
    data = {"x": "v" * jsondata.LARGE_STRING, "y": "t" * 24 + "0"}
    assert encode_data(data) == STDLIB.encode(data)


def test_what_pydantic_core_does_not_parse_is_parsed_by_json() -> None:
    text = '{"x":"\\ud800","y":"' + "v" * jsondata.LARGE_STRING + '"}'
    assert jsondata.decode(text) == json.loads(text)
