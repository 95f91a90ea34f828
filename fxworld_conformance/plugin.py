"""The kit's pytest plugin (entry point ``pytest11``: ``fxworld_conformance.plugin``).

Adds ``--fxworld-world=URL|module:factory`` (given with no test paths, as in
``pytest --fxworld-world=mypkg.worlds:make_world``, it runs the whole kit),
``--fxworld-profile``, ``--fxworld-seed``, ``--fxworld-keep`` and
``--fxworld-check-timeout`` (the seconds any one check may take), the
markers ``fxworld`` (a kit test) and ``fxworld_slow`` (a kit test that takes more
than a few seconds), and the
fixture ``fxworld_target``: the :class:`~fxworld_conformance.target.Target` named by
the option, or a skip when there is none. A kit test class
(:class:`fxworld_conformance.WorldSuite`) uses that fixture unless a
subclass overrides it.

This module is loaded by every pytest run where fxworld is installed, so it
imports nothing heavy (no Hypothesis, no driver) at import time.
"""

from __future__ import annotations

import pytest

from fxworld_conformance.bounds import seconds
from fxworld_conformance.profiles import PROFILES
from fxworld_conformance.target import Target

__all__ = [
    "fxworld_target",
    "fxworld_profile",
    "fxworld_seed",
    "fxworld_keep",
    "fxworld_check_timeout",
]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fxworld", "fxworld conformance kit")
    group.addoption(
        "--fxworld-world",
        action="store",
        default=None,
        metavar="URL|module:factory",
        help="the World the conformance kit tests: a URL (a fresh namespace per test) "
        "or a zero-argument factory 'pkg.module:name'",
    )
    group.addoption(
        "--fxworld-profile",
        action="store",
        default="ci",
        choices=tuple(PROFILES),
        help="conformance kit profile (default: ci)",
    )
    group.addoption(
        "--fxworld-keep",
        action="store_true",
        default=False,
        help="keep the namespaces the kit makes, for debugging (each test warns "
        "where they are); by default each is removed when its check ends",
    )
    group.addoption(
        "--fxworld-check-timeout",
        action="store",
        type=seconds,
        default=None,
        metavar="SECONDS",
        help="the time bound of every check: one that runs longer fails, saying what it "
        "waited for, and the others still run (default: the profile's bound for the "
        "check's tier: 120 s for a directed scenario, 60 s for an engine one)",
    )
    group.addoption(
        "--fxworld-seed",
        action="store",
        type=int,
        default=0,
        help="seed of the conformance kit's random choices (default: 0)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "fxworld: a test of the fxworld conformance kit")
    config.addinivalue_line(
        "markers", "fxworld_slow: a conformance check that takes more than a few seconds"
    )
    if config.getoption("--fxworld-world") and not config.option.file_or_dir:
        # `pytest --fxworld-world=X` with no test paths: run the whole kit against X.
        from pathlib import Path

        config.args = [str(Path(__file__).with_name("test_world.py"))]


@pytest.fixture
def fxworld_target(request: pytest.FixtureRequest) -> Target:
    """The backend under test, from ``--fxworld-world``; override it in a subclass."""
    spec = request.config.getoption("--fxworld-world")
    if not spec:
        pytest.skip("no --fxworld-world given and the test class does not override fxworld_target")
    return Target.parse(spec)


@pytest.fixture
def fxworld_profile(request: pytest.FixtureRequest) -> str:
    """The kit profile, from ``--fxworld-profile`` (``ci`` by default)."""
    return str(request.config.getoption("--fxworld-profile"))


@pytest.fixture
def fxworld_seed(request: pytest.FixtureRequest) -> int:
    """The kit seed, from ``--fxworld-seed`` (0 by default)."""
    return int(request.config.getoption("--fxworld-seed"))


@pytest.fixture
def fxworld_keep(request: pytest.FixtureRequest) -> bool:
    """Whether to keep the namespaces the kit makes, from ``--fxworld-keep``."""
    return bool(request.config.getoption("--fxworld-keep"))


@pytest.fixture
def fxworld_check_timeout(request: pytest.FixtureRequest) -> float | None:
    """Every check's time bound, from ``--fxworld-check-timeout`` (``None``: the
    target's ``check_timeout``, else the profile's bound for the check's tier)."""
    value = request.config.getoption("--fxworld-check-timeout")
    return None if value is None else float(value)
