"""The release: what ``git archive HEAD`` holds (a clean checkout: only committed
files) builds an sdist and a wheel (``python -m build``, the wheel from the sdist),
both pass ``twine check --strict``, and the wheel, installed with the
``conformance`` extra in a fresh virtualenv, runs the README's Quickstart and the
conformance kit (``quick`` profile) on an SQLite world. ``.ci/run`` runs it with the
whole suite; the release workflow builds and checks the same way before publishing.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _run(*cmd: str | Path, cwd: Path, timeout: float = 240) -> str:
    """``cmd`` run in ``cwd`` (never this checkout, whose packages it would import),
    with no ``PYTHONPATH`` nor ``FXWORLD_*`` of the test run."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and "FXWORLD" not in k}
    done = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env
    )
    assert done.returncode == 0, f"{cmd} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_a_wheel_from_a_clean_checkout_runs_the_quickstart_and_the_kit(tmp_path: Path) -> None:
    archive = subprocess.run(["git", "archive", "HEAD"], cwd=REPO, capture_output=True, check=True)
    src = tmp_path / "src"
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(src, filter="data")
    version = tomllib.loads((src / "pyproject.toml").read_text())["project"]["version"]

    dist, work = tmp_path / "dist", tmp_path / "work"
    work.mkdir()
    _run(sys.executable, "-m", "build", "--outdir", dist, src, cwd=work)
    built = sorted(p.name for p in dist.iterdir())
    assert built == [f"fxworld-{version}-py3-none-any.whl", f"fxworld-{version}.tar.gz"]
    _run(sys.executable, "-m", "twine", "check", "--strict", *sorted(dist.iterdir()), cwd=work)

    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv, cwd=work)
    py, fxworld = venv / "bin" / "python", venv / "bin" / "fxworld"
    wheel = dist / f"fxworld-{version}-py3-none-any.whl"
    _run(
        py,
        "-m",
        "pip",
        "install",
        "-q",
        "--disable-pip-version-check",
        f"{wheel}[conformance]",
        cwd=work,
    )
    where = _run(
        py, "-c", "import fxworld_conformance; print(fxworld_conformance.__file__)", cwd=work
    )
    assert where.startswith(str(venv)), where  # the installed wheel, not this checkout

    out = _run(py, src / "examples" / "quickstart.py", cwd=work)
    assert "refunded" in out, out
    world = f"sqlite:///{work}/kit.db"
    kit = _run(fxworld, "conformance", "--world", world, "--profile", "quick", "-q", cwd=work)
    assert "0 failed" in kit and "0 kit errors" in kit, kit
