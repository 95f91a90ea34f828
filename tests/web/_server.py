"""A real ``fxworld serve`` process for tests: start, wait until it answers, kill."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from fxworld import Entry, MemoryWorld

REPO = Path(__file__).resolve().parents[2]


class ServeProcess:
    """``python -m fxworld.cli serve ARGS --port PORT`` (or another ``command``, such
    as ``inspect``), run from the repository root.

    ``start()`` returns once ``GET probe`` answers; ``kill()`` sends SIGKILL (no
    goodbye, no handover); ``stop()`` sends SIGTERM and waits.
    """

    def __init__(
        self,
        args: list[str],
        port: int,
        log: Path,
        env: dict[str, str] | None = None,
        command: str = "serve",
    ):
        self.command = command
        self.args = args
        self.port = port
        self.log = log
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, probe: str = "/", timeout: float = 60.0) -> None:
        cmd = [sys.executable, "-m", "fxworld.cli", self.command, *self.args]
        cmd += ["--port", str(self.port)]
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(cmd, cwd=REPO, env=self.env, stdout=out, stderr=out)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"fxworld serve exited with {self.proc.returncode}:\n{self.output()}"
                )
            try:
                if httpx.get(self.base + probe, timeout=2.0).status_code < 500:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"fxworld serve did not answer within {timeout}s:\n{self.output()}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def output(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-4000:]
        except OSError:
            return ""


class CountingWorld(MemoryWorld):
    """Counts the entries its reads hand out."""

    def __init__(self) -> None:
        super().__init__()
        self.handed_out = 0

    async def read(self, session_id: str, after: int = 0, *, limit: int = 1000) -> list[Entry]:
        batch = await super().read(session_id, after, limit=limit)
        self.handed_out += len(batch)
        return batch
