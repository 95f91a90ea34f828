"""The wake state of one session (``w/{sid}``) as a document, and the due index keys
that cover it: pure functions, no I/O (``_wakes`` reads and writes them; its
docstring has the rules these keep).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from fxworld.errors import LeaseLost
from fxworld_s3._layout import Keys

__all__ = [
    "R",
    "Doc",
    "Change",
    "Cover",
    "Plan",
    "ms",
    "empty",
    "requested",
    "deliverable_at",
    "covers",
    "intent_keys",
    "named",
    "cover",
    "unchanged",
    "settle_all",
    "settled",
    "deliverable",
    "taker",
    "holding",
    "MOVE_AFTER",
    "Look",
]

MOVE_AFTER = 1.0
"""A renewal moves a due cover when its lease ends later than this (seconds)."""

R = TypeVar("R")
Doc = dict[str, Any]
Change = Callable[[Doc | None, float], tuple[Doc | None, R]]
Cover = tuple[int, str]  # (t in ms, nonce) of an index key


def ms(seconds: float) -> int:
    """An index key's time: rounded down, so a key is never later than what it covers."""
    return int(seconds * 1000)


def empty(doc: Doc) -> bool:
    return doc.get("due") is None and not doc.get("L") and not doc.get("chk")


def requested(doc: Doc | None, due: float, now: float) -> Doc:
    """``doc`` after a request for a wake due at ``due`` (W11, W13)."""
    doc = dict(doc or {})
    lease = doc.get("L")
    if lease and lease[1] >= now:
        again = doc.get("again")
        doc["again"] = due if again is None else min(again, due)
    else:
        old = doc.get("due")
        doc["due"] = due if old is None else min(old, due)
    return doc


def deliverable_at(doc: Doc | None) -> float | None:
    """From when ``doc`` needs a look: the lease's end while leased, else ``due``,
    or earlier if an intent with no index key of its own would be due then."""
    if doc is None:
        return None
    lease = doc.get("L")
    times = [float(lease[1]) if lease else doc.get("due")]
    times += [i[3] + i[2] for i in doc.get("chk", {}).values() if len(i) < 6]
    return min((t for t in times if t is not None), default=None)


def covers(doc: Doc | None) -> list[Cover]:
    return [(int(t), str(n)) for t, n in (doc or {}).get("ix", [])]


def intent_keys(doc: Doc | None) -> dict[str, Cover]:
    """Each intent's own index key, by the intent's token."""
    return {
        token: (int(i[4]), str(i[5]))
        for token, i in (doc or {}).get("chk", {}).items()
        if len(i) >= 6
    }


def named(doc: Doc | None) -> set[str]:
    """The nonces of the index keys ``doc`` names: its covers and its intents' keys."""
    return {n for _, n in covers(doc)} | {k[1] for k in intent_keys(doc).values()}


@dataclass
class Plan:
    """The index keys of one state change: ``create`` before it, ``drop`` after it."""

    create: Cover | None = None
    drop: list[Cover] = field(default_factory=list)


def cover(
    old: Doc | None, new: Doc | None, applied: set[str], now: float, *, move: bool = False
) -> Plan:
    """Set ``new["ix"]`` so that rules 1-3 of the module docstring hold, and say
    which key to write before ``new`` and which keys to remove after it. ``applied``:
    the intents this change applied (their keys exist: their batches landed)."""
    old_ix, old_intents = covers(old), intent_keys(old)
    gone = [k for token, k in old_intents.items() if token not in intent_keys(new)]
    plan = Plan()
    at = deliverable_at(new)
    if new is None or at is None:
        if new is not None:
            new.pop("ix", None)
        plan.drop = old_ix + gone
        return plan
    limit = ms(at)
    adoptable = [k for token, k in old_intents.items() if token in applied and k in gone]
    candidates = [k for k in adoptable if k[0] <= limit]
    before = deliverable_at(old)
    if before is not None and at >= before:  # rule 2: not earlier, the old covers hold
        candidates += [k for k in old_ix if k[0] <= limit]
    if move and at > now + MOVE_AFTER:  # rule 3
        candidates = [k for k in candidates if k[0] > ms(now)]
    owner = new.get("a")  # W19: a key under another prefix (the owner's, or none) is replaced
    candidates = [k for k in candidates if Keys.agent_of(k[1]) == owner]
    if candidates:
        best = max(candidates)
    else:
        best = plan.create = (limit, Keys.nonce(owner))
    new["ix"] = [list(best)]
    plan.drop = [k for k in dict.fromkeys(old_ix + gone) if k != best]
    return plan


def unchanged(doc: Doc | None, now: float) -> tuple[Doc | None, None]:
    return doc, None


def settle_all(doc: Doc | None, landed: dict[str, float | None], now: float) -> Doc | None:
    for token, at in landed.items():
        doc = settled(doc, token, at, now)
    return doc


def settled(doc: Doc | None, token: str, landed_at: float | None, now: float) -> Doc | None:
    """``doc`` with the intent ``token`` applied (its batch landed at ``landed_at``)
    or dropped (``None``); unchanged if the intent is gone (someone settled it)."""
    if doc is None or token not in doc.get("chk", {}):
        return doc
    doc = dict(doc)
    chk = dict(doc["chk"])
    delay = chk.pop(token)[2]
    doc["chk"] = chk
    if landed_at is not None:
        doc = requested(doc, landed_at + delay, now)
    return doc


def deliverable(doc: Doc, now: float) -> bool:
    lease = doc.get("L")
    if lease:
        return bool(lease[1] < now)  # an expired lease is delivered again (W12)
    due = doc.get("due")
    return due is not None and due <= now  # never before its due time (W11)


def taker(token: str, lease: float, agent: str | None = None) -> Change[tuple[int, float] | None]:
    """Take the wake if it is deliverable and (for ``agent``) not another agent's (W19)."""

    def fn(doc: Doc | None, now: float) -> tuple[Doc | None, tuple[int, float] | None]:
        if doc is None or not deliverable(doc, now):
            return doc, None
        if agent is not None and doc.get("a") not in (None, agent):
            return doc, None
        old = doc.get("L")
        attempt = old[2] + 1 if old else 1
        if old:  # W13: the redelivery covers every request made before it, due or not
            doc.pop("again", None)
        doc["L"] = [token, now + lease, attempt]
        return doc, (attempt, now + lease)

    return fn


def holding(doc: Doc | None, token: str, now: float) -> None:
    lease = (doc or {}).get("L")
    if not lease or lease[0] != token or lease[1] < now:
        raise LeaseLost("the lease expired or was taken by another worker")


@dataclass(frozen=True)
class Look:
    """What one take looks with: ``find`` (intent recovery), the agent it takes for
    (``None``: any) and how it reads a session's owner record (W19)."""

    find: Callable[[str, int, int, str, bool], Any]
    agent: str | None
    owner: Callable[[str], Awaitable[str | None]] | None
