"""The kit as pytest test classes: subclass one, give it your world, run pytest.

::

    import pytest
    from fxworld_conformance import Target, WorldConformance

    class TestMyWorld(WorldConformance):
        @pytest.fixture
        def fxworld_target(self):
            return Target(url="mydb://localhost/test")   # or Target(factory=make_world)

Each check is its own test (``test_w02_fenced_append``, ``test_stateful_log``,
``test_processes``, ...), so pytest shows which guarantee failed; a failure
message starts with the guarantee it proves broken and carries the shrunk steps
or the history excerpt. Without an override, ``fxworld_target`` comes from the
plugin option ``--fxworld-world``. ``fxworld_profile`` (``ci``) and
``fxworld_seed`` (0) are fixtures too, from ``--fxworld-profile`` and
``--fxworld-seed``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from fxworld_conformance.examples import WorldExamples
from fxworld_conformance.report import GUARANTEES, CheckResult
from fxworld_conformance.runner import check_names, run_check
from fxworld_conformance.target import Target

__all__ = ["WorldConformance", "WorldSuite", "assert_results"]


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


def _make_test(name: str) -> Callable[..., None]:
    def test(
        self: WorldConformance, fxworld_target: Target, fxworld_profile: str, fxworld_seed: int
    ) -> None:
        assert_results(run_check(name, fxworld_target, profile=fxworld_profile, seed=fxworld_seed))

    test.__doc__ = f"Conformance check: {name}."
    return test


def _test_name(name: str) -> str:
    m = re.match(r"W(\d+) ", name)
    if m:
        slug = re.sub(r"\W+", "_", GUARANTEES[f"W{m.group(1)}"]).strip("_").lower()
        if "cancel" in name:
            slug += "_cancelled"
        return f"test_w{int(m.group(1)):02d}_{slug}"
    return "test_" + re.sub(r"\W+", "_", name).strip("_").lower()


@pytest.mark.fxworld
class WorldConformance:
    """All of the kit's checks, one test each. Override the ``fxworld_target``
    fixture (or pass ``--fxworld-world``)."""


for _name in check_names():
    _test = _make_test(_name)
    if not _name.startswith("W"):
        _test = pytest.mark.fxworld_slow(_test)
    setattr(WorldConformance, _test_name(_name), _test)
del _name, _test


class WorldSuite(WorldConformance, WorldExamples):
    """Everything a backend is tested with: the kit's checks (directed, state
    machines, process tier) and the example tests of every guarantee
    (:mod:`fxworld_conformance.examples`), on worlds from ``fxworld_target``.
    A backend's test file subclasses it and adds only what is its own."""
