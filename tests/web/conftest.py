"""Fixtures of the browser tests: one headless Chromium per module, a page per test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.web.test_browser import CHROMIUM, CHROMIUM_ARGS, _require_browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = _require_browser()
    with sync_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    try:
        yield context.new_page()
    finally:
        context.close()
