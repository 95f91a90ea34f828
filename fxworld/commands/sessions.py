"""`fxworld sessions list | show ID | value ID SEQ | approvals ID | approve | deny | stop | fork
ID | prune`.

``list`` prints the sessions with a non-empty log, newest activity first, one a
line: its id, its state (``running``, ``waiting for approval``, ``failed``, ...: what
the inspector shows), what it needs a person for (``failed``, ``tool-error``, ...;
``-``: nothing), its agent (``-``: none named) and the time of its last entry. The
inspector's filters: ``--attention any|waiting|stuck|failed|tool-error|interrupted|stopped``,
``--agent NAME``, ``--context key=value`` (repeatable), ``--state STATE``,
``--active DURATION`` (last activity within: ``24h``, ``7d``), ``--search TEXT``
(anywhere in the id or the first prompt, any case); ``--limit N`` the first N, and
the count on stderr says how many there are in all (for worlds that can list
sessions). ``show ID`` prints a session's log, one entry a
line: seq, commit time (UTC), kind, epoch (``-`` for an unfenced entry) and its
data as compact JSON; ``--after N`` starts after seq N; ``--follow`` keeps
printing new entries as they land, until Ctrl-C. After the log, ``show`` prints
the tokens each turn used (the sum of its model calls' usage), when the log has
any. ``approvals ID`` lists the calls waiting for a person's decision;
``approve ID EXECUTION_ID`` and ``deny ID EXECUTION_ID`` decide one; ``stop ID``
stops the running turn; each records its actor, ``cli:<your OS user name>`` unless
``--actor NAME`` says who (``show`` prints it, and the note or reason, first).
A value over 4 KiB shows its size and first 4 KiB, and ``value ID SEQ [POINTER]``
prints it whole (:mod:`fxworld.commands.values`).
``fork ID [--at CURSOR] [--id NEW]`` makes a new session holding ID's
conversation up to CURSOR (a turn boundary; by default the end of its last
finished turn) and prints its id. ``prune --idle-for DURATION
[--dry-run]`` deletes whole sessions whose last entry is older than DURATION
(``30d``, ``12h``, ``90s``), keeping any with a running turn, a held lease, a
pending wake or a waiting approval.

Every action takes ``--world URL`` (default: ``$FXWORLD_URL``, else the embedded
SQLite world in the nearest ``.fxworld/`` here or in a parent directory). ``list``,
``show`` and ``approvals``
only read: they open a SQLite world read-only, and a file that does not exist is
an error (exit 2), never a new, empty world. A session that does not exist is
exit 1, with one line.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from typing import TYPE_CHECKING, Any

from fxworld.cli import add_world_option, open_world_for, plain, world_url
from fxworld.commands.values import register_value
from fxworld.engine.summary import ATTENTION, STATES, State, Summary, nested_state, summarize

if TYPE_CHECKING:
    from fxworld.protocol import SessionLister, World

__all__ = ["register", "format_entry", "HEADER", "turn_tokens", "cli_actor"]

_TURN_ENDS = ("turn.finished", "turn.failed", "turn.stopped")
_TOKEN_KINDS = frozenset({"turn.started", "message", *_TURN_ENDS})
HEADER = f"{'seq':>6}  {'time (UTC)':<23}  {'kind':<20}  {'epoch':>5}  data"


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "sessions",
        help="list sessions, show a log, decide approvals, stop a turn",
        description=plain(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    listing = actions.add_parser(
        "list", help="the sessions with their state and last activity, newest first"
    )
    add_world_option(listing)
    listing.add_argument("--limit", type=int, default=None, help="print at most N sessions")
    listing.add_argument(
        "--state",
        choices=STATES,
        default=None,
        metavar="STATE",
        help=f"only the sessions in STATE: {', '.join(repr(x) for x in STATES)}",
    )
    listing.add_argument(
        "--attention",
        default=None,
        metavar="WHY",
        help=f"only the sessions that need a person: any, or one of {', '.join(ATTENTION)}",
    )
    listing.add_argument("--agent", default=None, metavar="NAME", help="only NAME's sessions")
    listing.add_argument(
        "--context",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="only the sessions whose context holds KEY=VALUE, like tenant=acme (repeatable)",
    )
    listing.add_argument(
        "--active", default=None, metavar="DURATION", help="only those active within, like 24h"
    )
    listing.add_argument(
        "--search", default=None, metavar="TEXT", help="TEXT anywhere in the id or first prompt"
    )
    listing.set_defaults(func=_list)

    show = actions.add_parser("show", help="print a session's log")
    show.add_argument("session_id", metavar="ID", help="the session id")
    add_world_option(show)
    show.add_argument("--after", type=int, default=0, metavar="N", help="start after seq N")
    show.add_argument(
        "--follow", action="store_true", help="keep printing new entries as they land (Ctrl-C)"
    )
    show.add_argument(
        "--full", action="store_true", help="print each entry's data in full (no truncation)"
    )
    show.set_defaults(func=_show)

    approvals = actions.add_parser(
        "approvals", help="calls waiting for a person's decision (secrets in inputs masked)"
    )
    approvals.add_argument("session_id", metavar="ID", help="the session id")
    add_world_option(approvals)
    approvals.set_defaults(func=_approvals)
    for name, flag, what in (("approve", "--note", "a note"), ("deny", "--reason", "the reason")):
        decide = actions.add_parser(name, help=f"{name} a call waiting for a decision")
        decide.add_argument("session_id", metavar="ID", help="the session id")
        decide.add_argument("execution_id", metavar="EXECUTION_ID", help="the call's execution id")
        decide.add_argument(flag, dest="text", default=None, metavar="TEXT", help=what)
        _add_actor_option(decide)
        add_world_option(decide)
        decide.set_defaults(func=_decide, approve=name == "approve")
    stop = actions.add_parser("stop", help="stop the session's running turn")
    stop.add_argument("session_id", metavar="ID", help="the session id")
    stop.add_argument("--reason", default=None, metavar="TEXT", help="why (saved in the log)")
    _add_actor_option(stop)
    add_world_option(stop)
    stop.set_defaults(func=_stop)
    fork = actions.add_parser("fork", help="a new session with this one's conversation")
    fork.add_argument("session_id", metavar="ID", help="the session to fork")
    fork.add_argument(
        "--at",
        default=None,
        metavar="CURSOR",
        help="a turn boundary (default: the last turn's end)",
    )
    fork.add_argument("--id", dest="new_id", default=None, metavar="NEW", help="the fork's id")
    add_world_option(fork)
    fork.set_defaults(func=_fork)
    register_value(actions)
    prune = actions.add_parser("prune", help="delete whole sessions idle longer than DURATION")
    prune.add_argument("--idle-for", required=True, metavar="DURATION", help="like 30d, 12h or 90s")
    prune.add_argument("--dry-run", action="store_true", help="delete nothing; say what would go")
    add_world_option(prune)
    prune.set_defaults(func=_prune)


def _add_actor_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--actor",
        default=None,
        metavar="NAME",
        help="who decides, saved in the log (default: cli:<your OS user name>)",
    )


def cli_actor(given: str | None) -> str:
    """The actor a decision or stop from the command line records: ``given``
    (``--actor``), else ``cli:`` and the OS user name (``cli`` when there is none)."""
    if given is not None:
        return given
    import getpass

    try:
        return f"cli:{getpass.getuser()}"
    except Exception:  # no user name in the environment or the password database
        return "cli"


_SAID_FIRST = ("actor", "note", "reason")  # who decided, and what they said


def format_entry(entry: Any, *, width: int | None = 120) -> str:
    """One log line: seq, time, kind, epoch, compact data (cut at ``width`` chars).
    An entry that records its actor (a decision, a stop, a retried prompt) shows
    the actor and its note or reason first, so a cut line still says who decided.
    A large value shows its size and first 4 KiB, and a line under the entry names
    the command that prints it whole (:mod:`fxworld.commands.values`)."""
    from fxworld.commands.values import shorten

    shown, notes = shorten(entry.session_id, entry.seq, entry.data)
    if "actor" in shown:
        first = {k: shown[k] for k in _SAID_FIRST if k in shown}
        shown = {**first, **{k: v for k, v in shown.items() if k not in first}}
    data = json.dumps(shown, ensure_ascii=False, separators=(",", ":"), sort_keys=False)
    if width is not None and len(data) > width:
        data = data[: width - 1] + "…"
    at = entry.at.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    epoch = "-" if entry.epoch is None else str(entry.epoch)
    line = f"{entry.seq:>6}  {at:<23}  {entry.kind:<20}  {epoch:>5}  {data}"
    return "\n".join([line, *notes])


def turn_tokens(entries: Any) -> list[str]:
    """One line per turn of the log: its model calls and the tokens they used
    (from each ``message`` entry's ``usage``). Empty when no turn has usage."""
    turns: dict[str, dict[str, Any]] = {}
    current: str | None = None
    for e in entries:
        d = e.data
        if e.kind == "turn.started":
            current = str(d.get("turn"))
            turns.setdefault(current, {"prompt": d.get("prompt"), "calls": 0, "in": 0, "out": 0})
        elif e.kind == "message" and current in turns:
            t = turns[current]
            t["calls"] += 1
            usage = d.get("usage")
            if isinstance(usage, dict):
                t["in"] += int(usage.get("input_tokens") or 0)
                t["out"] += int(usage.get("output_tokens") or 0)
                t["usage"] = True
        elif e.kind in _TURN_ENDS and str(d.get("turn")) in turns:
            turns[str(d.get("turn"))]["end"] = e.kind.partition(".")[2]
            current = None
    if not any(t.get("usage") for t in turns.values()):
        return []
    lines = []
    for n, t in enumerate(turns.values(), 1):
        calls = f"{t['calls']} model call{'s' if t['calls'] != 1 else ''}"
        lines.append(
            f"turn {n} (prompt at seq {t['prompt']}): {calls}, {t['in']} input + "
            f"{t['out']} output tokens, {t.get('end', 'running')}"
        )
    return lines


async def _whole(world: Any, sid: str, after: int = 0) -> list[Any]:
    """Session ``sid``'s log after seq ``after``, read in pages."""
    entries: list[Any] = []
    while batch := await world.read(sid, after, limit=1000):
        entries.extend(batch)
        after = batch[-1].seq
    return entries


async def _found(world: Any, args: argparse.Namespace) -> bool:
    """Whether session ``args.session_id`` exists (has a log); if not, says so in
    one line (the caller exits 1, as HTTP answers 404)."""
    from fxworld import validate as check
    from fxworld.urls import mask

    sid = check.session_id(args.session_id)
    if await world.read(sid, 0, limit=1):
        return True
    print(
        f"fxworld sessions {args.action}: no session {sid!r} in {mask(world_url(args))}",
        file=sys.stderr,
    )
    return False


def _lister(world: Any, command: str, url: str) -> SessionLister | None:
    """``world`` if it lists its sessions; if not, ``None`` and one line on stderr
    saying so."""
    from fxworld.protocol import SessionLister
    from fxworld.urls import mask

    if isinstance(world, SessionLister):
        return world
    print(
        f"fxworld sessions {command}: the world at {mask(url)} cannot list its sessions",
        file=sys.stderr,
    )
    return None


async def _nested(world: World, summary: Summary) -> State:
    """``summary``'s state, its child sessions read to see whether one waits for
    approval (a child's approval is its parent's business)."""
    children: dict[str, State] = {}
    for child in summary.children.values():
        children[child] = await _nested(world, summarize(child, await _whole(world, child)))
    return nested_state(summary, children.get)


async def _list(args: argparse.Namespace) -> int:
    """One line per session, newest activity first: its id, its state, what it needs
    a person for, its agent and the time of its last entry (each log is read whole:
    this is a tool for a person)."""
    from datetime import UTC

    from fxworld.engine.session_filter import SessionFilter
    from fxworld.errors import InvalidArgument
    from fxworld.urls import mask

    if args.limit is not None and args.limit < 1:
        raise InvalidArgument("--limit must be at least 1")
    chosen = SessionFilter.make(
        attention=args.attention,
        agent=args.agent,
        context=args.context,
        state=args.state,
        active=args.active,
        search=args.search,
    )
    url = world_url(args)
    world = open_world_for(args, "read")
    try:
        lister = _lister(world, "list", url)
        if lister is None:
            return 2
        due = await _unleased_wakes(world)
        now = datetime.now(UTC)
        found: dict[str, tuple[Any, tuple[str, ...]]] = {}
        after = ""
        while ids := await lister.list_sessions(after=after, limit=500):
            for sid in ids:
                entries = await _whole(world, sid)
                if not entries:
                    continue
                s = summarize(sid, entries)
                needs = s.attention
                if sid in due and (now - due[sid]).total_seconds() > _STUCK_AFTER:
                    needs = (*needs, "stuck")
                found[sid] = (s, needs)
            after = ids[-1]
        for s, needs in list(found.values()):  # a parent shows what its children wait for
            parent, seen = s.parent, {s.session_id}
            live = tuple(n for n in needs if n in ("waiting", "stuck"))
            while live and parent in found and parent not in seen:
                seen.add(parent)
                up, up_needs = found[parent]
                found[parent] = (up, (*up_needs, *(n for n in live if n not in up_needs)))
                parent = up.parent

        def state_of(sid: str) -> State | None:  # a child's approval is its parent's too
            got = found.get(sid)
            return None if got is None else nested_state(got[0], state_of)

        rows = [
            (s.last_at or now, sid, str(state_of(sid)), ",".join(needs), s.agent or "-")
            for sid, (s, needs) in found.items()
            if chosen.matches(s, now) and chosen.wants(needs)
        ]
        rows.sort(reverse=True)
        total = len(rows)
        rows = rows[: args.limit]
        width = max((len(row[1]) for row in rows), default=0)
        needs_width = max((len(row[3]) for row in rows), default=1)
        for at, sid, state, why, agent in rows:
            print(
                f"{sid:<{width}}  {state:<20}  {why or '-':<{needs_width}}  {agent}  "
                f"{at.strftime('%Y-%m-%d %H:%M:%S')} UTC"
            )
        what = "" if args.state is None else f" {args.state}"
        shown = f"{len(rows)} of {total}" if len(rows) < total else f"{total}"
        plural = "s" if total != 1 else ""
        narrowed = " matching" if chosen.narrows and args.state is None else ""
        print(f"{shown}{narrowed}{what} session{plural} in {mask(url)}", file=sys.stderr)
        return 0
    finally:
        await world.close()


_STUCK_AFTER = 15.0  # seconds: the workers' default lease (fxworld worker --lease)


async def _unleased_wakes(world: Any) -> dict[str, datetime]:
    """Session id -> due time of its pending wake that no lease holds ({} on a world
    that cannot list its wakes)."""
    from datetime import UTC

    from fxworld.protocol import WakeLister

    if not isinstance(world, WakeLister):
        return {}
    due: dict[str, datetime] = {}
    now, after = datetime.now(UTC), ""
    while wakes := await world.list_wakes(after=after, limit=500):
        due.update(
            (w.session_id, w.due_at)
            for w in wakes
            if w.leased_until is None or w.leased_until <= now
        )
        after = wakes[-1].session_id
    return due


async def _show(args: argparse.Namespace) -> int:
    """The log, then the session's state on stderr; a session with no log is one
    line and exit 1 (``--follow`` says once that it waits for it to appear)."""
    from fxworld import validate as check
    from fxworld.urls import mask

    sid = check.session_id(args.session_id)
    check.read_args(args.after, 1)
    width = None if args.full else 120
    url = world_url(args)
    world = open_world_for(args, "read")
    try:
        if args.follow:
            if not await world.read(sid, 0, limit=1):
                print(
                    f"fxworld sessions show: no session {sid!r} in {mask(url)} yet; "
                    "waiting for it to appear (Ctrl-C to stop)",
                    file=sys.stderr,
                    flush=True,
                )
            print(HEADER, flush=True)
            async for entry in world.follow(sid, args.after):
                print(format_entry(entry, width=width), flush=True)
            return 0  # pragma: no cover - follow ends only when interrupted
        entries = await _whole(world, sid)
        shown = [e for e in entries if e.seq > args.after]
        if not shown:
            what = f"session {sid!r} has no entries after seq {args.after}"
            what = what if entries else f"no session {sid!r}"
            print(f"fxworld sessions show: {what} in {mask(url)}", file=sys.stderr)
            return 1
        print(HEADER)
        for entry in shown:
            print(format_entry(entry, width=width))
        if tokens := turn_tokens(e for e in shown if e.kind in _TOKEN_KINDS):
            print("\ntokens per turn:")
            for line in tokens:
                print("  " + line)
        print(f"session {sid!r}: {await _nested(world, summarize(sid, entries))}", file=sys.stderr)
        return 0
    finally:
        await world.close()


# -- approvals and stop -----------------------------------------------------------------


async def _approvals(args: argparse.Namespace) -> int:
    """One line per waiting call; its input passes through the one scrubber (a
    key, a card number are masked), since the terminal may be shared or logged."""
    from fxworld.engine.approvals import pending_approvals
    from fxworld.scrub import scrub

    world = open_world_for(args, "read")
    try:
        if not await _found(world, args):
            return 1
        waiting = await pending_approvals(world, args.session_id)
        for a in waiting:
            expires = "never" if a.expires_at is None else a.expires_at.isoformat()
            line = scrub(json.dumps(a.input, ensure_ascii=False, separators=(",", ":")))
            print(f"{a.execution_id}  {a.name}  {line}  expires {expires}")
        print(f"{len(waiting)} call{'s' if len(waiting) != 1 else ''} waiting", file=sys.stderr)
        return 0
    finally:
        await world.close()


async def _decide(args: argparse.Namespace) -> int:
    from fxworld.engine.approvals import check_actor, decide
    from fxworld.errors import ApprovalExpired

    actor = check_actor(cli_actor(args.actor))  # a bad --actor: one line, exit 2
    world = open_world_for(args, "write")
    try:
        if not await _found(world, args):
            return 1
        await decide(
            world, args.session_id, args.execution_id, args.approve, args.text, actor=actor
        )
        print(f"{'approved' if args.approve else 'denied'} {args.execution_id} as {actor}")
        return 0
    except ApprovalExpired:
        print(
            f"fxworld sessions {args.action}: call {args.execution_id} expired "
            "(its approval_timeout passed): the timeout denied it",
            file=sys.stderr,
        )
        return 1
    finally:
        await world.close()


async def _stop(args: argparse.Namespace) -> int:
    from fxworld.engine.approvals import check_actor, request_stop

    actor = check_actor(cli_actor(args.actor))
    world = open_world_for(args, "write")
    try:
        if not await _found(world, args):
            return 1
        if await request_stop(world, args.session_id, args.reason, actor=actor):
            print(f"stop requested for session {args.session_id} as {actor}")
        else:
            print(f"session {args.session_id} runs no turn: nothing to stop")
        return 0
    finally:
        await world.close()


async def _fork(args: argparse.Namespace) -> int:
    from fxworld.engine.fork import fork_session
    from fxworld.errors import Conflict

    world = open_world_for(args, "write")
    try:
        if not await _found(world, args):
            return 1
        new = await fork_session(world, args.session_id, at=args.at, target=args.new_id)
        print(new)
        return 0
    except Conflict:
        print(f"fxworld sessions fork: session {args.new_id!r} exists already", file=sys.stderr)
        return 1
    finally:
        await world.close()


async def _prune(args: argparse.Namespace) -> int:
    """One line per session deleted (or, ``--dry-run``, that would be) or kept
    although idle, with why; a summary on stderr."""
    from fxworld.engine.retention import parse_duration, prune
    from fxworld.urls import mask

    idle_for = parse_duration(args.idle_for)  # a bad duration: one line, exit 2
    url = world_url(args)
    world = open_world_for(args, "read" if args.dry_run else "write")
    verb = "would delete" if args.dry_run else "deleted"

    def told(sid: str, reason: str | None) -> None:
        print(f"{verb} {sid}" if reason is None else f"kept {sid}: {reason}", flush=True)

    try:
        if _lister(world, "prune", url) is None:
            return 2
        report = await prune(world, idle_for=idle_for, dry_run=args.dry_run, progress=told)
        print(
            f"{len(report.deleted)} {verb}, {len(report.kept)} kept although idle, "
            f"{report.scanned} looked at in {mask(url)}",
            file=sys.stderr,
        )
        return 0
    finally:
        await world.close()
