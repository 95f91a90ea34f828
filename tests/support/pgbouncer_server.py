"""A real PgBouncer in front of a test PostgreSQL, for tests and benchmarks.

``start_pgbouncer(server, mode="transaction")`` runs ``pgbouncer`` (from apt:
``/usr/sbin/pgbouncer``, or ``$FXWORLD_PGBOUNCER``) on 127.0.0.1 and a free port, its
configuration, pid file and log in a temporary directory, in the given
``pool_mode``. Clients log in with the server's own user and password
(scram-sha-256, from an ``auth_file``); PgBouncer logs in to the server with the
same. As root it runs as the server's unprivileged user (PgBouncer refuses root).
:meth:`PgBouncer.stop` ends it by its pid. Any failure to start raises: CI must
never skip.

Run as a script for a PostgreSQL and a PgBouncer until Ctrl-C:
``python -m tests.support.pgbouncer_server [transaction|session]``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.support.ports import free_port
from tests.support.postgres_server import PostgresServer, start_postgres, unprivileged_user
from tests.support.server import serve_until_interrupted

__all__ = ["PgBouncer", "start_pgbouncer", "find_pgbouncer"]

POOL_SIZE = 20
"""Server connections PgBouncer opens to PostgreSQL (``default_pool_size``)."""


def find_pgbouncer() -> str:
    """``$FXWORLD_PGBOUNCER``, ``pgbouncer`` on the PATH, or Debian's ``/usr/sbin``."""
    for candidate in (
        os.environ.get("FXWORLD_PGBOUNCER"),
        shutil.which("pgbouncer"),
        "/usr/sbin/pgbouncer",
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise RuntimeError("pgbouncer not found: install it (apt-get install pgbouncer)")


class PgBouncer:
    """A running PgBouncer; ``url`` reaches ``server``'s database through it."""

    def __init__(self, server: PostgresServer, mode: str) -> None:
        self.server = server
        self.mode = mode
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="fxworld-pgbouncer-"))
        self.pidfile = self.root / "pgbouncer.pid"
        self.logfile = self.root / "pgbouncer.log"
        self._write_config()
        as_user: list[str] = []
        if os.geteuid() == 0:  # PgBouncer refuses to run as root
            owner = unprivileged_user()
            shutil.chown(self.root, owner.pw_uid, owner.pw_gid)
            for path in self.root.iterdir():
                shutil.chown(path, owner.pw_uid, owner.pw_gid)
            as_user = ["-u", owner.pw_name]
        subprocess.run(
            [find_pgbouncer(), "-d", *as_user, str(self.root / "pgbouncer.ini")],
            check=True,
            capture_output=True,
            timeout=30,
        )
        self._wait_ready()

    @property
    def url(self) -> str:
        s = self.server
        return f"postgresql://{s.user}:{s.password}@127.0.0.1:{self.port}/{s.database}"

    def _write_config(self) -> None:
        s = self.server
        (self.root / "users.txt").write_text(f'"{s.user}" "{s.password}"\n')
        (self.root / "pgbouncer.ini").write_text(
            "[databases]\n"
            f"{s.database} = host={s.host} port={s.port} dbname={s.database}\n"
            "[pgbouncer]\n"
            "listen_addr = 127.0.0.1\n"
            f"listen_port = {self.port}\n"
            "unix_socket_dir =\n"
            "auth_type = scram-sha-256\n"
            f"auth_file = {self.root / 'users.txt'}\n"
            f"pool_mode = {self.mode}\n"
            f"default_pool_size = {POOL_SIZE}\n"
            "max_client_conn = 2000\n"
            "ignore_startup_parameters = extra_float_digits\n"
            f"pidfile = {self.pidfile}\n"
            f"logfile = {self.logfile}\n"
        )

    def _wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=1),
            ):
                return
            time.sleep(0.05)
        raise RuntimeError(f"pgbouncer did not listen in {timeout:.0f} s:\n{self.log()}")

    def log(self) -> str:
        try:
            return self.logfile.read_text()[-3000:]
        except OSError:
            return ""

    def pid(self) -> int | None:
        try:
            return int(self.pidfile.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def stop(self) -> None:
        pid = self.pid()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)  # immediate shutdown
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and _alive(pid):
                time.sleep(0.05)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.root, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def start_pgbouncer(server: PostgresServer, mode: str = "transaction") -> PgBouncer:
    """A PgBouncer in ``mode`` (``transaction`` or ``session``) in front of ``server``."""
    if mode not in ("transaction", "session"):
        raise ValueError(f"pool mode {mode!r}: transaction or session")
    return PgBouncer(server, mode)


if __name__ == "__main__":  # pragma: no cover
    pg = start_postgres()
    bouncer = start_pgbouncer(pg, sys.argv[1] if len(sys.argv) > 1 else "transaction")

    def stop() -> None:
        bouncer.stop()
        pg.stop()

    serve_until_interrupted(stop, bouncer.url, "->", pg.url)
