"""The inspector: see a world's sessions, follow one live, decide, stop.

``GET  /``                          the sessions, what needs a person first (``?page=``;
                                    the filters of :mod:`~fxworld.web._listing`;
                                    ``?rows=1``: the table's rows)
``GET  /wakes``                     the pending wakes (``?after=``), where the world can say
``GET  /sessions/{id}``             its newest turns (``?before=N&turns=T``: the turns
                                    before seq N, T of them started before it)
``GET  /sessions/{id}/follow``      Server-Sent Events: each new entry as a row (``?after=N``)
``GET  /sessions/{id}/waiting``     the boxes of the calls waiting for a decision, its
                                    children's too (the page's script refreshes them)
``GET  /sessions/{id}/values/{seq}?at=/output``  one value of an entry, whole, as a
                                    download (:mod:`~fxworld.web._values`)
``POST /sessions/{id}/approvals/{execution_id}``  ``{"approve": true|false, "note"|"reason"?}``
``POST /sessions/{id}/stop``        ``{"reason"?}``
``POST /sessions/{id}/retry``       ``{}``: the failed latest turn's prompt, sent again
                                    (:mod:`~fxworld.web._retry`)
``POST /sessions/{id}/clear``       ``{"upto"?, "note"?}``: a person saw what its ended
                                    turns need (:mod:`fxworld.engine.attention`)

Every route checks, before anything else, the request's ``Origin`` (same origin
only, or one of ``allowed_origins``) and that a ``POST`` says its body is JSON
(:func:`~fxworld.web._requests.check_request`, as the agent routes), then asks
``authorize(request, session_id, action)`` with action ``"list"`` (the sessions
and wakes pages; ``session_id`` is ``""``), ``"view"``, ``"approve"``, ``"stop"``,
``"retry"`` or ``"clear"``. Decisions and stops are the engine's own calls
(:mod:`fxworld.engine.approvals`, as ``session.approve/deny/stop``); each records
its actor, who ``authorize`` allowed (:data:`InspectAuthorize`), as a Retry's
prompt does.

What a page shows of an entry passes ``visible`` first: the timeline, a turn's
header, the calls waiting for a decision and the first prompt on the sessions page.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypedDict, Unpack

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from fxworld import validate
from fxworld.engine import StreamEvent, approvals, encode_cursor, log
from fxworld.engine.attention import clear_attention
from fxworld.engine.context import saved_context
from fxworld.engine.summary import Summary
from fxworld.errors import ConfigurationError, InvalidArgument, InvalidSessionId
from fxworld.follow import bounded_follow
from fxworld.logends import window
from fxworld.protocol import WakeLister, World

from . import _list_page, _pages, _sse
from ._listing import chosen_filter, pick
from ._options import STREAM_LIFETIME
from ._refusals import HTTPError, exception_handlers, guard
from ._requests import ask_authorize, check_request, small_body
from ._retry import retry_failed_turn
from ._session_view import child_approvals, newest_turns, turns_between, waiting_html
from ._summary import ActivityIndex, Families
from ._timeline import RETRY, Row, Shown, Timeline, as_int, esc
from ._values import resolve, value_response

__all__ = [
    "InspectAction",
    "InspectAuthorize",
    "InspectorOptions",
    "InspectorOptionArgs",
    "create_inspector",
    "ASSETS",
]

InspectAction = Literal["list", "view", "approve", "stop", "retry", "clear"]
InspectAuthorize = Callable[[Request, str, InspectAction], "bool | str | Awaitable[bool | str]"]
"""``authorize(request, session_id, action)``: ``True``, or a str naming the caller
(1..200 printable characters), to allow; ``False``: 403; anything else: 500, never a
grant (as the session routes' :data:`~fxworld.web.Authorize`). The str is the
``actor`` that Approve, Deny, Stop and Retry record; ``True`` records
``"authorized"``, and an inspector without ``authorize`` (``fxworld inspect`` on a
loopback address) ``"local"``."""
ASSETS = Path(__file__).with_name("assets")
"""The inspector's stylesheet and script, shipped in the package."""

_PRIME = 50  # entries read before a stream's first one: the times its rows show
_FIRST_PASS_WAIT = 1.5  # seconds a sessions page waits for the index's first pass
_TURN_LOOKBACK = 1000  # entries read back from a page's first one for the turn it is in


@dataclass(frozen=True)
class InspectorOptions:
    """The options of :func:`create_inspector`, checked when made."""

    authorize: InspectAuthorize | None = None
    """``authorize(request, session_id, action)`` -> ``True``, or a str naming the
    caller, to allow (may be async): see :data:`InspectAuthorize`."""
    allow_anyone: bool = False
    """Without ``authorize`` the inspector refuses to be built unless this is ``True``."""
    visible: Callable[[Request, StreamEvent], Any] | None = None
    """``visible(request, event)``: the entry as this client may see it, or ``None``
    to hide it (may be async), as for the agent routes' streams."""
    allowed_origins: Collection[str] | None = None
    """Origins allowed besides the inspector's own (a request without ``Origin`` passes)."""
    page_entries: int = 200
    """The most entries a timeline page shows."""
    page_turns: int = 10
    """Turns per timeline page (the newest first; a link loads the ones before)."""
    page_sessions: int = 50
    """Sessions per sessions page."""
    refresh: float = 1.0
    """Seconds between passes of the activity index (see ``_summary``)."""
    stuck_after: float = 15.0
    """Seconds a session's wake may stay due, taken by no worker, before the sessions
    page calls it stuck (the workers' lease: ``fxworld worker --lease``, 15 s)."""
    heartbeat: float = _sse.HEARTBEAT
    """Seconds of silence after which a session page's stream sends a comment."""
    stream_lifetime: float = STREAM_LIFETIME
    """Seconds after which a stream ends and the page reconnects (``authorize`` is
    asked again)."""

    def __post_init__(self) -> None:
        if self.authorize is None and not self.allow_anyone:
            raise ConfigurationError(
                "the inspector needs authorize=callable(request, session_id, action), "
                "or allow_anyone=True to show and control every session to anyone who asks"
            )
        for name in ("authorize", "visible"):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise ConfigurationError(f"{name} must be callable")
        if isinstance(self.allowed_origins, str):
            raise ConfigurationError('allowed_origins is a collection: ["https://app.example"]')
        if not self.stuck_after > 0:
            raise ConfigurationError("stuck_after must be positive seconds")
        if min(self.page_entries, self.page_turns, self.page_sessions) < 1 or not self.refresh > 0:
            raise ConfigurationError("page sizes and refresh must be positive")
        if not (self.heartbeat > 0 and self.stream_lifetime > 0):
            raise ConfigurationError("heartbeat and stream_lifetime must be positive seconds")


class InspectorOptionArgs(TypedDict, total=False):
    """:class:`InspectorOptions`' fields besides ``authorize`` and ``allow_anyone``,
    as keyword arguments of :func:`create_inspector`."""

    visible: Callable[[Request, StreamEvent], Any] | None
    allowed_origins: Collection[str] | None
    page_entries: int
    page_turns: int
    page_sessions: int
    refresh: float
    stuck_after: float
    heartbeat: float
    stream_lifetime: float


def _root(request: Request) -> str:
    return str(request.scope.get("root_path", "")).rstrip("/")


class _Inspector:
    def __init__(self, world: World, options: InspectorOptions) -> None:
        self.world = world
        self.options = options
        self.index = ActivityIndex(world, refresh=options.refresh, stuck_after=options.stuck_after)
        self.namespace = str(getattr(world, "namespace", "-"))
        self.closing = asyncio.Event()

    async def _check(self, request: Request, session_id: str, action: InspectAction) -> str:
        """Refuse the request unless its origin and ``authorize`` allow it; the actor
        it allows (:func:`~fxworld.web._requests.ask_authorize`)."""
        own = f"{request.url.scheme}://{request.headers.get('host', '')}"
        check_request(request, {own, *(self.options.allowed_origins or ())})
        return await ask_authorize(
            self.options.authorize, request, session_id, action, self._context(session_id)
        )

    def _context(self, session_id: str) -> Callable[[], Awaitable[Any]]:
        """The saved context of session ``session_id``, for an ``authorize`` that takes
        it (``None`` for the pages of no one session)."""

        async def saved() -> Any:
            return await saved_context(self.world, session_id) if session_id else None

        return saved

    async def _session(self, request: Request, action: InspectAction) -> str:
        sid, _ = await self._acting(request, action)
        return sid

    async def _acting(self, request: Request, action: InspectAction) -> tuple[str, str]:
        """The path's session id, checked, and the actor ``authorize`` allowed."""
        sid: str = validate.session_id(request.path_params["session_id"])
        return sid, await self._check(request, sid, action)

    async def _shown(self, request: Request, sid: str, entries: list[Any]) -> list[Shown]:
        visible = self.options.visible
        out = []
        for e in entries:
            kind, data = e.kind, e.data
            if visible is not None:
                seen = visible(request, StreamEvent(encode_cursor(sid, e.seq), kind, data))
                if inspect.isawaitable(seen):
                    seen = await seen
                if seen is None:
                    continue
                kind, data = seen.kind, seen.data
            out.append(Shown(e.seq, kind, dict(data), e.at, e.epoch))
        return out

    async def _entry(self, request: Request, sid: str, seq: int) -> Shown | None:
        """Entry ``seq`` of session ``sid`` as this viewer may see it (``None``: hidden)."""
        found = await self.world.read(sid, seq - 1, limit=1) if seq > 0 else []
        shown = await self._shown(request, sid, found[:1])
        return shown[0] if shown and shown[0].seq == seq else None

    def _html(self, request: Request, title: str, body: str, status: int = 200) -> HTMLResponse:
        page = _pages.layout(_root(request), title, body, namespace=self.namespace)
        return HTMLResponse(page, status_code=status, headers={"Cache-Control": "no-store"})

    # -- the sessions page ----------------------------------------------------------

    async def sessions(self, request: Request) -> Response:
        await self._check(request, "", "list")
        params = request.query_params
        chosen = chosen_filter(params, params.getlist("context"))
        page = _page_number(params.get("page"))
        rows_only = params.get("rows") == "1"  # the page's script refreshes them
        size = self.options.page_sessions
        note = ""
        counts: dict[str, int] | None = None
        view = Families([])
        agents: list[str] = []
        if self.index.can_list:
            try:
                async with asyncio.timeout(_FIRST_PASS_WAIT):
                    await self.index.first_pass()
            except TimeoutError:
                note = "Still reading the sessions: this list is partial."
            view = self.index.families()
            agents = view.agents
            previews = self.options.visible is None  # with visible: search ids only
            picked, counts = pick(view, chosen, datetime.now(UTC), previews=previews)
            rows = picked[(page - 1) * size : page * size + 1]
            more, rows = len(rows) > size, rows[:size]
        elif chosen.search:
            rows, more = await self._search(chosen.search, size), False
            note = "This world cannot list its sessions: a search finds one by its whole id."
        else:
            rows, more = [], False
            note = "This world cannot list its sessions: search for one by its whole id."
        root = _root(request)
        known = len(self.index.summaries)
        shown = [one for s in rows for one in view.family(s)]
        previews_of = {s.session_id: await self._preview(request, s) for _, s in shown}
        table = _list_page.Table(root, shown, view.attention, previews_of, known, view.state_of)
        if rows_only:
            return HTMLResponse(_list_page.sessions_table(table))
        body = _list_page.sessions_body(
            table,
            chosen,
            counts=counts,
            agents=agents,
            states=view.states if self.index.can_list else None,
            page=page,
            more=more,
            note=note,
        )
        return self._html(request, "Sessions", body)

    async def _preview(self, request: Request, s: Summary) -> str | None:
        """The start of session ``s``'s first prompt as this viewer may see it: with
        ``visible``, the prompt is read and passed through it (one read per row)."""
        if not s.first_prompt:
            return None
        if self.options.visible is None:
            return s.preview
        shown = await self._entry(request, s.session_id, s.first_prompt)
        if shown is None or shown.kind != log.PROMPT:
            return None
        return str(shown.data.get("text", ""))[: _pages.PREVIEW_SHOWN + 1]

    async def _search(self, whole: str, size: int) -> list[Summary]:
        """The session of id ``whole``, on a world that cannot list its sessions."""
        try:
            validate.session_id(whole)
        except InvalidSessionId:
            return []
        await self.index.session(whole)
        return self.index.found([whole])

    # -- wakes -----------------------------------------------------------------------

    async def wakes(self, request: Request) -> Response:
        await self._check(request, "", "list")
        after = request.query_params.get("after", "")
        size = self.options.page_sessions
        wakes = None
        if isinstance(self.world, WakeLister):
            wakes = await self.world.list_wakes(after=after, limit=size + 1)
        more = wakes is not None and len(wakes) > size
        shown = None if wakes is None else wakes[:size]
        body = _pages.wakes_body(_root(request), shown, datetime.now(UTC), after=after, more=more)
        return self._html(request, "Wakes", body)

    # -- one session -----------------------------------------------------------------

    async def session(self, request: Request) -> Response:
        sid = await self._session(request, "view")
        summary = await self.index.session(sid)
        if summary.seq == 0:
            body = f"<h1>No session {esc(sid)}</h1><p>Its log is empty.</p>"
            return self._html(request, "Not found", body, status=404)
        last = summary.seq
        before = _before(request.query_params.get("before"), last)
        o = self.options
        entries = await newest_turns(
            self.world, sid, before - 1, turns=o.page_turns, cap=o.page_entries
        )
        start = entries[0].seq - 1 if entries else before - 1
        here = sum(1 for e in entries if e.kind == log.TURN_STARTED)
        if before > last:
            prior = summary.turns - here
        else:
            given = _int_arg(request.query_params.get("turns"), "turns")
            if given is None:  # (a page asked for by hand: the turns are counted)
                given = await turns_between(self.world, sid, 0, before - 1)
            prior = given - here
        prior = max(0, prior)  # the turns started before the page's first entry
        boxes, asking = await self._waiting(request, summary)
        timeline = Timeline(sid, waiting=summary.waiting, next_turn=prior + 1, asking=asking)
        opened = await self._resume(request, sid, timeline, start)
        rows = opened + timeline.rows(await self._shown(request, sid, entries))
        wake = "unknown (this world cannot say)"
        if isinstance(self.world, WakeLister):
            wake = _pages.wake_text(await self.world.wake_state(sid), datetime.now(UTC))
        first = entries[0].seq if entries else before
        body = _pages.session_body(
            _root(request),
            summary,
            rows,
            first=first,
            turns_before=prior,
            last=last if before > last else before - 1,
            live=before > last,
            wake=wake,
            waiting=boxes,
            state=await self.index.nested(summary),
        )
        return self._html(request, sid, body)

    async def waiting(self, request: Request) -> Response:
        """The boxes of the calls that wait for a decision (the page's script asks)."""
        sid = await self._session(request, "view")
        summary = await self.index.session(sid)
        html, _ = await self._waiting(request, summary)
        return HTMLResponse(html, headers={"Cache-Control": "no-store"})

    async def _waiting(self, request: Request, summary: Summary) -> tuple[str, set[str]]:
        """The boxes of the calls that wait for a decision, as far as ``visible`` lets
        this viewer see their ``approval.requested``: the session's own, and those of
        the child sessions its running turn waits for that this viewer may view; and
        the session's own children a call waits in (deeper or not)."""
        sid = summary.session_id
        own = []
        for eid in summary.waiting:
            shown = await self._entry(request, sid, summary.requested_seq(eid))
            if shown is not None and shown.data.get("execution_id") == eid:
                own.append(shown)
        children = []
        if summary.state in ("running", "waiting for approval"):  # (one on its child: running)
            for c in await child_approvals(self.world, sid):
                try:
                    await self._check(request, c.session_id, "view")
                except HTTPError:
                    continue
                found = await self._entry(request, c.session_id, c.seq)
                if found is not None and found.kind == log.APPROVAL_REQUESTED:
                    children.append((c, found))
        return waiting_html(sid, own, children), {c.via[0] for c, _ in children}

    async def value(self, request: Request) -> Response:
        """One value of an entry, whole, as a download; as ``visible`` shows the entry."""
        sid = await self._session(request, "view")
        seq = _int_arg(request.path_params["seq"], "seq") or 0
        shown = await self._entry(request, sid, seq)
        if shown is None:
            raise HTTPError(404, "not_found", f"no entry {seq} in session {sid!r}")
        at = request.query_params.get("at", "")
        name = f"{sid}-{seq}{at.replace('/', '-')}"
        return value_response(resolve(shown.data, at), name)

    async def _resume(
        self, request: Request, sid: str, timeline: Timeline, after: int
    ) -> list[Row]:
        """If entry ``after`` is inside a turn (reading back at most
        :data:`_TURN_LOOKBACK` entries), let ``timeline`` continue that turn: the row
        that opens its group, if any."""
        upto, size = after, 16  # pages back of 16, 64, 256... entries
        while upto > 0 and after - upto < _TURN_LOOKBACK:
            start = max(0, upto - size, after - _TURN_LOOKBACK)
            for e in reversed(await window(self.world, sid, start, upto)):
                if e.kind in log.TURN_END_KINDS:
                    return []
                if e.kind == log.TURN_STARTED:
                    shown = await self._shown(request, sid, [e])
                    if not shown:
                        return []
                    prompt = await self._entry(request, sid, as_int(e.data.get("prompt")))
                    return [timeline.resume(shown[0], prompt)]
            upto, size = start, size * 4
        return []

    async def follow(self, request: Request) -> Response:
        sid = await self._session(request, "view")
        after = _after(request.headers.get("last-event-id") or request.query_params.get("after"))
        summary = copy.deepcopy(await self.index.session(sid))
        frames = _sse.heartbeats(
            self._frames(request, sid, after, summary),
            every=self.options.heartbeat,
            stop=self.closing,
            lifetime=self.options.stream_lifetime,
        )
        return _sse.response(frames)

    async def _frames(
        self, request: Request, sid: str, after: int, summary: Summary
    ) -> AsyncIterator[bytes]:
        yield _sse.retry(1000)
        timeline = Timeline(sid)
        if after:  # times since the entries before the first one streamed, the turn open
            start = max(0, after - _PRIME)
            before = await window(self.world, sid, start, after)
            # the turns started up to ``start``: the summary's, less those after it
            later = await turns_between(self.world, sid, after, summary.seq)
            here = sum(1 for e in before if e.kind == log.TURN_STARTED)
            timeline.next_turn = max(0, summary.turns - later - here) + 1
            await self._resume(request, sid, timeline, start)
            timeline.rows(await self._shown(request, sid, before))
        entries = bounded_follow(self.world, sid, after)
        try:
            async for e in entries:
                if e.seq > summary.seq:
                    summary.apply(e)
                shown = await self._shown(request, sid, [e])
                if not shown:
                    continue
                timeline.waiting = summary.waiting
                row = timeline.row(shown[0])
                failed = row.kind == log.TURN_FAILED and summary.state == "failed"
                data = {
                    "seq": row.seq,
                    "kind": row.kind,
                    "call": row.call,
                    "text": row.text,
                    "eid": row.execution_id,
                    "html": row.html,
                    "group": row.group,
                    "opens": row.opens,
                    "head": row.head,
                    "replaces": row.replaces,
                    "updates": row.updates,
                    "actions": RETRY if failed else "",
                    "state": await self.index.nested(summary),
                    "turns": summary.turns,
                    "tokens": summary.tokens,
                    "takeovers": summary.takeovers,
                }
                yield _sse.frame(str(e.seq), "entry", data)
        finally:
            await entries.aclose()  # type: ignore[attr-defined]

    # -- actions ---------------------------------------------------------------------

    async def decide(self, request: Request) -> Response:
        sid, actor = await self._acting(request, "approve")
        execution_id: str = request.path_params["execution_id"]
        body = await small_body(request)
        approve = body.get("approve")
        if not isinstance(approve, bool):
            raise HTTPError(400, "invalid_request", 'the body must be {"approve": true|false, ...}')
        text = body.get("note" if approve else "reason")
        await approvals.decide(self.world, sid, execution_id, approve, text, actor=actor)
        return JSONResponse({"execution_id": execution_id, "approved": approve})

    async def stop(self, request: Request) -> Response:
        sid, actor = await self._acting(request, "stop")
        body = await small_body(request)
        stopped = await approvals.request_stop(self.world, sid, body.get("reason"), actor=actor)
        return JSONResponse({"session_id": sid, "stopped": stopped}, status_code=202)

    async def retry(self, request: Request) -> Response:
        sid, actor = await self._acting(request, "retry")
        await small_body(request)
        failed, prompt = await retry_failed_turn(self.world, sid, actor=actor)
        answer = {"session_id": sid, "retried": failed, "prompt": prompt}
        return JSONResponse(answer, status_code=202)

    async def clear(self, request: Request) -> Response:
        sid, actor = await self._acting(request, "clear")
        body = await small_body(request)
        summary = await self.index.session(sid)
        upto = body.get("upto", summary.seq)
        if not summary.marks and summary.cleared[0] == upto:  # a second click
            return JSONResponse({"session_id": sid, "cleared": summary.cleared[1]})
        if not summary.marks:
            raise HTTPError(409, "nothing_to_clear", "no ended turn of it needs a person")
        try:
            seq = await clear_attention(
                self.world, sid, upto=upto, note=body.get("note"), actor=actor
            )
        except InvalidArgument as e:
            raise HTTPError(400, "invalid_request", str(e)) from None
        await self.index.catch_up(sid)
        self.index.update(sid)
        return JSONResponse({"session_id": sid, "cleared": seq})


def _int_arg(value: str | None, name: str) -> int | None:
    if value is None or value == "":
        return None
    if not (value.isascii() and value.isdigit() and len(value) <= 18):
        raise HTTPError(400, "invalid_request", f"{name} must be a whole number")
    return int(value)


def _page_number(value: str | None) -> int:
    return max(1, _int_arg(value, "page") or 1)


def _before(value: str | None, last: int) -> int:
    before = _int_arg(value, "before")
    return last + 1 if before is None or before > last else max(1, before)


def _after(value: str | None) -> int:
    return _int_arg(value, "after") or 0


def create_inspector(
    world: World,
    *,
    authorize: InspectAuthorize | None = None,
    allow_anyone: bool = False,
    **options: Unpack[InspectorOptionArgs],
) -> Starlette:
    """The inspector as an ASGI app; mount it anywhere::

        app.mount("/inspect", create_inspector(world, authorize=is_operator))

    ``authorize(request, session_id, action)`` is asked before every page and
    action (``action``: ``"list"``, ``"view"``, ``"approve"``, ``"stop"``, ``"retry"``,
    ``"clear"``);
    without it the app refuses to be built unless ``allow_anyone=True``. Other
    options: :class:`InspectorOptions`' fields. ``await app.state.close()`` stops the
    activity index and ends open streams (``fxworld inspect`` calls it on exit);
    ``app.state.end_streams()`` ends the streams only.
    """
    opts = InspectorOptions(authorize=authorize, allow_anyone=allow_anyone, **options)
    r = _Inspector(world, opts)
    routes: list[BaseRoute] = [
        Route("/", guard(r.sessions), methods=["GET"]),
        Route("/wakes", guard(r.wakes), methods=["GET"]),
        Route("/sessions/{session_id}", guard(r.session), methods=["GET"]),
        Route("/sessions/{session_id}/follow", guard(r.follow), methods=["GET"]),
        Route("/sessions/{session_id}/waiting", guard(r.waiting), methods=["GET"]),
        Route("/sessions/{session_id}/values/{seq}", guard(r.value), methods=["GET"]),
        Route("/sessions/{session_id}/approvals/{execution_id}", guard(r.decide), methods=["POST"]),
        Route("/sessions/{session_id}/stop", guard(r.stop), methods=["POST"]),
        Route("/sessions/{session_id}/retry", guard(r.retry), methods=["POST"]),
        Route("/sessions/{session_id}/clear", guard(r.clear), methods=["POST"]),
        Mount("/assets", app=StaticFiles(directory=ASSETS)),
    ]
    app = Starlette(routes=routes, exception_handlers=exception_handlers())

    async def close() -> None:
        r.closing.set()
        await r.index.close()

    app.state.close = close
    app.state.end_streams = r.closing.set
    app.state.index = r.index
    return app
