"""``FXWORLD_REQUIRE_ALL_BACKENDS=1`` (set by ``.ci/run`` and the workflow): a test
that a fixture skips (a server that could not start, a world that could not be
provided, a browser that is missing) fails instead, with the skip's reason. Skips
from ``skip``/``skipif`` marks (e.g. the platform) and skips inside a test's body (a
capability the world does not declare, a machine too loaded to time a step) stay
skips. Registered from ``tests/conftest.py``.

Backend fixtures should raise, never skip, when their server cannot start; this
hook is the net under them, so CI can never pass by skipping a backend.
"""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest

ENV = "FXWORLD_REQUIRE_ALL_BACKENDS"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if (
        os.environ.get(ENV) == "1"
        and report.when == "setup"
        and report.skipped
        and not any(item.iter_markers("skip"))
        and not any(item.iter_markers("skipif"))
    ):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        report.outcome = "failed"
        report.longrepr = f"{ENV}=1: a fixture skipped this test, which is a failure here: {reason}"
    return report
