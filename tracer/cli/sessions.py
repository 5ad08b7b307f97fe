"""``prunegate sessions``: the sessions in the trace store, one line each."""

from __future__ import annotations

import argparse
import json
import sys

from tracer.cli.checks import store_dir


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "sessions",
        help="list the sessions in the trace store",
        description="List recorded sessions: id, name, source, provider, policy, gated, messages, tool calls, "
        "peak tokens and violations.",
    )
    parser.add_argument("--store", type=store_dir, help="store directory (default: $PRUNEGATE_STORE, else ./prunegate-store)")
    parser.add_argument("--source", action="append", help="only sessions of this source (import, replay, ...)")
    parser.add_argument("--json", action="store_true", help="print a JSON list")
    parser.set_defaults(func=run)


COLUMNS = ("id", "name", "source", "provider", "policy", "gated", "messages", "tool_calls", "peak_tokens", "violations")
# the same columns as tracer.queries.LIST_COLUMNS (kept literal here: --help must not import the queries)


def run(args: argparse.Namespace) -> int:
    from tracer.queries import list_sessions
    from tracer.store import StoreError
    from tracer.traffic.recorded import store_path_arg

    store = store_path_arg(args.store)
    if not store.path.exists():
        print(f"prunegate sessions: no store at {store.path}", file=sys.stderr)
        return 2
    try:
        rows = list_sessions(store, sources=args.source)
    except StoreError as exc:
        print(f"prunegate sessions: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    print(_table(rows))
    return 0


def _table(rows: list[dict]) -> str:
    cells = [[_cell(r.get(c)) for c in COLUMNS] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(COLUMNS)]
    widths[1] = min(widths[1], 48)
    lines = ["  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths, strict=True))]
    for row in cells:
        lines.append("  ".join(v[:w].ljust(w) for v, w in zip(row, widths, strict=True)))
    lines.append(f"{len(rows)} sessions")
    return "\n".join(lines)


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)
