"""Fresh namespaces on a test server, shared by every backend's fixtures."""

from __future__ import annotations

import asyncio
import concurrent.futures
import uuid

from fxworld import open_world

__all__ = ["fresh_namespace", "set_up"]


def fresh_namespace(prefix: str = "t") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def set_up(url: str) -> str:
    """Set up the world at ``url`` (a fresh namespace) and return the URL, for tests
    whose worker processes open the world by URL."""

    async def setup() -> None:
        world = open_world(url)
        try:
            await world.setup()
        finally:
            await world.close()

    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # works inside a running loop too
        pool.submit(asyncio.run, setup()).result()
    return url
