"""Broken worlds that race across OS processes: SQLite worlds with one defect,
reachable by URL so that the process tier's children can open them.

``broken+sqlite:///path/world.db?defect=wake_two_steps`` opens a
:class:`~fxworld.embedded.sqlite.SqliteWorld` on that file whose one defect is
named by ``defect`` (a key of :data:`DEFECTS`); every other URL parameter is the
``sqlite://`` one. The scheme is known only where :func:`register` was called
(the kit's own tests, through :func:`fxworld.register_scheme`; the process tier
hands it on to its children), never to a user's ``world()``; the kit must fail
every one of these worlds, and the kit's tests prove it.

Each defect is a step that a correct world does in one atomic write, split in
two with a window of :data:`WINDOW` seconds between: a crash or a freeze that
lands in that window leaves the other half undone. A correct backend's window
is zero; the kit's process tier kills and freezes processes inside such calls
(``kill_inside``, ``stop_inside``) until it lands in one.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from fxworld import register_scheme, unregister_scheme, validate
from fxworld.embedded.sqlite import SqliteWorld
from fxworld.errors import ConfigurationError, Fenced
from fxworld.types import Fence, NewEntry, WakeLease
from fxworld.urls import split_query

__all__ = ["DEFECTS", "BrokenSqlite", "SCHEME", "open_broken", "register", "unregister", "url"]

SCHEME = "broken+sqlite"

WINDOW = 0.05
"""Seconds between the two halves of a defect's split write."""


class BrokenSqlite(SqliteWorld):
    """Base of the defects; ``breaks`` names the guarantee broken, ``also`` the
    ones the same bug can break as well."""

    breaks: str = ""
    what: str = ""
    also: frozenset[str] = frozenset()


class WakeTwoSteps(BrokenSqlite):
    breaks, what = "W7", "append(wake=) commits the entries, then the wake in a second write"

    async def append(
        self,
        session_id: str,
        entries: Sequence[NewEntry],
        *,
        fence: Fence | None = None,
        expect: int | None = None,
        key: str | None = None,
        wake: float | None = None,
    ) -> int:
        seq = await super().append(session_id, entries, fence=fence, expect=expect, key=key)
        if wake is not None:
            await asyncio.sleep(WINDOW)  # the bug: a crash here loses the wake
            await self.wake(session_id, delay=wake)
        return seq


class BatchByEntry(BrokenSqlite):
    breaks, what = "W4", "a batch is written entry by entry, one write each"
    also = frozenset({"W2", "W5", "W6", "W7"})  # a refused later entry leaves the first ones

    async def append(
        self,
        session_id: str,
        entries: Sequence[NewEntry],
        *,
        fence: Fence | None = None,
        expect: int | None = None,
        key: str | None = None,
        wake: float | None = None,
    ) -> int:
        validate.entries(entries, max_bytes=self.max_entry_bytes)
        seq = 0
        for i, entry in enumerate(entries):
            last = i == len(entries) - 1
            if i:
                await asyncio.sleep(WINDOW)  # the bug: a crash here tears the batch
            seq = await super().append(
                session_id,
                [entry],
                fence=fence,
                expect=expect if i == 0 else None,
                key=key if last else None,
                wake=wake if last else None,
            )
        return seq


class AckBeforeDurable(BrokenSqlite):
    breaks, what = "W4", "append returns at once and writes in the background a moment later"
    also = frozenset({"W2", "W5", "W6", "W7", "W9", "W10"})  # everything it acked may be lost

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._pending: set[asyncio.Task[None]] = set()

    async def append(
        self,
        session_id: str,
        entries: Sequence[NewEntry],
        *,
        fence: Fence | None = None,
        expect: int | None = None,
        key: str | None = None,
        wake: float | None = None,
    ) -> int:
        validate.entries(entries, max_bytes=self.max_entry_bytes)
        validate.append_args(session_id, fence=fence, expect=expect, key=key, wake=wake)
        known = await super().read(session_id, 0, limit=100_000)
        last = known[-1].seq if known else 0

        async def later() -> None:
            await asyncio.sleep(4 * WINDOW)  # the bug: a crash before this loses the append
            with contextlib.suppress(Exception):  # and a refusal is never reported
                await SqliteWorld.append(
                    self, session_id, entries, fence=fence, expect=expect, key=key, wake=wake
                )

        task = asyncio.get_running_loop().create_task(later())
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        return last + len(entries)

    async def close(self) -> None:
        for task in list(self._pending):  # what was not written yet is lost
            task.cancel()
        await super().close()


class FenceTwoSteps(BrokenSqlite):
    breaks, what = "W2", "append checks the fence in one read, then writes in a second step"
    also = frozenset({"W8"})

    async def append(
        self,
        session_id: str,
        entries: Sequence[NewEntry],
        *,
        fence: Fence | None = None,
        expect: int | None = None,
        key: str | None = None,
        wake: float | None = None,
    ) -> int:
        if fence is None:
            return await super().append(session_id, entries, expect=expect, key=key, wake=wake)
        validate.append_args(session_id, fence=fence, expect=expect, key=key, wake=wake)
        if (newest := await self._epoch(session_id, fence)) != fence.epoch:
            raise Fenced(session_id, fence.epoch, newest)
        await asyncio.sleep(WINDOW)  # the bug: a takeover here is not seen by the write
        now = Fence(session_id, await self._epoch(session_id, fence), fence.seq)
        return await super().append(
            session_id, entries, fence=now, expect=expect, key=key, wake=wake
        )

    async def _epoch(self, session_id: str, fence: Fence) -> int:
        later = await self.read(session_id, fence.seq - 1, limit=100_000)
        return max((e.epoch or 0 for e in later if e.kind == validate.FENCE_KIND), default=0)


class LeaseUnitSlip(BrokenSqlite):
    breaks, what = "W12", "a lease is stored in milliseconds, not seconds: handed out twice"
    also = frozenset({"W11"})  # the second delivery is not a due wake either

    async def take_wake(self, *, lease: float) -> WakeLease | None:
        seconds = validate.lease(lease)
        got = await super().take_wake(lease=seconds / 1000)  # the bug: a unit slip
        if got is None:
            return None
        until = datetime.fromtimestamp(time.time() + seconds, UTC)
        return WakeLease(got.session_id, got.token, got.attempt, until)


def register() -> None:
    """Make ``broken+sqlite://`` URLs open in this process (and in the process
    tier's children)."""
    register_scheme(SCHEME, f"{__name__}:open_broken")


def unregister() -> None:
    """Undo :func:`register`."""
    unregister_scheme(SCHEME)


def open_broken(url: str) -> BrokenSqlite:
    """Open ``broken+sqlite:///path?defect=NAME&...`` (what the scheme is registered to)."""
    base, params = split_query(url)
    defect = params.pop("defect", "")
    world_class = DEFECTS.get(defect)
    if world_class is None:
        raise ConfigurationError(
            f"{SCHEME}:// needs ?defect= one of {', '.join(DEFECTS)}, not {defect!r}"
        )
    plain = "sqlite" + base[len(SCHEME) :] + ("?" + urlencode(params) if params else "")
    made = world_class.from_url(plain)
    assert isinstance(made, BrokenSqlite)
    return made


DEFECTS: dict[str, type[BrokenSqlite]] = {
    "wake_two_steps": WakeTwoSteps,
    "batch_by_entry": BatchByEntry,
    "ack_before_durable": AckBeforeDurable,
    "fence_two_steps": FenceTwoSteps,
    "lease_unit_slip": LeaseUnitSlip,
}
"""defect name (the URL's ``?defect=``) -> the world class that has it."""


def url(path: str, defect: str) -> str:
    """The URL of the broken world ``defect`` on the SQLite file ``path``."""
    return f"{SCHEME}:///{path}?defect={defect}"
