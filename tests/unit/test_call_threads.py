"""``CallThreads`` (fxworld/engine/threads.py): a cut leaves a running thread
running, and says so; a thread not started yet never runs; a late outcome is
handed on once, whether the thread ends after the cut or just as it comes."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

from fxworld.engine.threads import CallThreads, Late, settle_left_running


async def test_a_function_cut_before_its_thread_starts_never_runs() -> None:
    loop = asyncio.get_running_loop()
    pool = ThreadPoolExecutor(max_workers=1)  # one thread: the second call waits in line
    loop.set_default_executor(pool)
    gate, ran = threading.Event(), []
    threads = CallThreads()
    first = asyncio.create_task(threads.run("tool:a", gate.wait, 30))
    second = asyncio.create_task(threads.run("step:b", lambda: ran.append("b")))
    await asyncio.sleep(0)  # both submitted: b waits for the pool's only thread
    second.cancel()
    await asyncio.gather(second, return_exceptions=True)  # the cut is through: then
    gate.set()
    assert await first is True
    await loop.run_in_executor(None, lambda: None)  # b's turn in the pool has passed
    assert second.cancelled() and ran == []
    assert threads.left_running == []  # nothing of the call runs on
    pool.shutdown()


async def test_a_cut_leaves_a_running_thread_running_and_hands_on_its_outcome_once() -> None:
    started, release = threading.Event(), threading.Event()
    saved: list[Late] = []

    async def on_late(late: Late) -> None:
        saved.append(late)

    def refund() -> str:
        started.set()
        release.wait(30)
        raise ConnectionError("the bank refused")

    threads = CallThreads(on_late)
    call = asyncio.create_task(threads.run("step:refund", refund))
    await asyncio.to_thread(started.wait, 30)
    call.cancel()
    await asyncio.gather(call, return_exceptions=True)
    assert threads.left_running == ["step:refund"] and saved == []
    release.set()
    assert await settle_left_running() == 1  # waits until it ended and was handed on
    [late] = saved
    assert late.part == "step:refund" and late.step == "refund" and late.value is None
    assert isinstance(late.error, ConnectionError)
    assert await settle_left_running() == 0
