"""``prunegate compact``: move the store's segment files into spans.duckdb (docs/store.md)."""

from __future__ import annotations

import argparse
import json
import sys

from tracer.cli import add_command, options, status
from tracer.errors import CommandError, StoreError
from tracer.store import is_bucket


def register(sub: argparse._SubParsersAction) -> None:
    parser = add_command(
        sub, "compact",
        description="Move the store's segment files into spans.duckdb in one transaction (deduplicated by "
        "trace and span id), then delete them. Safe while agents record and the dashboard reads: writers "
        "are never blocked; readers wait at most briefly. Exit 0 when done, 3 when the store was busy "
        "(nothing lost; run it again), 2 when there is no store or it cannot be compacted.",
    )
    options.add_store(parser)
    parser.add_argument(
        "--timeout", type=options.positive_seconds, default=30.0, help="seconds to wait for locks held by readers (default 30)"
    )
    options.add_json(parser, "print the result as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    store = options.existing_store(args)
    try:
        result = store.compact(timeout=args.timeout)
    except StoreError:
        raise  # permission denied (named as such), a damaged database file: main() prints it
    except OSError as exc:
        raise CommandError(f"{store.path}: {exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")) from exc
    if args.json:
        print(json.dumps(result.as_dict(), indent=2))
    else:
        print(
            f"{store.path}: {result.segments_compacted} segments, {result.rows_inserted} spans moved into "
            f"{'one object per day' if is_bucket(store.path) else 'spans.duckdb'} "
            f"({result.duplicates_skipped} duplicates skipped); {result.segments_deleted} segment "
            f"{'objects' if is_bucket(store.path) else 'files'} deleted"
            + (
                f", {result.deletes_deferred} left for the next run (readers busy)"
                if result.deletes_deferred
                else ""
            )
            + (f", {result.tmp_cleaned} stale temp files removed" if result.tmp_cleaned else "")
            + (f"; quarantined: {', '.join(result.quarantined)}" if result.quarantined else "")
            + (f"; {len(result.released)} sessions they held released: import their input again to restore them"
               if result.released else "")
        )
    if result.busy:
        print(
            f"prunegate compact: {store.path}: busy: {result.busy}; nothing lost, run again", file=sys.stderr
        )
        return status.BUSY
    return status.SUCCESS
