"""Decide or stop from a process of its own: ``python decide.py URL SID ACTION [XID]``.

ACTION is ``approve``, ``deny`` or ``stop``. With ``GO_AT=<unix time>`` it waits
until then first (so two processes race). Prints ``ok`` or the error's class name.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

import fxworld
from fxworld.errors import WorldError
from fxworld.testing import ScriptedModel


async def main(url: str, sid: str, action: str, xid: str = "") -> None:
    world = fxworld.open_world(url)
    session = fxworld.Agent(ScriptedModel(["unused"]), world=world).session(sid)
    go_at = float(os.environ.get("GO_AT", "0"))
    await asyncio.sleep(max(0.0, go_at - time.time()))
    try:
        if action == "approve":
            await session.approve(xid, note=f"approved by {os.getpid()}")
        elif action == "deny":
            await session.deny(xid, reason=f"denied by {os.getpid()}")
        else:
            await session.stop(reason="from another process")
        print("ok")
    except WorldError as e:
        print(type(e).__name__)
    finally:
        await world.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
