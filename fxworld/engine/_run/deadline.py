"""A worker's time budget (a serverless time limit): which step still fits.

Given a deadline, a worker stops at a step boundary before it: a model call or a
tool run needs as long as the longest one seen so far (at least half a second);
the other steps only append. A turn that yields to the deadline appends
``turn.yielded`` with a wake, and the next invocation continues it.
"""

from __future__ import annotations

from .. import clock
from ..replay import CallModel, RunTools, Step

__all__ = ["Deadline"]

MIN_STEP = 0.5
"""Seconds a model call or a tool run is assumed to need before one was timed."""


class Deadline:
    """The budget of one ``work()``: ``budget`` seconds from :meth:`start` (``None``:
    none), and the longest model call or tool run timed so far."""

    def __init__(self, budget: float | None) -> None:
        self.budget = budget
        self.at: float | None = None  # clock.monotonic() based
        self.longest_step = 0.0
        self.hit = False
        """A session yielded at the deadline: no step fits any more, so no wake is
        taken after it (taking one back would only fence and yield it again)."""

    def start(self) -> None:
        if self.budget is not None:
            self.at = clock.monotonic() + self.budget

    def time_left(self) -> float | None:
        return None if self.at is None else self.at - clock.monotonic()

    def too_close(self) -> bool:
        """No new session is taken: a turn yielded to it, or it is under MIN_STEP away."""
        left = self.time_left()
        return self.hit or (left is not None and left <= MIN_STEP)

    def spent(self) -> bool:
        left = self.time_left()
        return left is not None and left <= 0

    def fits(self, step: Step) -> bool:
        """Whether ``step`` can be done before the deadline."""
        left = self.time_left()
        if left is None:
            return True
        needs = 0.0
        if isinstance(step, (CallModel, RunTools)):
            needs = max(self.longest_step, MIN_STEP)
        return left > needs

    def note_step(self, started: float) -> None:
        """A model call or tool run that began at ``started`` (monotonic) ended now."""
        self.longest_step = max(self.longest_step, clock.monotonic() - started)
