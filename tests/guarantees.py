"""The example tests of every guarantee now ship in the kit
(:mod:`fxworld_conformance.examples`). This module keeps the old import working
for test files not yet ported to :class:`fxworld_conformance.WorldSuite`."""

from fxworld_conformance.examples import GuaranteeTests
from fxworld_conformance.examples._support import all_entries

__all__ = ["GuaranteeTests", "all_entries"]
