"""Each backend page's "Run it locally" section starts a throwaway server with exactly
the commands it shows (only its port and directory chosen here), the URL it exports
works (``fxworld setup`` in the block, then the Quickstart runs on it), and its stop
command stops the server: checked by the server's pid, which is killed if it did not."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.support.ports import free_port
from tests.support.s3_server import WEED_PORTS

REPO = Path(__file__).resolve().parents[2]
PID_FILES = {
    "docs/postgres.md": "postmaster.pid",
    "docs/redis.md": "redis.pid",
    "docs/s3.md": "weed.pid",
}
# weed mini's ports but the page's own S3 port, all chosen free here
OTHER_WEED_PORTS = [name for name in WEED_PORTS if name != "s3.port"]


def run_it_locally(doc: str) -> tuple[str, str]:
    """The section's two shell blocks: the one that starts the server, the one that stops it."""
    text = (REPO / doc).read_text()
    section = re.search(r"^## Run it locally\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert section, f"{doc} has no 'Run it locally' section"
    blocks = re.findall(r"```bash\n(.*?)```", section.group(1), re.S)
    assert len(blocks) == 2, f"{doc}: expected a start block and a stop block, got {len(blocks)}"
    return blocks[0], blocks[1]


def _chosen(start: str, workdir: str) -> str:
    """The start block with a free port and a known directory (the rest as written)."""
    start, n = re.subn(r"PORT=\d+ DIR=\$\(mktemp -d\)", f"PORT={free_port()} DIR={workdir}", start)
    assert n == 1, "the block no longer starts with PORT=... DIR=$(mktemp -d)"
    ports = " ".join(f"-{name}={free_port()}" for name in OTHER_WEED_PORTS)
    return start.replace("weed mini ", f"weed mini {ports} -s3.port.iceberg=0 -s3.port.lance=0 ")


def _alive(pid: int) -> bool:
    """The process runs (an exited one that its new parent has not reaped yet does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _pid(workdir: str, name: str) -> int | None:
    try:
        return int(Path(workdir, name).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


@pytest.mark.parametrize("doc", sorted(PID_FILES))
def test_run_it_locally_starts_a_server_the_url_works_and_stop_stops_it(doc: str) -> None:
    start, stop = run_it_locally(doc)
    workdir = tempfile.mkdtemp(prefix="fxworld-doc-server-")  # /tmp: the server's user can enter
    pid_file = PID_FILES[doc]
    script = "\n".join(
        [
            "set -eu",
            _chosen(start, workdir),
            f'echo "pid=$(head -1 "$DIR/{pid_file}")"',
            f'"{sys.executable}" "{REPO / "examples" / "quickstart.py"}"',  # on $FXWORLD_URL
            stop,
        ]
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FXWORLD_", "AWS_"))}
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"
    pid = None
    try:
        done = subprocess.run(
            ["bash", "-c", script],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        found = re.search(r"^pid=(\d+)$", done.stdout, re.M)
        pid = int(found.group(1)) if found else _pid(workdir, pid_file)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "is ready" in done.stderr + done.stdout  # fxworld setup on the exported URL
        assert "\nanswer: Order A-1001" in done.stdout, done.stdout  # the Quickstart ran on it
        assert pid is not None
        deadline = time.monotonic() + 15
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(pid), f"the stop block left the server (pid {pid}) running"
        assert not Path(workdir).exists(), "the stop block left the server's directory"
    finally:
        if pid is not None and _alive(pid):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(workdir, ignore_errors=True)
