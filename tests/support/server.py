"""The lifecycle every test server shares: start, wait until ready, kill, stop.

A :class:`Server` is started by its constructor and answers :meth:`Server.ready`
once it serves. :meth:`Server.wait_ready` polls that until a deadline, and stops at
once when the server's process has exited; either failure raises with the tail of
the server's log (CI must never skip a backend, so nothing here skips).
:meth:`Server.crash_restart` is a kill and a start, with async forms for tests that
run in an event loop.

Two ways to own a server: :class:`Process` (a child process of this one, its
output in a log file) and :class:`Container` (a testcontainers container, used when
a Docker daemon answers). :func:`serve_until_interrupted` is the ``__main__`` of
each harness: a server until Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

__all__ = ["Container", "Process", "Server", "serve_until_interrupted"]


class Server(ABC):
    """A running server that a test may kill, start again and stop."""

    name = "server"

    @abstractmethod
    def ready(self) -> bool:
        """Whether the server serves now (may raise while it does not)."""

    @abstractmethod
    def kill(self) -> None:
        """Stop the server at once, with no clean shutdown."""

    @abstractmethod
    def start(self) -> None:
        """Start the server (again after :meth:`kill`); return once it is ready."""

    @abstractmethod
    def stop(self) -> None:
        """Stop the server for good and remove its data."""

    def exited(self) -> bool:
        """The server's process is gone (a container's is never known to be)."""
        return False

    def log_tail(self) -> str:
        """The end of the server's log, for an error message."""
        return ""

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Return once :meth:`ready` answers; raise with the log's tail when the
        server exits first or ``timeout`` runs out."""
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline and not self.exited():
            try:
                if self.ready():
                    return
            except Exception as e:
                last = e
            time.sleep(0.1)
        why = "exited before it was ready" if self.exited() else f"not ready in {timeout:.0f} s"
        tail = self.log_tail()
        raise RuntimeError(
            f"{self.name} {why}: {last}" + (f"\n--- server log ---\n{tail}" if tail else "")
        )

    def crash_restart(self) -> None:
        """Kill the server without a clean shutdown and start it again."""
        self.kill()
        self.start()

    async def akill(self) -> None:
        await asyncio.to_thread(self.kill)

    async def astart(self) -> None:
        await asyncio.to_thread(self.start)

    async def acrash_restart(self) -> None:
        await asyncio.to_thread(self.crash_restart)


class Process:
    """A server's child process, its output appended to ``log``."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self._proc: subprocess.Popen[bytes] | None = None

    def spawn(self, command: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> None:
        with open(self.log, "ab") as out:
            self._proc = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, cwd=cwd, env=env,
                start_new_session=True,
            )  # fmt: skip

    def exited(self) -> bool:
        return self._proc is not None and self._proc.poll() is not None

    def tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL, by the pid this process started."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(30)

    def terminate(self) -> None:
        """SIGTERM, then SIGKILL after 10 s."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(10)


class Container(Server):
    """Kill, start and stop for a server in a testcontainers container (``_container``):
    mixed in before the server's own class."""

    _container: Any

    def kill(self) -> None:
        self._container.get_wrapped_container().kill(signal="SIGKILL")

    def start(self) -> None:
        self._container.get_wrapped_container().start()
        self.wait_ready()

    def stop(self) -> None:
        self._container.stop()


def serve_until_interrupted(stop: Any, *lines: str) -> None:
    """Print ``lines``, then wait for Ctrl-C or SIGTERM and call ``stop``."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(*lines, flush=True)
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        stop()
