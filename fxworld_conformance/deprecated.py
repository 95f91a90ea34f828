"""The kit's names and module paths before its subpackages, importable for one release.

The kit's door is two names: :class:`~fxworld_conformance.WorldSuite` for pytest and
:func:`~fxworld_conformance.run_kit` for code and the CLI. Its modules sit in
subpackages by tier (``directed/``, ``stateful/``, ``procs/``, ``checkers/``,
``broken/``, ``examples/``). The flat module paths of the kit's first release
(``fxworld_conformance.directed_log``, ...) and its other class names
(``WorldConformance``, ``WorldExamples``, ``GuaranteeTests``) still import, with a
``DeprecationWarning`` that names the new place; they go in the next release.
A backend's tests that a rename broke were the reason eventsourcing's users left it.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

__all__ = ["MODULES", "NAMES", "old_name", "install"]

MODULES: dict[str, str] = {
    "fxworld_conformance.directed_errors": "fxworld_conformance.directed.errors",
    "fxworld_conformance.directed_log": "fxworld_conformance.directed.log",
    "fxworld_conformance.directed_probe": "fxworld_conformance.directed.probe",
    "fxworld_conformance.directed_wakes": "fxworld_conformance.directed.wakes",
    "fxworld_conformance.stateful_base": "fxworld_conformance.stateful.base",
    "fxworld_conformance.stateful_log": "fxworld_conformance.stateful.log",
    "fxworld_conformance.stateful_wakes": "fxworld_conformance.stateful.wakes",
    "fxworld_conformance.procs_harness": "fxworld_conformance.procs.harness",
    "fxworld_conformance.procs_probes": "fxworld_conformance.procs.probes",
    "fxworld_conformance._child": "fxworld_conformance.procs.child",
    "fxworld_conformance.proxy": "fxworld_conformance.procs.proxy",
    "fxworld_conformance.checkers_fences": "fxworld_conformance.checkers.fences",
    "fxworld_conformance.checkers_log": "fxworld_conformance.checkers.log",
    "fxworld_conformance.checkers_wakes": "fxworld_conformance.checkers.wakes",
    "fxworld_conformance.history": "fxworld_conformance.checkers.history",
    "fxworld_conformance.linearizable": "fxworld_conformance.stateful.linearizable",
    "fxworld_conformance.broken_url": "fxworld_conformance.broken.url",
}
"""Old module path -> where it lives now."""

NAMES: dict[tuple[str, str], tuple[str, str]] = {
    ("fxworld_conformance", "WorldConformance"): ("fxworld_conformance.suite", "KitChecks"),
    ("fxworld_conformance.suite", "WorldConformance"): ("fxworld_conformance.suite", "KitChecks"),
    ("fxworld_conformance.examples", "WorldExamples"): (
        "fxworld_conformance.examples",
        "ExampleTests",
    ),
    ("fxworld_conformance.examples", "GuaranteeTests"): (
        "fxworld_conformance.examples",
        "AsyncExamples",
    ),
}
"""(module, old name) -> (module, the name it has now). Each is a half of
``WorldSuite`` now, which is what a backend subclasses."""


def old_name(module: str, name: str) -> object:
    """What ``module.name`` was, with a warning; ``AttributeError`` if it never was.
    For a module's ``__getattr__``."""
    new = NAMES.get((module, name))
    if new is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warnings.warn(
        f"{module}.{name} is deprecated and goes in the next release: subclass "
        f"fxworld_conformance.WorldSuite (it is {new[0]}.{new[1]} now)",
        DeprecationWarning,
        stacklevel=3,
    )
    return getattr(importlib.import_module(new[0]), new[1])


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old module path as the module that lives at its new path."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MODULES:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = MODULES[spec.name]
        warnings.warn(
            f"{spec.name} is deprecated and goes in the next release: import {new}",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module is the one at the new path, already run."""


def install() -> None:
    """Make the old module paths importable (once per process)."""
    if not any(isinstance(f, _MovedModules) for f in sys.meta_path):
        sys.meta_path.append(_MovedModules())
