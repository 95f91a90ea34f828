"""docs/tools.md says what the code has: a row per ``ToolContext`` field, a word on
each of its public methods and on each keyword argument of ``@tool``; README.md and
docs/engine.md link to it."""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

from fxworld import ToolContext, tool

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "tools.md"


def test_the_tool_context_table_has_a_row_per_field_in_order() -> None:
    rows = re.findall(r"^\| `(\w+)` \|", PAGE.read_text(), re.M)
    assert rows == [f.name for f in dataclasses.fields(ToolContext)]


def test_each_method_of_tool_context_and_each_option_of_tool_is_named() -> None:
    text = PAGE.read_text()
    methods = [n for n, _ in inspect.getmembers(ToolContext, inspect.isfunction)]
    for name in [n for n in methods if not n.startswith("_")]:
        assert f"ctx.{name}(" in text, name
    for option in inspect.signature(tool).parameters.values():
        if option.kind is option.KEYWORD_ONLY:
            assert f"{option.name}=" in text, option.name


def test_the_readme_and_the_engine_page_link_to_it() -> None:
    readme = (REPO / "README.md").read_text().splitlines()
    first_tool = next(i for i, line in enumerate(readme) if "@tool" in line)
    link = next(i for i, line in enumerate(readme) if "(docs/tools.md)" in line)
    assert 0 < link - first_tool < 70  # after the Quickstart, where @tool first appears
    assert "(tools.md)" in (REPO / "docs" / "engine.md").read_text()
