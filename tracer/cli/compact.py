"""``prunegate compact``: move the store's segment files into spans.duckdb (docs/store.md)."""

from __future__ import annotations

import argparse
import json
import sys

from tracer.cli.checks import positive_seconds, store_dir


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "compact",
        help="move recorded segments into the store's main database",
        description="Move the store's segment files into spans.duckdb in one transaction (deduplicated by "
        "trace and span id), then delete them. Safe while agents record and the dashboard reads: writers "
        "are never blocked; readers wait at most briefly. Exit 0 when done, 3 when the store was busy "
        "(nothing lost; run it again), 2 when there is no store or it cannot be compacted.",
    )
    parser.add_argument("--store", type=store_dir, help="store directory (default: $PRUNEGATE_STORE, else ./prunegate-store)")
    parser.add_argument(
        "--timeout", type=positive_seconds, default=30.0, help="seconds to wait for locks held by readers (default 30)"
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tracer.store import Store, StoreError

    store = Store(args.store) if args.store else Store()
    if not store.path.is_dir():
        print(f"prunegate compact: no store at {store.path}", file=sys.stderr)
        return 2
    try:
        result = store.compact(timeout=args.timeout)
    except StoreError as exc:  # permission denied (named as such), a damaged database file
        print(f"prunegate compact: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"prunegate compact: {store.path}: {exc.strerror or exc}"
              + (f": {exc.filename}" if exc.filename else ""), file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.as_dict(), indent=2))
    else:
        print(
            f"{store.path}: {result.segments_compacted} segments, {result.rows_inserted} spans moved into "
            f"spans.duckdb ({result.duplicates_skipped} duplicates skipped); {result.segments_deleted} segment "
            f"files deleted"
            + (
                f", {result.deletes_deferred} left for the next run (readers busy)"
                if result.deletes_deferred
                else ""
            )
            + (f", {result.tmp_cleaned} stale temp files removed" if result.tmp_cleaned else "")
            + (f"; quarantined: {', '.join(result.quarantined)}" if result.quarantined else "")
        )
    if result.busy:
        print(
            f"prunegate compact: {store.path}: busy: {result.busy}; nothing lost, run again", file=sys.stderr
        )
        return 3
    return 0
