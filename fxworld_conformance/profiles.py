"""The kit's profiles, one table for every tier: how many followers the capacity
check starts, how many examples and steps the state machines run, how long and how
hard the process tier pushes, and how long one check of each tier may take (its
time bound: :mod:`fxworld_conformance.bounds`).

``quick`` is a smoke run (the kit's own tests), ``ci`` the default (bounded and
derandomized: a few minutes per backend), ``thorough`` about ten times ``ci``
(random). :func:`profile` refuses an unknown name before anything runs.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PROFILES", "TIERS", "KitProfile", "CapacityProfile", "ProcessProfile", "profile"]

TIERS = ("directed", "engine", "capacity", "stateful", "processes")
"""The kit's tiers, in the order it runs them."""


@dataclass(frozen=True)
class CapacityProfile:
    """How many followers the capacity check starts, and how long it times calls."""

    followers: int
    """Idle followers in one process, two to a session."""
    rounds: int
    """Rounds of append, read, wake, take_wake and finish_wake timed alone, and again
    while the followers wait."""


_CAPACITY: dict[str, CapacityProfile] = {
    "quick": CapacityProfile(followers=100, rounds=8),
    "ci": CapacityProfile(followers=300, rounds=12),
    "thorough": CapacityProfile(followers=1000, rounds=30),
}


@dataclass(frozen=True)
class ProcessProfile:
    """How hard the process tier pushes."""

    duration: float
    """Seconds of racing workload."""
    sessions: int
    roles: dict[str, int]
    """Role -> how many processes play it."""
    lease: float
    op_timeout: float
    pace: float
    fault_gap: tuple[float, float]
    """Seconds between two faults: uniform in this range."""
    rounds: int = 1


_PROCESSES: dict[str, ProcessProfile] = {
    "quick": ProcessProfile(
        duration=4.0,
        sessions=2,
        roles={
            "writer": 2,
            "prompter": 1,
            "atomic": 1,
            "follower": 1,
            "reader": 1,
            "worker": 2,
            "poker": 1,
        },
        lease=0.6,
        op_timeout=3.0,
        pace=0.03,
        fault_gap=(0.5, 1.2),
    ),
    "ci": ProcessProfile(
        duration=12.0,
        sessions=3,
        roles={
            "writer": 3,
            "prompter": 1,
            "atomic": 2,
            "follower": 1,
            "reader": 1,
            "worker": 2,
            "poker": 1,
        },
        lease=0.8,
        op_timeout=3.0,
        pace=0.03,
        fault_gap=(0.6, 1.4),
    ),
    "thorough": ProcessProfile(
        duration=40.0,
        sessions=4,
        roles={
            "writer": 4,
            "prompter": 2,
            "atomic": 2,
            "follower": 2,
            "reader": 2,
            "worker": 3,
            "poker": 1,
        },
        lease=1.0,
        op_timeout=4.0,
        pace=0.02,
        fault_gap=(0.4, 1.2),
        rounds=2,
    ),
}


@dataclass(frozen=True)
class KitProfile:
    """One row of :data:`PROFILES`: what every tier does under this name."""

    name: str
    machines: dict[str, tuple[int, int]]
    """State machine -> (max examples, steps per example)."""
    derandomize: bool
    """Hypothesis replays the same examples on every run (``seed`` 0)."""
    shrink_seconds: float
    """The most time Hypothesis may spend shrinking a failure."""
    processes: ProcessProfile
    capacity: CapacityProfile
    bounds: dict[str, float]
    """Tier -> the seconds one check of it may take before it fails as stuck (its
    time bound); ``Target.check_timeout`` (``--check-timeout``) sets one for all."""


def _bounds(
    *, directed: float = 120, engine: float = 60, capacity: float = 300, **more: float
) -> dict[str, float]:
    """Each tier's time bound: a directed scenario 120 s (each of its world calls is
    bounded by 60 s on its own), an engine scenario 60 s (one takes a few seconds on
    S3), both far above what they take on a slow server under load; the capacity
    check 300 s; the state machines and the process tier by profile."""
    bounds = {"directed": directed, "engine": engine, "capacity": capacity, **more}
    assert set(bounds) == set(TIERS), bounds
    return bounds


PROFILES: dict[str, KitProfile] = {
    "quick": KitProfile(
        "quick",
        {"stateful log": (25, 30), "stateful wakes": (25, 25)},
        derandomize=True,
        shrink_seconds=30.0,
        processes=_PROCESSES["quick"],
        capacity=_CAPACITY["quick"],
        bounds=_bounds(stateful=600, processes=600),
    ),
    "ci": KitProfile(
        "ci",
        {"stateful log": (80, 40), "stateful wakes": (100, 30)},
        derandomize=True,
        shrink_seconds=30.0,
        processes=_PROCESSES["ci"],
        capacity=_CAPACITY["ci"],
        bounds=_bounds(stateful=1800, processes=900),
    ),
    "thorough": KitProfile(
        "thorough",
        {"stateful log": (600, 80), "stateful wakes": (400, 60)},
        derandomize=False,
        shrink_seconds=300.0,
        processes=_PROCESSES["thorough"],
        capacity=_CAPACITY["thorough"],
        bounds=_bounds(capacity=900, stateful=7200, processes=2400),
    ),
}
"""Profile name -> what every tier does under it."""


def profile(name: object) -> KitProfile:
    """The profile called ``name``; ``ValueError`` naming the known ones if none is."""
    found = PROFILES.get(name) if isinstance(name, str) else None
    if found is None:
        raise ValueError(f"unknown kit profile {name!r}; choose one of {', '.join(PROFILES)}")
    return found
