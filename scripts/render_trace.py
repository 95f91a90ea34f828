"""Render one trace's spans, as OpenTelemetry's SDK writes them (``ReadableSpan.to_json()``,
one per line in ``spans-*.jsonl`` files), as a waterfall: an SVG image and a text tree.

    python scripts/render_trace.py DIR [--svg OUT.svg]

``DIR`` holds the files ``tests/engine/test_tracing.py`` writes (run it with
``--basetemp``): one per process. A span whose parent never arrived (its process
was killed before it ended) is drawn under a dashed "never ended" row.
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from html import escape
from pathlib import Path
from typing import Any

ROW, LEFT, WIDTH = 26, 470, 480
COLORS = {"invoke_agent": "#4a7bd0", "chat": "#3a9a5b", "execute_tool": "#d08a2a"}


def load(directory: Path) -> list[dict[str, Any]]:
    spans = []
    for path in sorted(directory.glob("spans-*.jsonl")):
        for line in path.read_text().splitlines():
            span = json.loads(line)
            span["process"] = path.stem.removeprefix("spans-")
            spans.append(span)
    return spans


def seconds(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def rows(spans: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any] | None, str]]:
    """(depth, span or None for a span that never ended, its id), in tree order."""
    ids = {s["context"]["span_id"] for s in spans}
    out: list[tuple[int, dict[str, Any] | None, str]] = []

    def walk(parent: str, depth: int) -> None:
        kids = [s for s in spans if s.get("parent_id") == parent]
        for s in sorted(kids, key=lambda s: s["start_time"]):
            out.append((depth, s, s["context"]["span_id"]))
            walk(s["context"]["span_id"], depth + 1)

    for s in sorted(spans, key=lambda s: s["start_time"]):
        parent = s.get("parent_id")
        if parent is None:
            out.append((0, s, s["context"]["span_id"]))
            walk(s["context"]["span_id"], 1)
    for missing in dict.fromkeys(s["parent_id"] for s in spans if s.get("parent_id") not in ids):
        if missing is not None:
            out.append((1, None, missing))
            walk(missing, 2)
    return out


def label(s: dict[str, Any]) -> str:
    """The span's name, process, epoch, and what marks a takeover."""
    a = s["attributes"]
    text = f"{s['name']} [{s['process']}]"
    if "fxworld.epoch" in a:
        text += f" epoch {a['fxworld.epoch']}"
    if a.get("fxworld.tool.attempt", 1) > 1:
        text += f" attempt {a['fxworld.tool.attempt']}"
    for e in s.get("events", []):
        text += f" *{e['name']}"
    return text + (" +link" if s.get("links") else "")


def svg(spans: list[dict[str, Any]]) -> str:
    t0 = min(seconds(s["start_time"]) for s in spans)
    t1 = max(seconds(s["end_time"]) for s in spans)
    scale = WIDTH / max(t1 - t0, 1e-3)
    table = rows(spans)
    height = ROW * (len(table) + 2)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{LEFT + WIDTH + 20}" height="{height}" '
        'font-family="monospace" font-size="11">',
        f'<rect width="100%" height="100%" fill="white"/><text x="8" y="16">trace '
        f"{escape(spans[0]['context']['trace_id'])}  (0 to {t1 - t0:.2f} s)</text>",
    ]
    for i, (depth, s, span_id) in enumerate(table, start=1):
        y = ROW * i + 8
        if s is None:
            parts.append(
                f'<text x="{8 + 14 * depth}" y="{y + 13}" fill="#a00">span {span_id}: never '
                "ended (process killed)</text>"
                f'<rect x="{LEFT}" y="{y}" width="{WIDTH}" height="16" fill="none" '
                'stroke="#a00" stroke-dasharray="4 3"/>'
            )
            continue
        x = LEFT + (seconds(s["start_time"]) - t0) * scale
        w = max((seconds(s["end_time"]) - seconds(s["start_time"])) * scale, 2)
        color = COLORS.get(s["name"].split(" ")[0], "#888")
        parts.append(
            f'<text x="{8 + 14 * depth}" y="{y + 13}">{escape(label(s))}</text>'
            f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="16" fill="{color}"/>'
        )
    parts.append("</svg>")
    return "\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--svg", type=Path, help="write the waterfall here")
    args = parser.parse_args()
    spans = load(args.directory)
    for depth, s, span_id in rows(spans):
        text = f"span {span_id}: never ended (process killed)" if s is None else label(s)
        print("  " * depth + text)
    if args.svg:
        args.svg.write_text(svg(spans))


if __name__ == "__main__":
    main()
