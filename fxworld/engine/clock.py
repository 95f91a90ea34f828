"""The engine's clock: wall time and monotonic time, movable by tests.

Every place where the engine owns a wait (approval expiry, deadlines, prune
idleness) reads time here, so a test can move time forward with
:func:`fxworld.testing.moved_clock` instead of sleeping. Production never moves it:
there is no environment variable or setting for it, only the test helper.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

__all__ = ["Clock", "moved_clock", "monotonic", "now"]


class Clock:
    """An offset added to real time; :meth:`advance` moves it forward."""

    def __init__(self) -> None:
        self.offset = 0.0

    def advance(self, seconds: float) -> None:
        """Move both wall and monotonic time ``seconds`` forward."""
        if seconds < 0:
            raise ValueError("a clock only moves forward")
        self.offset += seconds


CLOCK = Clock()


def now() -> datetime:
    """The current UTC time, plus any offset a test moved the clock by."""
    return datetime.now(UTC) + timedelta(seconds=CLOCK.offset)


def monotonic() -> float:
    """``time.monotonic()``, plus any offset a test moved the clock by."""
    return time.monotonic() + CLOCK.offset


@contextmanager
def moved_clock() -> Iterator[Clock]:
    """Yield the engine clock for a test to :meth:`Clock.advance`; reset it after."""
    saved = CLOCK.offset
    try:
        yield CLOCK
    finally:
        CLOCK.offset = saved
