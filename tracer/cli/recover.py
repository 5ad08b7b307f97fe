"""``prunegate recover``: move spans from the spool into the store once the store can take them.

Spans go to the spool when the store refuses them (full disk, read-only store); every command
that spooled something names this command. Recovery is idempotent: span ids make a file
recovered twice show up once.

Exit status: 0 the spool is empty (everything is in the store), 2 a usage error, 3 spans are
still in the spool (the store still refuses them; the line printed says why).
"""

from __future__ import annotations

import argparse
import json
import sys

from tracer.cli import add_command, options, status


def register(sub: argparse._SubParsersAction) -> None:
    parser = add_command(
        sub, "recover",
        description="Rebuild spans.duckdb when it is damaged (from what can be read of it, the copy kept from "
        "before the last compaction and the segments), then move the spans a full or read-only store refused, "
        "kept in the spool, into the store. "
        "Safe to run any number of times and while agents record: a span is stored once. Exit 0 when "
        "the spool is empty afterwards, 3 when spans are still in it.",
    )
    options.add_store(parser)
    parser.add_argument("--spool-dir", help="spool directory (default: the one for this store, see docs/store.md)")
    options.add_json(parser, "print the result as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from tracer.store import StoreError
    from tracer.store.spool import Spool

    store = options.store_of(args)
    repaired = store.repair() if store.path.exists() else None  # a damaged spans.duckdb is rebuilt first
    if repaired:
        print(f"prunegate recover: {store.path}: {repaired}", file=sys.stderr)
    spool = Spool.for_store(store.path, Path(args.spool_dir) if args.spool_dir else None)
    waiting = spool.pending_rows()
    error = None
    moved = 0
    try:
        moved = spool.recover(store)
    except OSError as exc:
        error = f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")
    left = spool.pending_rows()
    try:
        in_store = store.count() if store.path.exists() else 0
    except StoreError:
        raise  # main() prints it: one line, exit 2
    damaged = [str(p) for p in spool.damaged()]
    out = {"store": str(store.path), "spool": str(spool.path), "waiting": waiting, "moved": moved, "left": left,
           "store_spans": in_store, "damaged": damaged, "error": error, "rebuilt": repaired}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"moved {moved} spans from the spool {spool.path} into {store.path} (which now holds {in_store} "
              f"spans); {left} spans left in the spool")
        for p in damaged:
            print(f"prunegate recover: unreadable spool file set aside: {p}", file=sys.stderr)
    if left:
        print(f"prunegate recover: {left} spans are still in the spool {spool.path}: the store refused them"
              + (f" ({error})" if error else "") + "; run this again once it is writable", file=sys.stderr)
        return status.NOT_STORED
    return status.SUCCESS
