"""The kit's first-release names and module paths still import, each with a
DeprecationWarning naming where it lives now, and are the very objects of today's
kit, so a backend's tests written for the first release keep running unchanged."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import fxworld_conformance
from fxworld_conformance import deprecated
from fxworld_conformance.examples import AsyncExamples, ExampleTests
from fxworld_conformance.suite import KitChecks, WorldSuite


def test_the_door_is_two_names() -> None:
    assert {"WorldSuite", "run_kit"} <= set(fxworld_conformance.__all__)
    assert not {"WorldConformance", "WorldExamples", "GuaranteeTests"} & set(
        fxworld_conformance.__all__
    )
    assert issubclass(WorldSuite, KitChecks) and issubclass(WorldSuite, ExampleTests)


@pytest.mark.parametrize(
    ("module", "name", "now"),
    [
        ("fxworld_conformance", "WorldConformance", KitChecks),
        ("fxworld_conformance.suite", "WorldConformance", KitChecks),
        ("fxworld_conformance.examples", "WorldExamples", ExampleTests),
        ("fxworld_conformance.examples", "GuaranteeTests", AsyncExamples),
    ],
)
def test_an_old_name_warns_and_is_todays_class(module: str, name: str, now: type) -> None:
    with pytest.warns(DeprecationWarning, match=f"{name} is deprecated.*WorldSuite"):
        old = getattr(importlib.import_module(module), name)
    assert old is now


def test_a_name_that_never_was_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchSuite"):
        fxworld_conformance.NoSuchSuite  # noqa: B018


@pytest.mark.parametrize(("old", "new"), sorted(deprecated.MODULES.items()))
def test_an_old_module_path_warns_and_is_the_new_module(old: str, new: str) -> None:
    """Each in a fresh interpreter: in this one the old path may be imported already."""
    code = (
        (
            "import importlib, warnings\n"
            "warnings.simplefilter('error')\n"
            "new = importlib.import_module(NEW)\n"
            "try:\n    importlib.import_module(OLD)\nexcept DeprecationWarning as w:\n"
            "    assert NEW in str(w), w\nelse:\n    raise SystemExit('no warning')\n"
            "warnings.simplefilter('ignore')\n"
            "assert importlib.import_module(OLD) is new\n"
        )
        .replace("NEW", repr(new))
        .replace("OLD", repr(old))
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
