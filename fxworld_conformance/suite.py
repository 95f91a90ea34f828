"""The kit as a pytest test class: subclass :class:`WorldSuite`, give it your world, run pytest.

::

    import pytest
    from fxworld_conformance import Target, WorldSuite

    class TestMyWorld(WorldSuite):
        @pytest.fixture
        def fxworld_target(self):
            return Target(url="mydb://localhost/test")   # or Target(factory=make_world)

Each check of :func:`~fxworld_conformance.runner.run_kit` is its own test, from the
same list, :data:`fxworld_conformance.checks.CHECKS` (``test_directed[w02-fenced-append]``
for each scenario of :data:`fxworld_conformance.guarantees.SCENARIOS`,
``test_engine[steps-...]`` for each of :data:`fxworld_conformance.engine.SCENARIOS`,
``test_capacity``, ``test_stateful[log]``, ``test_processes``), so pytest and the
CLI run exactly the same checks, and pytest shows which guarantee failed (``-k w02`` picks one, ``-m
"not fxworld_slow"`` leaves out the state machines and the process tier); a
failure message starts with the guarantee it proves broken and carries the shrunk
steps or the history excerpt. Without an
override, ``fxworld_target`` comes from the plugin option ``--fxworld-world``.
``fxworld_profile`` (``ci``) and ``fxworld_seed`` (0) are fixtures too, from
``--fxworld-profile`` and ``--fxworld-seed``; ``--fxworld-check-timeout`` sets every
check's time bound.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from fxworld_conformance.checks import CHECKS, Check
from fxworld_conformance.cleanup import Kept
from fxworld_conformance.profiles import TIERS
from fxworld_conformance.report import CheckResult
from fxworld_conformance.runner import run_check
from fxworld_conformance.target import Target

__all__ = [
    "WorldSuite",
    "assert_results",
    "DIRECTED_CHECKS",
    "ENGINE_CHECKS",
    "MACHINE_CHECKS",
    "CAPACITY_CHECK",
    "PROCESS_CHECK",
]


def assert_results(results: list[CheckResult]) -> None:
    """Fail with the kit's traceback if the kit itself failed (a kit error), with
    the guarantee and evidence if any result failed; skip (with the capability
    reasons) if every result was skipped."""
    errors = [r for r in results if r.status == "error"]
    if errors:
        pytest.fail("\n\n".join(f"{r.name}: {r.detail}" for r in errors), pytrace=False)
    failed = [r for r in results if r.status == "failed"]
    if failed:
        text = "\n\n".join(
            f"{', '.join(r.guarantees)} broken ({r.name}):\n{r.detail}" for r in failed
        )
        pytest.fail(text, pytrace=False)
    if results and all(r.status == "skipped" for r in results):
        pytest.skip("; ".join(f"{r.name}: {r.detail}" for r in results))


def _params(tier: str) -> list[Any]:
    """The checks of ``tier`` in :data:`~fxworld_conformance.checks.CHECKS` as
    ``pytest.param``: the check's name, with its id less the tier's name."""
    return [
        pytest.param(c.name, id=c.id.removeprefix(f"{tier}-")) for c in CHECKS if c.tier == tier
    ]


def _one(tier: str) -> Check:
    [check] = [c for c in CHECKS if c.tier == tier]
    return check


DIRECTED_CHECKS = _params("directed")
"""The scenarios as ``pytest.param``: the check's name, with its id
(``w02-fenced-append``)."""

ENGINE_CHECKS = _params("engine")
"""The engine tier's scenarios as ``pytest.param``: the check's name, with its id
(``steps-finished-step-not-run-again``)."""

MACHINE_CHECKS = _params("stateful")
"""The state machines as ``pytest.param``: ``stateful log`` as ``log``, ..."""

CAPACITY_CHECK = _one("capacity")
PROCESS_CHECK = _one("processes")

_TESTS = {
    "directed": DIRECTED_CHECKS,
    "engine": ENGINE_CHECKS,
    "capacity": [CAPACITY_CHECK],
    "stateful": MACHINE_CHECKS,
    "processes": [PROCESS_CHECK],
}
assert tuple(_TESTS) == TIERS and sum(map(len, _TESTS.values())) == len(CHECKS), (
    "every check of the one list has its test in WorldSuite"
)


@pytest.mark.fxworld
class WorldSuite:
    """Everything a backend is tested with, one test per check of the kit:
    ``test_directed[w02-fenced-append]``, ``test_engine[context-saved-and-seen]``,
    ``test_capacity``, ``test_stateful[log]``,
    ``test_processes``, on worlds from ``fxworld_target``. Override that fixture
    (or pass ``--fxworld-world``). A backend's test file subclasses it and adds
    only what is its own; it may override a tier's test (to assert more about its
    results, or run it at another size): an override of ``test_directed`` or
    ``test_stateful`` parametrizes over :data:`DIRECTED_CHECKS` or
    :data:`MACHINE_CHECKS` again (``test_engine``: :data:`ENGINE_CHECKS`).

    Each check drops the namespaces it made when it ends. With ``--fxworld-keep``
    (or ``Target(keep=True)``) they stay, and each test warns where
    (:class:`fxworld_conformance.cleanup.Kept`). Each check runs within its time
    bound (``--fxworld-check-timeout`` or ``Target(check_timeout=)``, else the
    profile's for its tier): past it, its test fails saying what it waited for."""

    @pytest.fixture(autouse=True)
    def _keep_if_asked(
        self,
        request: pytest.FixtureRequest,
        fxworld_keep: bool,
        fxworld_check_timeout: float | None,
    ) -> Iterator[None]:
        target: Target | None = None
        if fxworld_keep or fxworld_check_timeout is not None:
            target = request.getfixturevalue("fxworld_target")
            target.keep = target.keep or fxworld_keep
            if fxworld_check_timeout is not None:
                target.check_timeout = fxworld_check_timeout
        elif "fxworld_target" in request.fixturenames:
            target = request.getfixturevalue("fxworld_target")
        before = len(target.kept) if target is not None else 0
        yield
        if target is not None and target.kept[before:]:
            warnings.warn(
                Kept(f"kept for debugging: {', '.join(target.kept[before:])}"), stacklevel=1
            )

    @pytest.mark.parametrize("check", DIRECTED_CHECKS)
    def test_directed(
        self, check: str, fxworld_target: Target, fxworld_profile: str, fxworld_seed: int
    ) -> None:
        """One scenario of one guarantee, on a fresh world."""
        assert_results(run_check(check, fxworld_target, profile=fxworld_profile, seed=fxworld_seed))

    @pytest.mark.parametrize("check", ENGINE_CHECKS)
    def test_engine(
        self, check: str, fxworld_target: Target, fxworld_profile: str, fxworld_seed: int
    ) -> None:
        """One feature of the turn engine (context, typed answers, durable steps)
        on a fresh world, in one process."""
        assert_results(run_check(check, fxworld_target, profile=fxworld_profile, seed=fxworld_seed))

    def test_capacity(
        self, fxworld_target: Target, fxworld_profile: str, fxworld_seed: int
    ) -> None:
        """Hundreds of idle followers in one process (300 under ``ci``) leave
        appends, reads and wakes at the world's own speed without them."""
        assert_results(
            run_check(CAPACITY_CHECK, fxworld_target, profile=fxworld_profile, seed=fxworld_seed)
        )

    @pytest.mark.fxworld_slow
    @pytest.mark.parametrize("machine", MACHINE_CHECKS)
    def test_stateful(
        self, machine: str, fxworld_target: Target, fxworld_profile: str, fxworld_seed: int
    ) -> None:
        """One state machine: random call sequences checked against the model."""
        assert_results(
            run_check(machine, fxworld_target, profile=fxworld_profile, seed=fxworld_seed)
        )

    @pytest.mark.fxworld_slow
    def test_processes(
        self, fxworld_target: Target, fxworld_profile: str, fxworld_seed: int
    ) -> None:
        """The process tier: OS processes racing with crashes, one result per row."""
        assert_results(
            run_check(PROCESS_CHECK, fxworld_target, profile=fxworld_profile, seed=fxworld_seed)
        )
