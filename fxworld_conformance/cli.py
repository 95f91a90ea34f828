"""``fxworld conformance``: run the kit against a world and print one row per guarantee.

``fxworld conformance --world URL|module:factory [--profile quick|ci|thorough]
[--report out.json] [--seed N] [--restart-cmd CMD] [--select IDS] [--keep]
[--check-timeout SECONDS]`` prints
a table with one row per guarantee W1-W19, and one for the turn engine on the world
(passed; failed with the shrunk counterexample or history excerpt; skipped with the
capability that caused it) and exits 1 on any failure, 2 when the kit itself failed
(a kit error, with its traceback: a verdict on no guarantee), 130 on Ctrl-C. It ends
with what it did with the namespaces it made: removed them, kept them (``--keep``:
where they are), or could not remove them (which, and why).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import warnings
from collections.abc import Awaitable, Callable
from typing import Any, TextIO

from fxworld.urls import mask
from fxworld_conformance.bounds import seconds
from fxworld_conformance.cleanup import LeftBehind
from fxworld_conformance.profiles import PROFILES
from fxworld_conformance.report import ROWS, CheckResult
from fxworld_conformance.runner import TIERS, by_guarantee, capabilities_of, run_kit, selected
from fxworld_conformance.target import Target

__all__ = ["add_arguments", "run", "main", "format_table", "print_cleanup"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--world",
        required=True,
        metavar="URL|module:factory",
        help="the world to test: a URL (the kit adds a fresh ?namespace= per check) "
        "or a zero-argument factory 'pkg.module:name' returning a fresh, empty World",
    )
    parser.add_argument(
        "--profile",
        choices=tuple(PROFILES),
        default="ci",
        help="ci: bounded and derandomized, a few minutes (default); thorough: far more "
        "examples; quick: a smoke run",
    )
    parser.add_argument("--report", metavar="out.json", help="also write every result as JSON")
    parser.add_argument("--seed", type=int, default=0, help="seed for the random choices")
    parser.add_argument(
        "--tiers",
        default=",".join(TIERS),
        help=f"comma-separated subset of {','.join(TIERS)} (default: all)",
    )
    parser.add_argument(
        "--restart-cmd",
        metavar="CMD",
        help="a shell command that crash-restarts the server (kill it without a clean "
        "shutdown, start it) and returns once it answers: enables the restart checks",
    )
    parser.add_argument(
        "--select",
        metavar="IDS",
        help="comma-separated ids of the checks to run, or shell patterns of them: "
        "w05-expect, 'w02-*', capacity, stateful-log, stateful-wakes, processes "
        "(a scenario's id is its WorldSuite test id; default: every check of --tiers)",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the namespaces the kit makes (one or more per check) for debugging, "
        "and print where they are; by default each is removed when its check ends",
    )
    parser.add_argument(
        "--check-timeout",
        type=seconds,
        metavar="SECONDS",
        help="the time bound of every check: one that runs longer fails, saying what it "
        "waited for, and the others still run (default: the profile's bound for the "
        "check's tier: 120 s for a directed scenario, 60 s for an engine one)",
    )
    parser.add_argument("--fail-fast", action="store_true", help="stop at the first failure")
    parser.add_argument("-q", "--quiet", action="store_true", help="no per-check progress lines")


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    target = Target.parse(args.world)
    target.keep = args.keep
    target.check_timeout = args.check_timeout
    if args.restart_cmd:
        target.restart = shell_restart(args.restart_cmd)
    tiers = [t.strip() for t in args.tiers.split(",") if t.strip()]
    unknown = [t for t in tiers if t not in TIERS]
    if unknown:
        print(f"unknown tier(s) {unknown}; choose from {list(TIERS)}", file=sys.stderr)
        return 2
    select = args.select.split(",") if args.select else None
    try:
        if select is not None:
            selected(select, tiers)  # a pattern that matches no check: refused first
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LeftBehind)  # said below, with everything left
        try:
            return _run(args, out, target, tiers, select)
        except KeyboardInterrupt:
            print("\ninterrupted (Ctrl-C)", file=out)
            return 130
        finally:
            print_cleanup(target, out)


def _run(
    args: argparse.Namespace,
    out: TextIO,
    target: Target,
    tiers: list[str],
    select: list[str] | None,
) -> int:
    shown = mask(args.world) if "://" in args.world else args.world
    try:
        caps = sorted(capabilities_of(target))
    except Exception as e:
        print(f"cannot open {shown}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    print(f"fxworld conformance: {shown}  profile={args.profile} seed={args.seed}", file=out)
    print(f"capabilities: {', '.join(caps) or '(none)'}", file=out)
    started = time.monotonic()

    def progress(r: CheckResult) -> None:
        if not args.quiet:
            print(
                f"  {r.status:<7} {r.name}  ({r.seconds:.1f}s, {r.examples} examples, "
                f"{r.operations} ops)",
                file=out,
                flush=True,
            )

    results = run_kit(
        target,
        profile=args.profile,
        seed=args.seed,
        tiers=tiers,
        fail_fast=args.fail_fast,
        progress=progress,
        select=select,
    )
    elapsed = time.monotonic() - started
    print(file=out)
    print(format_table(results), file=out)
    failed = [r for r in results if r.status == "failed"]
    examples = sum(r.examples for r in results)
    ops = sum(r.operations for r in results)
    print(
        f"\n{len(results)} checks: {sum(r.status == 'passed' for r in results)} passed, "
        f"{len(failed)} failed, {sum(r.status == 'skipped' for r in results)} skipped, "
        f"{sum(r.status == 'error' for r in results)} kit errors; "
        f"{examples} examples, {ops} operations, {elapsed:.1f}s",
        file=out,
    )
    for r in failed:
        print(f"\n--- FAILED {r.name} [{', '.join(r.guarantees)}]\n{r.detail}", file=out)
    errors = [r for r in results if r.status == "error"]
    for r in errors:
        print(f"\n--- KIT ERROR {r.name}\n{r.detail}", file=out)
    if args.report:
        report: dict[str, Any] = {
            "world": shown,
            "profile": args.profile,
            "seed": args.seed,
            "capabilities": caps,
            "seconds": round(elapsed, 3),
            "examples": examples,
            "operations": ops,
            "guarantees": {g: status for g, (status, _) in by_guarantee(results).items()},
            "results": [r.as_json() for r in results],
        }
        with open(args.report, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2, default=str)
        print(f"\nreport written to {args.report}", file=out)
    return 2 if errors else 1 if failed else 0


def print_cleanup(target: Target, out: TextIO) -> None:
    """What became of the namespaces the kit made: removed, kept (``--keep``), or
    left (the world cannot drop them, or dropping failed)."""
    if target.kept:
        print(f"\nkept for debugging (--keep): {len(target.kept)}", file=out)
        for where in target.kept:
            print(f"  {where}", file=out)
    if target.left:
        print(f"\nleft behind: {len(target.left)} namespace(s) the kit made", file=out)
        for leftover in target.left:
            print(f"  {leftover}", file=out)
    if target.dropped or not (target.kept or target.left):
        print(f"\nremoved {target.dropped} namespace(s) the kit made", file=out)


def shell_restart(command: str, timeout: float = 300.0) -> Callable[[], Awaitable[None]]:
    """``Target.restart`` that runs ``command`` in a shell and waits for it: a
    command that fails (or outlives ``timeout``) raises, which the kit reports as a
    kit error, not as a broken guarantee."""

    async def restart() -> None:
        proc = await asyncio.create_subprocess_shell(
            command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), timeout)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise RuntimeError(f"--restart-cmd did not return within {timeout:g} s") from None
        if proc.returncode != 0:
            tail = out.decode("utf-8", "replace").strip()[-500:]
            raise RuntimeError(f"--restart-cmd exited with {proc.returncode}: {tail}")

    return restart


def format_table(results: list[CheckResult]) -> str:
    """One row per guarantee: status, and the failing check, or the skip reasons."""
    rows = []
    for g, (status, checks) in by_guarantee(results).items():
        if status == "failed":
            first = checks[0].detail.strip().splitlines()[0] if checks[0].detail else ""
            note = f"{checks[0].name}: {first}"
        elif status == "passed":
            skipped = [c for c in checks if c.status == "skipped"]
            ran = [c for c in checks if c.status == "passed"]
            note = f"{len(ran)} check(s)"
            if skipped:
                note += "; skipped: " + "; ".join(_skip(c) for c in skipped)
        else:
            note = "; ".join(_skip(c) for c in checks) or "no check ran"
        if g == "W17":
            every = [r for r in results if r.status == "skipped"]
            if every:
                note += f"; the kit skipped {len(every)} check(s), each with its reason"
        mark = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP"}[status]
        rows.append(f"{g:<6} {ROWS[g]:<24} {mark:<5} {note}")
    width = max(len(r) for r in rows)
    line = "-" * min(width, 120)
    return "\n".join([f"{'':6} {'guarantee':<24} {'':5} evidence", line, *rows])


def _skip(c: CheckResult) -> str:
    reason = c.detail.split(":")[0].strip() if c.detail else "no reason given"
    return f"{c.name} ({reason[:90]})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="fxworld-conformance", description="Run the fxworld conformance kit."
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
