"""docs/contract.md section 2 (W1-W18), called exactly as a stranger reading it would,
where the conformance kit does not reach: URL options, storage that cannot be opened,
each backend's declared capabilities, several world objects on one URL, namespaces.
The kit's scenarios of every guarantee run on the same worlds in tests/backends.

Only public names: ``fxworld`` (open_world, NewEntry) and ``fxworld.errors``. Each
test runs on memory://, a SQLite file and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from fxworld import NewEntry, open_world
from fxworld.errors import (
    EntryTooLarge,
    Fenced,
    InvalidSessionId,
)


def E(kind: str = "note", **data: object) -> NewEntry:
    return NewEntry(kind, dict(data))


async def test_w15_configured_size_by_url(tmp_path: object) -> None:
    for url in ["memory://?max_entry_bytes=100", f"sqlite:///{tmp_path}/m.db?max_entry_bytes=100"]:
        w = open_world(url)
        await w.setup()
        try:
            with pytest.raises(EntryTooLarge):
                await w.append("s", [NewEntry("k", {"x": "a" * 200})])
            assert await w.read("s") == []
        finally:
            await w.close()


async def test_w15_bad_id_before_any_io(tmp_path: object) -> None:
    # a world whose storage cannot even be opened still says InvalidSessionId first
    w = open_world("sqlite:////proc/no/such/dir/world.db")
    with pytest.raises(InvalidSessionId):
        await w.append("../etc", [E()])
    with pytest.raises(InvalidSessionId):
        await w.read("a b")


async def test_w17_capabilities_declared(world_url: str) -> None:
    w = open_world(world_url)
    caps = w.capabilities
    if world_url.startswith("memory"):
        assert "durable" not in caps and "shared" not in caps
    else:
        assert {"durable", "shared"} <= caps


async def test_w10_follow_sees_another_connections_appends(shared_world_url: str) -> None:
    reader, writer = open_world(shared_world_url), open_world(shared_world_url)
    await reader.setup()
    await writer.setup()
    follower = reader.follow("s")
    try:
        got: list[float] = []

        async def consume() -> None:
            async for _ in follower:
                got.append(time.monotonic())
                if len(got) == 3:
                    return

        task = asyncio.create_task(consume())
        await asyncio.sleep(0.3)
        sent = []
        for i in range(3):
            sent.append(time.monotonic())
            await writer.append("s", [E(i=i)])
            await asyncio.sleep(0.2)
        await asyncio.wait_for(task, 15)
        # bounded delay: generous for a loaded machine, far below any "poll rarely" bug
        assert max(g - s for g, s in zip(got, sent, strict=True)) < 3.0
    finally:
        await follower.aclose()  # type: ignore[attr-defined]
        await reader.close()
        await writer.close()


async def test_w6_racing_retries_with_one_key_land_once(world_url: str) -> None:
    worlds = [open_world(world_url)]
    if not world_url.startswith("memory"):  # separate connections where the world has them
        worlds += [open_world(world_url) for _ in range(3)]
    for x in worlds:
        await x.setup()
    try:
        calls = [
            worlds[i % len(worlds)].append("s", [E(i=i), E(i=i)], key="same") for i in range(8)
        ]
        seqs = await asyncio.gather(*calls)
        assert set(seqs) == {2}
        assert len(await worlds[0].read("s")) == 2
    finally:
        for x in worlds:
            await x.close()


async def test_w1_racing_acquires_one_newest(world_url: str) -> None:
    worlds = [open_world(world_url)]
    if not world_url.startswith("memory"):
        worlds += [open_world(world_url) for _ in range(3)]
    for x in worlds:
        await x.setup()
    try:
        fences = await asyncio.gather(*(worlds[i % len(worlds)].acquire("s") for i in range(8)))
        epochs = [f.epoch for f in fences]
        assert len(set(epochs)) == 8
        assert sorted(f.seq for f in fences) == list(range(1, 9))
        newest = max(fences, key=lambda f: f.epoch)
        for f in fences:
            if f is newest:
                assert await worlds[0].append("s", [E()], fence=f) == 9
            else:
                with pytest.raises(Fenced):
                    await worlds[1 % len(worlds)].append("s", [E()], fence=f)
        log = await worlds[0].read("s")
        fence_epochs = [e.data["epoch"] for e in log if e.kind == "fence"]
        assert fence_epochs == sorted(fence_epochs)  # W8: along the log
    finally:
        for x in worlds:
            await x.close()


@pytest.mark.parametrize("suffix", ["tenant-a", "Env_Prod-2"])
async def test_namespaces_with_hyphens_and_case_isolate(world_url: str, suffix: str) -> None:
    """A namespace such as ``tenant-a`` works on every backend (quoted where it
    becomes an identifier) and shares nothing with its neighbour ``tenant-b``."""
    base = world_url.split("?")[0] if "namespace=" in world_url else world_url
    sep = "&" if "?" in base else "?"
    tag = uuid.uuid4().hex[:6]
    a = open_world(f"{base}{sep}namespace={suffix}{tag}")
    b = open_world(f"{base}{sep}namespace={suffix}{tag}-b")
    await a.setup()
    await b.setup()
    try:
        follower = a.follow("s")
        await a.append("s", [NewEntry("k", {"n": 1})], wake=0)
        first = await asyncio.wait_for(anext(follower), timeout=10)
        assert (first.seq, first.data) == (1, {"n": 1})
        await follower.aclose()
        assert await b.read("s") == []
        assert await b.take_wake(lease=5) is None
        assert (await b.acquire("s")).seq == 1
        assert [e.kind for e in await a.read("s")] == ["k"]
    finally:
        await a.close()
        await b.close()
