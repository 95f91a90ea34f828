"""One scenario of one guarantee, and how a group module registers its scenarios.

A group module (``log.py``, ``wakes.py``, ...) makes one :class:`Group` and
registers each scenario with it::

    SCENARIOS = Group()

    @SCENARIOS("a wrong expect is a Conflict with .last; nothing is written")
    async def w5_expect(p: Probe) -> None:
        ...

The function's name gives the W-number (``w5_``) and the pytest id
(``w05-expect``); ``also`` names further guarantees the scenario covers; ``needs``
the capabilities (names of :data:`fxworld.protocol.CAPABILITIES`) or optional
protocols (classes such as :class:`fxworld.protocol.WakeLister`) without which
it is skipped, saying so.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from fxworld_conformance.guarantees.probe import Probe

__all__ = ["Scenario", "Group", "Run"]

Run = Callable[[Probe], Awaitable[None]]

_NAME = re.compile(r"w(\d+)_(\w+)")


@dataclass(frozen=True)
class Scenario:
    """``id`` names its pytest test (``w05-expect``), ``name`` its row in the
    kit's report (``W5 expect: ...``)."""

    id: str
    name: str
    guarantees: tuple[str, ...]
    run: Run
    needs: tuple[str | type, ...] = ()


class Group(list[Scenario]):
    """The scenarios of one module, in the order they are written."""

    def __call__(
        self, title: str, *, also: tuple[str, ...] = (), needs: tuple[str | type, ...] = ()
    ) -> Callable[[Run], Run]:
        def register(run: Run) -> Run:
            m = _NAME.fullmatch(run.__name__)
            if m is None:
                raise ValueError(f"a scenario's name starts with its W-number: {run.__name__}")
            n, rest = int(m.group(1)), m.group(2)
            w = f"W{n}"
            self.append(
                Scenario(
                    f"w{n:02d}-{rest.replace('_', '-')}", f"{w} {title}", (w, *also), run, needs
                )
            )
            return run

        return register
