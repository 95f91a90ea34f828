"""The kit as a pytest test class: subclass :class:`WorldSuite`, give it your world, run pytest.

::

    import pytest
    from fxworld_conformance import Target, WorldSuite

    class TestMyWorld(WorldSuite):
        @pytest.fixture
        def fxworld_target(self):
            return Target(url="mydb://localhost/test")   # or Target(factory=make_world)

Each check of :func:`~fxworld_conformance.runner.run_kit` is its own test, run
through the same table (``test_directed[w02-fenced-append]`` for each scenario of
:data:`fxworld_conformance.guarantees.SCENARIOS`, ``test_engine[steps-...]`` for
each of :data:`fxworld_conformance.engine.SCENARIOS`, ``test_capacity``,
``test_stateful[log]``, ``test_processes``), so pytest and the CLI run exactly the
same checks, and pytest shows which guarantee failed (``-k w02`` picks one, ``-m
"not fxworld_slow"`` leaves out the state machines and the process tier); a
failure message starts with the guarantee it proves broken and carries the shrunk
steps or the history excerpt. Without an
override, ``fxworld_target`` comes from the plugin option ``--fxworld-world``.
``fxworld_profile`` (``ci``) and ``fxworld_seed`` (0) are fixtures too, from
``--fxworld-profile`` and ``--fxworld-seed``.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest

from fxworld_conformance.capacity import NAME as CAPACITY
from fxworld_conformance.cleanup import Kept
from fxworld_conformance.engine import SCENARIOS as ENGINE_SCENARIOS
from fxworld_conformance.guarantees import SCENARIOS
from fxworld_conformance.report import CheckResult
from fxworld_conformance.runner import run_check
from fxworld_conformance.stateful import MACHINES
from fxworld_conformance.target import Target

__all__ = [
    "WorldSuite",
    "assert_results",
    "DIRECTED_CHECKS",
    "ENGINE_CHECKS",
    "MACHINE_CHECKS",
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


DIRECTED_CHECKS = [pytest.param(s.name, id=s.id) for s in SCENARIOS]
"""The scenarios as ``pytest.param``: the check's name, with its id
(``w02-fenced-append``)."""

ENGINE_CHECKS = [pytest.param(s.name, id=s.id) for s in ENGINE_SCENARIOS]
"""The engine tier's scenarios as ``pytest.param``: the check's name, with its id
(``steps-finished-step-not-run-again``)."""

MACHINE_CHECKS = [pytest.param(name, id=name.removeprefix("stateful ")) for name in MACHINES]
"""The state machines as ``pytest.param``: ``stateful log`` as ``log``, ..."""


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
    (:class:`fxworld_conformance.cleanup.Kept`)."""

    @pytest.fixture(autouse=True)
    def _keep_if_asked(self, request: pytest.FixtureRequest, fxworld_keep: bool) -> Iterator[None]:
        target: Target | None = None
        if fxworld_keep:
            target = request.getfixturevalue("fxworld_target")
            target.keep = True
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
            run_check(CAPACITY, fxworld_target, profile=fxworld_profile, seed=fxworld_seed)
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
            run_check("processes", fxworld_target, profile=fxworld_profile, seed=fxworld_seed)
        )
