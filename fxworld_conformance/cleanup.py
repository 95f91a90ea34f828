"""What the kit leaves in the storage it tested: nothing, unless asked to keep it.

Every check runs on fresh namespaces: with a URL, the kit adds its own
``?namespace=fxk_<16 hex digits>`` for each scenario, each Hypothesis example, each
round of the process tier (its child processes open the same one) and the CLI's
first look at the world's capabilities; with a factory, each world the factory
makes has a namespace of its own. :func:`cleaned` ends every check
(:func:`~fxworld_conformance.runner.run_check`, so ``run_kit``, ``WorldSuite`` and
``fxworld conformance``): it drops each namespace the check made with the world's
``drop_namespace()`` (:class:`fxworld.protocol.NamespaceDropper`: a PostgreSQL
schema, a Redis namespace's keys on every node, an S3 prefix's objects, a SQLite
file's rows), also when the check failed or was interrupted (Ctrl-C cancels the
check's event loop; its child processes are killed before anything is dropped).

``Target(keep=True)`` (``--keep``, ``--fxworld-keep``) keeps them for debugging;
``Target.kept`` says where they are. A world without ``drop_namespace()`` keeps
what the kit made: the kit warns once per world class (:class:`LeftBehind`) and
names each namespace in ``Target.left``, as it does for a drop that failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import signal
import threading
import warnings
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

from fxworld_conformance.bounds import watched
from fxworld_conformance.target import Leftover, Target

__all__ = ["cleaned", "run_sync", "LeftBehind", "Kept"]

T = TypeVar("T")


class LeftBehind(UserWarning):
    """The kit made namespaces that it could not drop: they are still there."""


class Kept(UserWarning):
    """The kit kept the namespaces it made, as asked (``keep``): where they are."""


_WARNED: set[str] = set()
"""World classes already warned about for lacking ``drop_namespace()``."""


@contextlib.contextmanager
def cleaned(target: Target) -> Iterator[None]:
    """Around one check, from synchronous code: when it ends, whatever happened,
    drop what ``target`` made (:meth:`Target.drop_made`) and warn
    (:class:`LeftBehind`) about what stayed.

    A Ctrl-C while it drops waits for the drop to end (then raises
    ``KeyboardInterrupt``); a second one stops it, and what was not dropped is
    then in ``target.left``."""
    before = len(target.left)
    try:
        yield
    finally:
        try:
            with _deferred_interrupt():
                run_sync(target.drop_made())
        finally:
            _warn(target.left[before:])


@contextlib.contextmanager
def _deferred_interrupt() -> Iterator[None]:
    """In the main thread: the first SIGINT is held until the block ends, the
    second raises ``KeyboardInterrupt`` at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    count = 0

    def held(signum: int, frame: object) -> None:
        nonlocal count
        count += 1
        if count > 1:
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, held)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if count:
        raise KeyboardInterrupt


def _warn(left: list[Leftover]) -> None:
    failed = [str(w) for w in left if not w.lacking]
    if failed:
        warnings.warn(
            LeftBehind(f"fxworld conformance could not drop what it made: {'; '.join(failed)}"),
            stacklevel=2,
        )
    for kind in sorted({w.lacking for w in left if w.lacking} - _WARNED):
        _WARNED.add(kind)
        named = ", ".join(w.where for w in left if w.lacking == kind)
        warnings.warn(
            LeftBehind(
                f"fxworld conformance leaves the namespaces it makes in place: {kind} has "
                f"no drop_namespace() (fxworld.protocol.NamespaceDropper), so {named} and "
                "every later one (each named fxk_<16 hex digits>) stay until you remove "
                "them (said once)"
            ),
            stacklevel=2,
        )


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from synchronous code, in a thread of its own
    when the caller's thread already runs an event loop; within the time bound of
    the check that runs it (:func:`fxworld_conformance.bounds.watched`)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(watched(coro))
    box: dict[str, Any] = {}
    context = contextvars.copy_context()  # the check's bound goes along

    def target() -> None:
        try:
            box["value"] = context.run(asyncio.run, watched(coro))
        except BaseException as e:
            box["error"] = e

    thread = threading.Thread(target=target, name="fxworld-conformance")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]
