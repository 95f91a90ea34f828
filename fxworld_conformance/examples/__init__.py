"""Example-based tests of every guarantee W1-W17, grouped by guarantee, shipped in
the kit so that every backend gets exactly the tests the first-party ones get.

Two shapes of the same tests:

- :class:`fxworld_conformance.WorldSuite` (the usual one): the whole kit plus these
  examples, each a plain (synchronous) pytest test on a fresh world opened from the
  ``fxworld_target`` fixture. Needs nothing beyond pytest.
- :class:`AsyncExamples`: the examples alone, as ``async`` tests taking a
  ``world`` fixture (a fresh, set-up, empty world) that the subclass provides;
  needs pytest-asyncio in auto mode. :class:`ExampleTests` is built from it: it is
  the examples' half of ``WorldSuite``.

The groups: :class:`LogExamples` (W1-W6, W8, W9), :class:`FollowExamples` (W10),
:class:`WakeExamples` (W7, W11-W13), :class:`WakeStateExamples` (the optional
``WakeLister``, against the reference model), :class:`DeleteExamples` (W14, listing),
:class:`BadInputExamples` (W15), :class:`ErrorExamples` (W16, W17),
:class:`PruneExamples` (the optional ``last_entry`` and ``delete_if_idle``).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import pytest

from fxworld import World
from fxworld_conformance import deprecated
from fxworld_conformance.examples.bad_input import BadInputExamples
from fxworld_conformance.examples.delete import DeleteExamples
from fxworld_conformance.examples.errors import ErrorExamples
from fxworld_conformance.examples.follow import FollowExamples
from fxworld_conformance.examples.log import LogExamples
from fxworld_conformance.examples.prune import PruneExamples
from fxworld_conformance.examples.wake_states import WakeStateExamples
from fxworld_conformance.examples.wakes import WakeExamples
from fxworld_conformance.target import Target, with_namespace

__all__ = [
    "AsyncExamples",
    "ExampleTests",
    "LogExamples",
    "FollowExamples",
    "WakeExamples",
    "WakeStateExamples",
    "DeleteExamples",
    "BadInputExamples",
    "ErrorExamples",
    "PruneExamples",
]

GROUPS: tuple[type, ...] = (
    LogExamples,
    FollowExamples,
    WakeExamples,
    WakeStateExamples,
    DeleteExamples,
    BadInputExamples,
    ErrorExamples,
    PruneExamples,
)


class AsyncExamples(*GROUPS):  # type: ignore[misc]
    """W1-W17, example-based, as async tests. Override the ``world`` fixture."""

    @pytest.fixture
    async def world(self) -> AsyncIterator[World]:
        raise NotImplementedError("a backend's test class overrides the `world` fixture")
        yield  # pragma: no cover


Example = Callable[..., Coroutine[Any, Any, None]]


def _sync(name: str, example: Example) -> Callable[..., None]:
    """``example`` (``async (self, world, **params)``) as a synchronous test taking
    ``fxworld_target``: a fresh world is opened, the example runs, the world closes."""
    signature = inspect.signature(example)
    params = [p for p in signature.parameters.values() if p.name != "world"]
    params.insert(1, inspect.Parameter("fxworld_target", inspect.Parameter.POSITIONAL_OR_KEYWORD))

    async def run(self: Any, target: Target, kw: dict[str, Any]) -> None:
        namespace = target.fresh_namespace()
        world = await target.open(namespace)
        self.world_url = with_namespace(target.url, namespace) if target.url else None
        try:
            await example(self, world, **kw)
        finally:
            await world.close()

    def test(self: Any, fxworld_target: Target, **kw: Any) -> None:
        self.secret_url = fxworld_target.url
        asyncio.run(run(self, fxworld_target, kw))

    test.__name__ = test.__qualname__ = name
    test.__doc__ = example.__doc__
    test.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    marks = getattr(example, "pytestmark", None)
    if marks:
        test.pytestmark = list(marks)  # type: ignore[attr-defined]
    return test


class ExampleTests:
    """The examples of :class:`AsyncExamples` as synchronous tests on worlds opened
    from the ``fxworld_target`` fixture."""

    secrets: tuple[str, ...] = ()
    secret_url: str | None = None
    world_url: str | None = None


for _name in dir(AsyncExamples):
    _value = getattr(AsyncExamples, _name)
    if _name.startswith("test") and inspect.iscoroutinefunction(_value):
        setattr(ExampleTests, _name, _sync(_name, _value))
del _name, _value


def __getattr__(name: str) -> object:
    return deprecated.old_name(__name__, name)
