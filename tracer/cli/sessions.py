"""``prunegate sessions``: the sessions in the trace store, one line each."""

from __future__ import annotations

import argparse
import json

from tracer.cli import add_command, options, status


def register(sub: argparse._SubParsersAction) -> None:
    parser = add_command(
        sub, "sessions",
        description="List recorded sessions: id, name, source, provider, policy, gated, messages, tool calls, "
        "peak tokens and violations.",
    )
    options.add_store(parser)
    parser.add_argument("--source", action="append", help="only sessions of this source (import, replay, ...)")
    options.add_json(parser, "print a JSON list")
    parser.set_defaults(func=run)


COLUMNS = ("id", "name", "source", "provider", "policy", "gated", "messages", "tool_calls", "peak_tokens", "violations")
# the same columns as tracer.queries.LIST_COLUMNS (kept literal here: --help must not import the queries)


def run(args: argparse.Namespace) -> int:
    from tracer.queries import list_sessions

    store = options.existing_store(args)
    rows = list_sessions(store, sources=args.source)  # StoreError: main() prints it
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return status.SUCCESS
    print(_table(rows))
    return status.SUCCESS


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
