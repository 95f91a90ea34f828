"""Figures for the inspector: its sessions page over many sessions, and a session
page over a long log, against the raw reads they cost.

Seeds a fresh SQLite world (or ``--world URL``, a fresh namespace is yours to
give) with ``--sessions`` sessions of one finished turn each (4 entries) and one
session of ``--entries`` entries, then, in this process (httpx on the ASGI app)::

    python benchmarks/bench_inspector.py [--sessions 100000] [--entries 10000] [--world URL]
    python benchmarks/bench_inspector.py --postgres     # a throwaway local PostgreSQL

The sessions are a support desk's: each has a context (``tenant`` one of 50,
``user``), an agent (``support``, every 5th ``billing``), and every 10th turn
failed, every 7th ended with a tool error, so the sessions page's filters
(attention, agent, context, state, time, search) have something to find.

Prints: the activity index's first pass (reads every log whole) and a pass over
an unchanged world (one small read per session), beside the raw cost of the same
calls (``list_sessions`` pages plus one ``read`` per session, made one after the
other in a plain loop); the sessions page (first and a late page, and each
filter) once the index is built; the long session's page, cold (its summary folded
from the whole log) and warm.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.support, --postgres

from fxworld import NewEntry, open_world
from fxworld.engine import log
from fxworld.protocol import SessionLister, World
from fxworld.web import create_inspector


def _turn(n: int, session: int | None = None) -> list[NewEntry]:
    """A turn of 4 entries; for the first turn of session ``session``, its context and
    agent, and an end that needs a person (every 10th failed, every 7th a tool error)."""
    usage = {"input_tokens": 100, "output_tokens": 20}
    first: dict[str, object] = {}
    end = log.entry(log.TURN_FINISHED, prompt=n * 4 + 1, turn=f"t{n}", text="an answer")
    middle = log.entry(
        log.MESSAGE, call=f"m{n}", model="m", text="an answer", tool_calls=[], usage=usage
    )
    if session is not None:
        tenant, agent = f"t{session % 50}", "billing" if session % 5 == 0 else "support"
        first = {"context": {"tenant": tenant, "user": f"u{session % 997}"}, "agent": agent}
        if session % 10 == 3:
            end = log.entry(log.TURN_FAILED, prompt=1, turn="t0", error="RuntimeError: down")
        elif session % 7 == 2:
            middle = log.entry(
                log.TOOL_FINISHED,
                execution_id="e",
                call_id="e",
                name="refund",
                output="ValueError: declined",
                is_error=True,
            )
    return [
        log.entry(log.PROMPT, text=f"question {n} of order {session}", key=f"k{n}", **first),
        log.entry(log.TURN_STARTED, prompt=n * 4 + 1, turn=f"t{n}"),
        middle,
        end,
    ]


async def _seed(world: World, sessions: int, entries: int) -> None:
    for start in range(0, sessions, 1000):
        await asyncio.gather(
            *(
                world.append(f"s{i:07d}", _turn(0, i))
                for i in range(start, min(sessions, start + 1000))
            )
        )
    batch: list[NewEntry] = []
    for n in range(entries // 4):
        batch += _turn(n)
        if len(batch) >= 1000:
            await world.append("long", batch)
            batch = []
    if batch:
        await world.append("long", batch)


async def _raw_pass(world: World) -> float:
    """list_sessions pages and one read per session, one after the other."""
    assert isinstance(world, SessionLister)
    t0 = time.perf_counter()
    after = ""
    while ids := await world.list_sessions(after=after, limit=500):
        for sid in ids:
            await world.read(sid, 0, limit=1)
        after = ids[-1]
    return time.perf_counter() - t0


async def _get(client: httpx.AsyncClient, path: str) -> float:
    t0 = time.perf_counter()
    answer = await client.get(path)
    assert answer.status_code == 200, answer.text[:200]
    return time.perf_counter() - t0


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--world", default=None)
    parser.add_argument(
        "--postgres", action="store_true", help="a throwaway local PostgreSQL (tests/support)"
    )
    args = parser.parse_args()
    if args.postgres:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop our server when killed
        from tests.support.postgres_server import start_postgres

        server = start_postgres(fsync=False)
        try:
            args.world = server.url
            await _main(args)
        finally:
            server.stop()
    else:
        await _main(args)


async def _main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = args.world or f"sqlite:///{Path(tmp) / 'world.db'}"
        world = open_world(url)
        await world.setup()
        t0 = time.perf_counter()
        await _seed(world, args.sessions, args.entries)
        print(f"world {world!r}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        seeded = time.perf_counter() - t0
        print(f"seeded {args.sessions} sessions + 1 of {args.entries} entries in {seeded:.1f} s")
        raw = await _raw_pass(world)
        app = create_inspector(world, allow_anyone=True, refresh=3600)
        index = app.state.index
        t0 = time.perf_counter()
        await index.first_pass()  # starts the passes; the next one is an hour away
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        await index.refresh_once()
        again = time.perf_counter() - t0
        print(f"raw: list + one read per session      {raw:8.2f} s")
        print(f"index, first pass (every log whole)   {first:8.2f} s  ({first / raw:.1f}x raw)")
        print(f"index, pass over an unchanged world   {again:8.2f} s  ({again / raw:.1f}x raw)")
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            last_page = max(1, (args.sessions + 1) // 50)
            for name, path in (
                ("sessions page 1", "/"),
                ("sessions page 1 again", "/"),
                (f"sessions page {last_page}", f"/?page={last_page}"),
                ("sessions filtered by state", "/?state=idle&page=2"),
                ("search by prefix", "/?q=s00012"),
                ("needs a person: failed", "/?attention=failed"),
                ("needs a person: any, page 20", "/?attention=any&page=20"),
                ("context tenant=t7", "/?context=tenant%3Dt7"),
                ("agent billing, idle, active 1h", "/?agent=billing&state=idle&active=1h"),
                ("search within first prompts", "/?q=order+4242"),
                ("tenant + tool error + search", "/?context=tenant%3Dt2&attention=tool-error&q=2"),
                (f"{args.entries}-entry session, cold", "/sessions/long"),
                (f"{args.entries}-entry session, warm", "/sessions/long"),
                ("its oldest page", "/sessions/long?before=201"),
            ):
                if "cold" in name:
                    index.summaries.pop("long", None)
                print(f"{name:<38}{await _get(client, path) * 1000:8.1f} ms")
            # the page's view of the index is built again a second after the last time
            # (a wake's due time, an approval's timeout move on with no entry): the worst
            # case of a filtered page is one that rebuilds it
            for name, path in (
                ("after 1 s: sessions page 1", "/"),
                ("after 1 s: tenant + failed", "/?context=tenant%3Dt7&attention=failed"),
                ("after 1 s: search within prompts", "/?q=order+4242"),
            ):
                await asyncio.sleep(1.05)
                print(f"{name:<38}{await _get(client, path) * 1000:8.1f} ms")
        await app.state.close()
        await world.close()


if __name__ == "__main__":
    asyncio.run(main())
