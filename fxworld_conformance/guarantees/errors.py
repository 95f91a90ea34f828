"""Scenarios of what a world reports: one error hierarchy, no credentials shown,
declared capabilities (W16, W17)."""

from __future__ import annotations

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
from fxworld.protocol import CAPABILITIES
from fxworld_conformance.credentials import leak
from fxworld_conformance.guarantees.probe import Probe, S, check, e
from fxworld_conformance.guarantees.scenario import Group

__all__ = ["SCENARIOS", "no_secret"]

SCENARIOS = Group()


def no_secret(p: Probe, text: str) -> None:
    """``text`` shows none of the target's secrets, nor its URL's password (W16)."""
    for secret in p.target.secrets:
        check(secret not in text, "W16", f"a secret of the target is shown: {text[:300]}")
    where = leak(text, p.target.url)
    check(where is None, "W16", f"the URL's password is shown {where}: {text[:300]}")


@SCENARIOS("one error hierarchy; the world raises it, with readable messages, no secrets")
async def w16_errors(p: Probe) -> None:
    for cls, bases in [
        (Fenced, (WorldError,)),
        (Conflict, (WorldError,)),
        (LeaseLost, (WorldError,)),
        (InvalidSessionId, (WorldError, ValueError)),
        (InvalidEntry, (WorldError, ValueError)),
        (EntryTooLarge, (InvalidEntry, ValueError)),
        (InvalidArgument, (WorldError, ValueError)),
        (BackendUnavailable, (WorldError, ConnectionError)),
        (ConfigurationError, (WorldError,)),
    ]:
        check(issubclass(cls, bases), "W16", f"{cls.__name__} is not a subclass of {bases}")
    w = p.world
    f = await p.acquire(S)
    await p.acquire(S)
    fenced = await p.expect_error(Fenced, "stale append", w.append(S, [e()], fence=f), "W2")
    check(fenced.session_id == S, "W16", f"Fenced carries {vars(fenced)}")
    raised: list[WorldError] = [
        fenced,
        await p.expect_error(Conflict, "append(expect=0)", w.append(S, [e()], expect=0), "W5"),
        await p.expect_error(InvalidSessionId, "append('../x')", w.append("../x", [e()]), "W15"),
        await p.expect_error(InvalidEntry, "append(kind fence)", w.append(S, [e("fence")]), "W1"),
        await p.expect_error(InvalidArgument, "read(limit=0)", w.read(S, limit=0), "W15"),
        await p.expect_error(InvalidEntry, "append([])", w.append(S, []), "W15"),
    ]
    for err in raised:
        check(bool(str(err)), "W16", f"{type(err).__name__} has no message")
        no_secret(p, f"{err}\n{err!r}")


@SCENARIOS("no credentials in the world's repr")
async def w16_no_credentials_in_the_repr(p: Probe) -> None:
    no_secret(p, f"{p.world!r}\n{p.world}")


@SCENARIOS("capabilities declared: a frozenset of known names")
async def w17_capabilities(p: Probe) -> None:
    caps = getattr(p.world, "capabilities", None)
    check(
        isinstance(caps, frozenset),
        "W17",
        f"capabilities must be a frozenset, not {type(caps).__name__}",
    )
    assert isinstance(caps, frozenset)
    check(all(isinstance(c, str) for c in caps), "W17", f"capabilities must be names: {caps!r}")
    unknown = sorted(c for c in caps if c not in CAPABILITIES and not c.startswith("x-"))
    check(
        not unknown,
        "W17",
        f"unknown capabilities {unknown}; known: {sorted(CAPABILITIES)} "
        "(or prefix x- for your own)",
    )
    check(
        "restartable" not in caps or p.target.restart is not None,
        "W17",
        "'restartable' is a fixture capability: give Target.restart instead of declaring it",
    )
