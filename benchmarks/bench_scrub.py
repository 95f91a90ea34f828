"""The scrubber's time per MiB (``fxworld.scrub``), on ordinary text and on the
worst shapes found for each of its patterns.

    python benchmarks/bench_scrub.py [--kib 64,256] [--old path/to/old_scrub.py]

For each shape and size, prints the seconds one ``scrub()`` took (the best of
``--rounds``) and the time per MiB; a linear scrubber keeps the time per MiB
the same from size to size. ``--old`` also measures another copy of the module
(e.g. ``git show <rev>:fxworld/scrub.py > /tmp/old_scrub.py``), beside the current
one; on a quadratic one, sizes past 64 KiB may take minutes (``--old-kib`` sets
its sizes, 16,64 by default).
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from collections.abc import Callable

from fxworld.scrub import scrub

SHAPES: dict[str, str] = {
    "prose": "The order A-1001 shipped on 2026-12-01; see https://example.com/x. ",
    "a.a.a (URL scheme)": "a.",
    "a:a:a (URL parts)": "a:",
    "x://a:b/ (URL slashes)": "x://a:b/",
    "u:p@ (URL matches)": "x://u:p@",
    "token= (named field)": "token= ",
    "bearer (bearer token)": "bearer ",
    "sk-sk- (key shape)": "sk-",
    "digits (card)": "4242 ",
}


def load(path: str) -> Callable[[str], str]:
    spec = importlib.util.spec_from_file_location("old_scrub", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found: Callable[[str], str] = module.scrub
    return found


def best(fn: Callable[[str], str], text: str, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn(text)
        times.append(time.perf_counter() - start)
    return min(times)


def report(label: str, fn: Callable[[str], str], sizes: list[int], rounds: int) -> None:
    print(f"{label}:")
    print(f"  {'shape':<26} {'size':>8} {'seconds':>10} {'s per MiB':>10}")
    for name, unit in SHAPES.items():
        for kib in sizes:
            text = (unit * (kib * 1024 // len(unit) + 1))[: kib * 1024]
            took = best(fn, text, rounds)
            print(f"  {name:<26} {kib:>5} KiB {took:>10.4f} {took / (kib / 1024):>10.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kib", default="64,256", help="sizes in KiB, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--old", help="another copy of fxworld/scrub.py to measure too")
    parser.add_argument("--old-kib", default="16,64", help="its sizes in KiB")
    args = parser.parse_args()
    report("fxworld.scrub", scrub, [int(k) for k in args.kib.split(",")], args.rounds)
    if args.old:
        report(args.old, load(args.old), [int(k) for k in args.old_kib.split(",")], 1)


if __name__ == "__main__":
    main()
