"""Each backend page's "Run it locally" section, run as written from the virtualenv the
README's first command makes: a fresh one, made by that command (without its
``fxworld demo``, which tests/engine/test_demo.py runs) in a copy of this checkout, so
the blocks have only what they install themselves (never this test run's packages nor
its ``weed``). The section starts a throwaway server with exactly the commands it
shows (only its port and directory chosen here), the URL it exports works
(``fxworld setup`` in the block, then the Quickstart runs on it), and its stop command
stops the server: checked by the server's pid, which is stopped here if it was not.

One fresh virtualenv serves the three pages (pip's cache makes it cheap); what one
page installs cannot hide what another page lacks, as each needs a different extra."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
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


def first_command() -> str:
    """The README's first command, without its ``fxworld demo``."""
    text = (REPO / "README.md").read_text()
    block = re.search(r"^## Set up on a fresh machine\n\n```bash\n(.*?)\n", text, re.M)
    assert block, "README.md no longer opens with its set-up commands"
    command = block.group(1).split("#")[0].strip()
    assert command.endswith(" && fxworld demo"), command
    return command.removesuffix(" && fxworld demo")


def _clean_env(path: list[str]) -> dict[str, str]:
    """This run's environment without what would lend the blocks its packages or world;
    ``path`` goes before the rest of the PATH."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("FXWORLD_", "AWS_")) and k not in ("PYTHONPATH", "VIRTUAL_ENV")
    }
    ours = str(Path(sys.executable).parent)  # this run's venv: fxworld, weed, the extras
    others = [p for p in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep) if p != ours]
    env["PATH"] = os.pathsep.join(path + others)
    # the versions CI tests (and has in pip's cache), not the day's newest releases
    env["PIP_CONSTRAINT"] = str(REPO / "requirements" / "dev.lock")
    return env


@pytest.fixture(scope="module")
def checkout() -> Iterator[Path]:
    """A copy of this checkout (its files as they are now) with ``.venv`` made in it by
    the README's first command."""
    root = Path(tempfile.mkdtemp(prefix="fxworld-first-venv-"))
    root.chmod(0o755)  # as a checkout is: the server of a block run as root enters it
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            check=True,
        ).stdout.decode()
        for name in filter(None, listed.split("\0")):
            if (REPO / name).is_file():
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(REPO / name, root / name)
        # python3: this run's Python (the version CI tests), as the PATH would give it
        env = _clean_env([str(Path(sys.executable).parent)])
        made = subprocess.run(
            ["bash", "-c", first_command()],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert made.returncode == 0, made.stdout + made.stderr
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


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


def _gone(pid: int, limit: float) -> bool:
    deadline = time.monotonic() + limit
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not _alive(pid)


def _stop(pid: int) -> None:
    """What the stop block did not: SIGTERM, then SIGKILL if the server ignores it."""
    os.kill(pid, signal.SIGTERM)
    if not _gone(pid, 15):
        os.kill(pid, signal.SIGKILL)


def _pid(workdir: str, name: str) -> int | None:
    try:
        return int(Path(workdir, name).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


@pytest.mark.parametrize("doc", sorted(PID_FILES))
def test_run_it_locally_as_written_in_the_first_commands_venv(doc: str, checkout: Path) -> None:
    start, stop = run_it_locally(doc)
    workdir = tempfile.mkdtemp(prefix="fxworld-doc-server-")  # /tmp: the server's user can enter
    pid_file = PID_FILES[doc]
    script = "\n".join(
        [
            ". .venv/bin/activate",  # as the README's first command left the shell
            "set -eu",
            _chosen(start, workdir),
            f'echo "pid=$(head -1 "$DIR/{pid_file}")"',
            "python examples/quickstart.py",  # on $FXWORLD_URL
            stop,
        ]
    )
    pid = None
    try:
        done = subprocess.run(
            ["bash", "-c", script],
            cwd=checkout,
            env=_clean_env([]),
            capture_output=True,
            text=True,
            timeout=300,
        )
        found = re.search(r"^pid=(\d+)$", done.stdout, re.M)
        pid = int(found.group(1)) if found else _pid(workdir, pid_file)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "is ready" in done.stderr + done.stdout  # fxworld setup on the exported URL
        assert "\nanswer: Order A-1001" in done.stdout, done.stdout  # the Quickstart ran on it
        assert pid is not None
        assert _gone(pid, 15), f"the stop block left the server (pid {pid}) running"
        assert not Path(workdir).exists(), "the stop block left the server's directory"
    finally:
        if pid is not None and _alive(pid):
            _stop(pid)
        shutil.rmtree(workdir, ignore_errors=True)
