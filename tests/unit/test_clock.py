"""The engine clock that tests move instead of sleeping."""

from __future__ import annotations

import pytest

from fxworld.engine import clock
from fxworld.testing import moved_clock


def test_a_moved_clock_moves_both_times_and_is_reset_after() -> None:
    wall, mono = clock.now(), clock.monotonic()
    with moved_clock() as moved:
        moved.advance(3600)
        assert (clock.now() - wall).total_seconds() >= 3600
        assert clock.monotonic() - mono >= 3600
    assert (clock.now() - wall).total_seconds() < 3600
    assert clock.monotonic() - mono < 3600


def test_a_clock_refuses_to_move_back() -> None:
    with moved_clock() as moved, pytest.raises(ValueError, match="forward"):
        moved.advance(-1)
