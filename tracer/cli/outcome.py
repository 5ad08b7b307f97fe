"""What a recording command tells the user at the end: the sessions it wrote, read back from the
store, and (non-zero exit) whatever is not there: spooled spans with the command that moves them in;
and, with ``--otlp-endpoint``, what was sent on (:func:`send_after`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from typing import Any

from tracer.cli import status
from tracer.store import Store, StoreError, lookups
from tracer.store.spool import Spool, spooled_line

EXIT_NOT_STORED = status.NOT_STORED


def check_recorded(command: str, store: Store, session_ids: Iterable[str | None]) -> int:
    """Read back ``session_ids`` from ``store``; print one line for what is missing and return
    :data:`EXIT_NOT_STORED`, or 0 when every session is there."""
    wanted = [s for s in session_ids if s]
    if not wanted:
        return status.SUCCESS
    try:
        with store.reader() as r:
            found = lookups.stored_sessions(r, wanted)
    except StoreError as exc:
        print(f"prunegate {command}: could not read the recorded sessions back: {exc}", file=sys.stderr)
        return EXIT_NOT_STORED
    missing = len(set(wanted) - found)
    spool = Spool.for_store(store.path)
    spooled = spool.pending_rows()
    if not missing and not spooled:
        return status.SUCCESS
    print(f"prunegate {command}: {missing} of {len(wanted)} recorded sessions are not in the store {store.path}"
          + (f"; {spooled_line(spooled, spool.path, store.path)}" if spooled else ""), file=sys.stderr)
    return EXIT_NOT_STORED


def recorded_outcome(args: argparse.Namespace, store: Store, replay_ids: list[str | None]) -> int:
    """SUCCESS when the recorded replays are in the store (read back; nothing to check with
    ``--no-trace``), else say what is not (:data:`EXIT_NOT_STORED`)."""
    if not args.trace:
        return status.SUCCESS
    return check_recorded(args.command, store, replay_ids)


def headers_of(pairs: Iterable[str]) -> dict[str, str]:
    """``--otlp-header K=V`` items as a dict (ValueError naming the bad one)."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--otlp-header expects K=V, got {pair!r}")
        out[key.strip()] = value.strip()
    return out


def send(args: argparse.Namespace, store: Any, session_ids: list[str] | None) -> Any:
    """The store's spans (of ``session_ids``, or all) to ``--otlp-endpoint`` (:mod:`tracer.wire.export`)."""
    from tracer.wire.export import export_store

    return export_store(store, args.otlp_endpoint, session_ids, json_encoding=args.json_encoding,
                        project=args.project, headers=headers_of(args.otlp_header))


def send_after(args: argparse.Namespace, store: Any, session_ids: list[str], command: str) -> tuple[int, Any]:
    """After ``command`` recorded ``session_ids``: send them when ``--otlp-endpoint`` was given.

    Returns (exit status contribution: 0 or 1, the result or None); the caller prints the result's
    counters beside its own (or puts them in its JSON as ``"otlp"``).
    """
    if not getattr(args, "otlp_endpoint", None):
        return status.SUCCESS, None
    if not session_ids:
        result = None
        print(f"prunegate {command}: nothing recorded, nothing sent to {args.otlp_endpoint}", file=sys.stderr)
        return status.SUCCESS, result
    try:
        result = send(args, store, session_ids)
    except (KeyError, ValueError) as exc:
        print(f"prunegate {command}: cannot send to {args.otlp_endpoint}: {exc}", file=sys.stderr)
        return status.FOUND_PROBLEMS, None
    return (status.FOUND_PROBLEMS if result.failed else status.SUCCESS), result
