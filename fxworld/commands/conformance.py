"""`fxworld conformance --world URL|module:factory`: prove a World keeps W1-W17.

Runs the conformance kit (the ``conformance`` extra: Hypothesis and pytest) and
prints one row per guarantee; exits non-zero on any failure. See
docs/conformance.md.
"""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "conformance",
        help="run the conformance kit against a world (W1-W17)",
        description="Run the conformance kit against a world and print one row per "
        "guarantee W1-W17; exits 1 on any failure.",
    )
    try:
        from fxworld_conformance.cli import add_arguments
    except ImportError:  # pragma: no cover - the package always ships the kit
        parser.set_defaults(func=_missing)
        return
    add_arguments(parser)
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        from fxworld_conformance.cli import run
    except ImportError as e:
        print(f"the conformance kit needs its extra: pip install 'fxworld[conformance]' ({e})")
        return 2
    return run(args)


def _missing(args: argparse.Namespace) -> int:  # pragma: no cover
    print("the conformance kit is not installed: pip install 'fxworld[conformance]'")
    return 2
