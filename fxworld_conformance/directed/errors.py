"""Directed checks of what a world refuses and reports: bad input, the error
hierarchy and credentials, declared capabilities (W15-W17)."""

from __future__ import annotations

import functools
import math
from collections.abc import Awaitable, Callable
from typing import Any

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
from fxworld.types import Fence, NewEntry
from fxworld_conformance.bad_values import BAD_SESSION_IDS
from fxworld_conformance.credentials import leak, password_of
from fxworld_conformance.directed.probe import Probe, check, msgs, show
from fxworld_conformance.model import Violation
from fxworld_conformance.target import Target

__all__ = ["w15_bad_input", "w16_errors", "w17_capabilities"]


async def w15_bad_input(p: Probe, target: Target) -> None:
    w = p.world
    good = [NewEntry("message", {"ok": True})]
    await p.append("s", good)
    for bad in BAD_SESSION_IDS.values():
        calls: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
            ("append", functools.partial(w.append, bad, good)),
            ("acquire", functools.partial(w.acquire, bad)),
            ("read", functools.partial(w.read, bad)),
            ("wake", functools.partial(w.wake, bad)),
            ("delete", functools.partial(w.delete, bad)),
        ]
        for name, make in calls:
            await p.expect_error(InvalidSessionId, f"{name}({bad!r})", make(), "W15")
        try:
            w.follow(bad)
        except InvalidSessionId:
            pass
        except Exception as e:
            raise Violation(
                "W15", f"follow({bad!r}) raised {type(e).__name__}, not InvalidSessionId"
            ) from e
        else:
            it = w.follow(bad)
            await p.expect_error(InvalidSessionId, f"follow({bad!r})", it.__anext__(), "W15")
    ok = "a" * 128
    await p.append(ok, good)
    bad_entries: list[tuple[str, Any]] = [
        ("empty kind", [NewEntry("", {})]),
        ("kind of 65 chars", [NewEntry("k" * 65, {})]),
        ("reserved kind", [NewEntry("fence", {"epoch": 99})]),
        ("list data", [NewEntry("m", [1, 2])]),  # type: ignore[arg-type]
        ("string data", [NewEntry("m", "text")]),  # type: ignore[arg-type]
        ("non-JSON value", [NewEntry("m", {"s": {1, 2}})]),
        ("NaN", [NewEntry("m", {"x": math.nan})]),
        ("non-string key", [NewEntry("m", {1: "x"})]),  # type: ignore[dict-item]
        ("tuple value", [NewEntry("m", {"t": (1, 2)})]),
        ("data nested 5,000 deep", [NewEntry("m", _nested(5000))]),
        ("empty batch", []),
        ("valid then invalid", [*good, NewEntry("", {})]),
        ("not NewEntry", [{"kind": "m", "data": {}}]),
    ]
    for what, entries in bad_entries:
        await p.expect_error(InvalidEntry, f"append with {what}", w.append("s", entries), "W15")
    limit = int(getattr(w, "max_entry_bytes", 1024 * 1024))
    huge = NewEntry("m", {"blob": "x" * (limit + 10)})
    too_large = await p.expect_error(
        EntryTooLarge, f"append of an entry over {limit} bytes", w.append("s", [*good, huge]), "W15"
    )
    check(isinstance(too_large, InvalidEntry), "W15", "EntryTooLarge must be an InvalidEntry")
    bad_args: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
        ("read(limit=0)", lambda: w.read("s", 0, limit=0)),
        ("read(after=-1)", lambda: w.read("s", -1)),
        ("append(expect=-1)", lambda: w.append("s", good, expect=-1)),
        ("append(wake=-1)", lambda: w.append("s", good, wake=-1.0)),
        ("append(wake=nan)", lambda: w.append("s", good, wake=math.nan)),
        ("append(key='')", lambda: w.append("s", good, key="")),
        ("read(after=2**64)", lambda: w.read("s", 2**64)),
        ("read(limit=2**64)", lambda: w.read("s", 0, limit=2**64)),
        ("wake(delay=-1)", lambda: w.wake("s", delay=-1.0)),
        ("take_wake(lease=0)", lambda: w.take_wake(lease=0.0)),
        ("take_wake(lease=inf)", lambda: w.take_wake(lease=math.inf)),
        ("take_wake(lease=1e300)", lambda: w.take_wake(lease=1e300)),
        ("wake(delay=1e300)", lambda: w.wake("s", delay=1e300)),
    ]
    for what, make in bad_args:
        await p.expect_error(InvalidArgument, what, make(), "W15")
    foreign = w.append("s", good, fence=Fence("t", 1, 1))  # never the newest fence of "s"
    await p.expect_error(Fenced, "append(fence of another session)", foreign, "W2")
    log = await p.read_all("s")
    check(len(log) == 1, "W15", f"rejected calls left entries behind: {show(log)}")
    check(await p.take() is None, "W15", "a rejected append(wake=...) enqueued a wake")


def _nested(depth: int) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for _ in range(depth):
        data = {"a": data}
    return data


async def w16_errors(p: Probe, target: Target) -> None:
    for cls, bases in [
        (Fenced, (WorldError,)),
        (Conflict, (WorldError,)),
        (LeaseLost, (WorldError,)),
        (InvalidSessionId, (WorldError, ValueError)),
        (InvalidEntry, (WorldError, ValueError)),
        (EntryTooLarge, (InvalidEntry,)),
        (BackendUnavailable, (WorldError, ConnectionError)),
        (ConfigurationError, (WorldError,)),
    ]:
        check(issubclass(cls, bases), "W16", f"{cls.__name__} is not a subclass of {bases}")
    f = await p.acquire("s")
    await p.acquire("s")
    e = await p.expect_error(Fenced, "stale append", p.world.append("s", msgs(1), fence=f), "W2")
    check(isinstance(e, Fenced) and e.session_id == "s", "W16", f"Fenced carries {vars(e)}")
    if password_of(target.url):
        where = leak(repr(p.world) + "\n" + str(p.world), target.url)
        check(where is None, "W16", f"the world's repr shows the URL's password {where}")
        errors: list[str] = [str(e), repr(e)]
        for make in (lambda: p.world.read("bad id"), lambda: p.world.append("s", [])):
            try:
                await make()
            except Exception as err:
                errors.append(str(err))
        where = leak("\n".join(errors), target.url)
        check(where is None, "W16", f"an error message shows the URL's password {where}")
    # every error the world raised in this check was an fxworld error (Probe enforces it)
    await p.read("s", 0)


async def w17_capabilities(p: Probe, target: Target) -> None:
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
        "restartable" not in caps or target.restart is not None,
        "W17",
        "'restartable' is a fixture capability: give Target.restart instead of declaring it",
    )
