"""Benchmark Stop: stop requested -> turn.stopped, on SQLite and PostgreSQL; prints.

    python benchmarks/bench_stop.py [--rounds 15] [--url postgresql://...]

Each round starts a turn whose model streams text slowly (a piece every 20 ms),
waits until some of it is saved, and calls ``session.stop()`` from a handle with
its own connection (another world object, as another process would). The worker
runs in this process on a world object of its own. Figures:

- ``commit``: from the ``stop.requested`` entry's commit to the ``turn.stopped``
  entry's commit (the world's own timestamps);
- ``caller``: from ``stop()`` returning to ``await turn`` raising ``TurnStopped``
  in the caller (it includes the caller's own follow delay);
- ``append``: one raw unfenced append with a key on the same world, for scale
  (a stop is one such append, then the worker's follow delay, its text flush and
  its ``turn.stopped`` append);
- ``waiting``: the same ``commit`` figure for a turn that waits for an approval,
  which no worker holds: the stop's wake is taken at the worker's next look for
  due wakes (every 0.25 s by default).

The issue's target: a running turn ends within 1 s of its stop.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))

from fxworld import Agent, NewEntry, Session, TurnStopped, open_world, tool  # noqa: E402
from fxworld.testing import ScriptedModel  # noqa: E402

LONG = " ".join(f"word{i}" for i in range(2000))


def _model() -> ScriptedModel:
    return ScriptedModel([LONG], pieces=1000, delay=0.02)


@tool(needs_approval=True)
def refund_order(order_id: str) -> str:
    """Refund an order (waits for a person)."""
    return f"refunded {order_id}"


async def waiting_phase(url: str, rounds: int) -> list[float]:
    """Stop a turn that waits for an approval: no worker holds it, so the stop's
    wake must be taken first (the worker polls every 0.25 s, the default)."""
    worker_world, client_world = open_world(url), open_world(url)
    script = ScriptedModel([{"tool": "refund_order", "input": {"order_id": "A"}}, "ok"])
    worker = Agent(script, tools=[refund_order], world=worker_world)
    client = Agent(script, tools=[refund_order], world=client_world)
    running = asyncio.create_task(worker.work(lease=10.0))
    delays: list[float] = []
    try:
        for _ in range(rounds):
            session = client.session()
            turn = session.prompt("Refund A.")
            await turn.accepted
            await _saved(session, "approval.requested")
            await asyncio.sleep(0.3)  # the worker has finished its wake: nothing holds it
            await session.stop()
            with contextlib.suppress(TurnStopped):
                await asyncio.wait_for(turn, 30)
            by_kind = {e.kind: e for e in await client_world.read(session.id, 0)}
            delays.append(
                (by_kind["turn.stopped"].at - by_kind["stop.requested"].at).total_seconds()
            )
    finally:
        worker.stop()
        await running
        await worker_world.close()
        await client_world.close()
    return delays


async def _saved(session: Session, kind: str, n: int = 1) -> None:
    """Wait until ``n`` entries of ``kind`` are saved in the session."""
    async with contextlib.aclosing(session.stream()) as events:
        async for event in events:
            n -= event.kind == kind
            if n <= 0:
                return


async def one_backend(name: str, url: str, rounds: int) -> None:
    worker_world, client_world = open_world(url), open_world(url)
    worker = Agent(_model(), world=worker_world, text_chunk_interval=0.05)
    client = Agent(_model(), world=client_world)
    await worker.ready()
    await client.ready()
    running = asyncio.create_task(worker.work(lease=10.0, poll_interval=0.05))
    commit: list[float] = []
    caller: list[float] = []
    appends: list[float] = []
    try:
        for _ in range(rounds):
            session = client.session()
            turn = session.prompt("Tell me everything.")
            await turn.accepted
            await _saved(session, "text", 3)
            await session.stop()
            asked = time.perf_counter()
            try:
                await asyncio.wait_for(turn, 30)
                raise AssertionError("the turn was not stopped")
            except TurnStopped:
                caller.append(time.perf_counter() - asked)
            by_kind = {e.kind: e for e in (await client_world.read(session.id, 0))}
            commit.append(
                (by_kind["turn.stopped"].at - by_kind["stop.requested"].at).total_seconds()
            )
            t0 = time.perf_counter()
            await client_world.append(
                f"raw-{uuid.uuid4().hex}", [NewEntry("x", {"v": 1})], key="k", wake=0.0
            )
            appends.append(time.perf_counter() - t0)
    finally:
        worker.stop()
        await running
        await worker_world.close()
        await client_world.close()

    waiting = await waiting_phase(url, rounds)

    def ms(xs: list[float], q: str) -> str:
        v = statistics.median(xs) if q == "p50" else max(xs)
        return f"{v * 1000:7.1f}"

    print(
        f"{name:<11} rounds {rounds:>3}  commit p50 {ms(commit, 'p50')} ms  max "
        f"{ms(commit, 'max')} ms | caller p50 {ms(caller, 'p50')} ms  max "
        f"{ms(caller, 'max')} ms | append p50 {ms(appends, 'p50')} ms  "
        f"(stop p50 / append p50 = {statistics.median(commit) / statistics.median(appends):.1f})"
    )
    print(
        f"{'':<11} waiting for an approval (no worker holds it): commit p50 "
        f"{ms(waiting, 'p50')} ms  max {ms(waiting, 'max')} ms"
    )


async def main(rounds: int, pg_url: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        await one_backend("sqlite", f"sqlite:///{tmp}/stop.db", rounds)
    await one_backend("postgresql", pg_url, rounds)
    print("\ntarget: turn.stopped within 1000 ms of stop.requested")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--url", help="a PostgreSQL server (default: a throwaway local one)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop our server when killed
    server = None
    url = args.url
    if url is None:
        from tests.support.postgres_server import start_postgres

        server = start_postgres()
        url = server.url
    try:
        sep = "&" if "?" in url else "?"
        asyncio.run(main(args.rounds, f"{url}{sep}namespace=bench_stop"))
    finally:
        if server is not None:
            server.stop()
