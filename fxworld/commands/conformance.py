"""`fxworld conformance --world URL|module:factory`: prove a World keeps W1-W19.

Runs the conformance kit (the ``conformance`` extra: Hypothesis and pytest) and
prints one row per guarantee; exits non-zero on any failure. Without the extra it
says, in one line, what to install. See docs/conformance.md.
"""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "conformance",
        help="run the conformance kit against a world (W1-W19)",
        description="Run the conformance kit against a world and print one row per "
        "guarantee W1-W19; exits 1 on any failure.",
    )
    try:
        from fxworld_conformance.cli import add_arguments
    except ModuleNotFoundError as e:  # without the extra: running it says what to install
        parser.set_defaults(func=_missing, missing=e)
        return
    add_arguments(parser)
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    import hypothesis  # noqa: F401  (the extra, before any output: fxworld.cli names it)

    from fxworld_conformance.cli import run

    return run(args)


def _missing(args: argparse.Namespace) -> int:
    raise args.missing  # fxworld.cli turns it into the line naming the pip install
