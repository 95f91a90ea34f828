"""W16, W17: one error hierarchy, no credentials shown, declared capabilities.

A mixin of :class:`fxworld_conformance.examples.AsyncExamples`: each test takes
the ``world`` fixture (a fresh, set-up, empty world)."""

from __future__ import annotations

import pytest

from fxworld import NewEntry, World
from fxworld.errors import (
    BackendUnavailable,
    ConfigurationError,
    Conflict,
    EntryTooLarge,
    Fenced,
    InvalidArgument,
    InvalidEntry,
    InvalidSessionId,
    LeaseLost,
    WorldError,
)
from fxworld_conformance.credentials import leak
from fxworld_conformance.examples._support import (
    S,
    e,
)


class ErrorExamples:
    """W16, W17."""

    secrets: tuple[str, ...] = ()
    """Strings (passwords) that must never appear in a repr or an error message."""
    secret_url: str | None = None
    """A URL whose password must never be shown (see
    :func:`fxworld_conformance.credentials.leak`)."""

    # -- W16 errors ----------------------------------------------------------------

    async def test_W16_one_error_hierarchy(self, world: World) -> None:
        for cls in (
            Fenced,
            Conflict,
            LeaseLost,
            InvalidSessionId,
            InvalidEntry,
            EntryTooLarge,
            InvalidArgument,
            BackendUnavailable,
            ConfigurationError,
        ):
            assert issubclass(cls, WorldError)
        for cls in (InvalidSessionId, InvalidEntry, EntryTooLarge, InvalidArgument):
            assert issubclass(cls, ValueError)
        assert issubclass(BackendUnavailable, ConnectionError)
        # What the world raises is of that hierarchy, with readable messages.
        raised: list[WorldError] = []
        f = await world.acquire(S)
        await world.acquire(S)
        for call in (
            lambda: world.append(S, [e()], fence=f),
            lambda: world.append(S, [e()], expect=0),
            lambda: world.append("../x", [e()]),
            lambda: world.append(S, [NewEntry("fence", {})]),
            lambda: world.read(S, limit=0),
        ):
            with pytest.raises(WorldError) as info:
                await call()
            raised.append(info.value)
        assert [type(x) for x in raised] == [
            Fenced,
            Conflict,
            InvalidSessionId,
            InvalidEntry,
            InvalidArgument,
        ]
        for err in raised:
            assert str(err)
            assert_no_secret(str(err) + "\n" + repr(err), self.secrets, self.secret_url)

    async def test_W16_no_credentials_in_the_repr(self, world: World) -> None:
        assert_no_secret(repr(world) + "\n" + str(world), self.secrets, self.secret_url)


def assert_no_secret(text: str, secrets: tuple[str, ...], url: str | None) -> None:
    """No string of ``secrets`` is in ``text``, nor the password of ``url`` where it
    would leak (W16)."""
    for secret in secrets:
        assert secret not in text
    where = leak(text, url)
    assert where is None, f"the URL's password is shown {where}: {text}"
