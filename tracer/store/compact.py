"""Compaction: move committed segments into ``spans.duckdb``, then delete them.

Order of operations, and why each step is safe to crash in:
1. take ``compact.lock`` (exclusive flock): one compactor at a time;
2. open ``spans.duckdb`` read-write, retrying while readers hold it (bounded);
3. in ONE transaction: insert the new segments' rows (deduplicated by ``(trace_id, span_id)``
   against themselves and the table), update the session catalog of those spans
   (:mod:`tracer.store.catalog`) and record each segment's name in ``compacted_segments``;
   COMMIT, CHECKPOINT, close. A crash before COMMIT changes nothing;
4. take ``readers.lock`` exclusively (bounded; every reader holds it shared from listing the
   segments until it closes) and delete the absorbed files. A crash before the delete leaves
   files whose names are in the ledger: readers skip them and the next compaction deletes them.
Writers are never involved: they keep renaming new segments into ``segments/`` throughout.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Set as AbstractSet
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from tracer.errors import StoreError, StorePermissionError
from tracer.store import catalog
from tracer.store.locks import FileLock, fsync_path
from tracer.store.schema import MAIN_DDL, PROMOTED, SCHEMA_VERSION, derived, select_list
from tracer.store.segments import (
    StoreLayout,
    check_writable,
    clean_tmp,
    list_segments,
    segment_footer,
)

log = logging.getLogger(__name__)

LEDGER_RETENTION_NS = 7 * 86400 * 10**9  # forget absorbed names a week after their files are gone


@dataclass
class CompactResult:
    """What one compaction did. ``busy`` says why it did nothing (or stopped early)."""

    store: str
    segments_seen: int = 0
    segments_compacted: int = 0
    rows_inserted: int = 0
    duplicates_skipped: int = 0
    segments_deleted: int = 0
    deletes_deferred: int = 0
    tmp_cleaned: int = 0
    quarantined: list[str] = field(default_factory=list)
    busy: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def is_lock_error(exc: BaseException) -> bool:
    """Whether a DuckDB error means "someone holds the file in a conflicting mode": another
    process (a file lock) or another connection of this process (read-only vs read-write)."""
    if isinstance(exc, duckdb.IOException):
        return "lock" in str(exc).lower()
    resource_in_use = getattr(duckdb, "ResourceInUseException", None)
    return resource_in_use is not None and isinstance(exc, resource_in_use)


def open_main_rw(main: Path, deadline: float) -> duckdb.DuckDBPyConnection | None:
    """Open the main database read-write, retrying lock conflicts until ``deadline``."""
    delay = 0.005
    while True:
        try:
            return duckdb.connect(str(main))
        except duckdb.Error as exc:
            if not is_lock_error(exc) or time.monotonic() >= deadline:
                if is_lock_error(exc):
                    return None
                raise
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 2, 0.1) * (0.5 + random.random())


def _valid_segments(
    paths: list[Path], result: CompactResult, legacy: set[Path]
) -> tuple[list[Path], list[int], list[Path]]:
    """Split segments into readable ones (with row counts) and ones to quarantine; add to ``legacy``
    those written before schema 2 (their promoted columns are derived as they are inserted)."""
    good, rows, bad = [], [], []
    for path in paths:
        try:
            n, current = segment_footer(path)
            rows.append(n)
            good.append(path)
            if not current:
                legacy.add(path)
        except FileNotFoundError:
            continue  # deleted by a compactor that ran before us; nothing to do
        except Exception as exc:  # a damaged footer: set it aside instead of blocking forever
            log.warning("prunegate store: quarantining unreadable segment %s: %s", path, exc)
            bad.append(path)
            result.quarantined.append(path.name)
    return good, rows, bad


def _fresh_sql(*, derive: bool) -> str:
    """Collect segments' new rows in the temp table ``_fresh``, each span once (against themselves,
    the table and what ``_fresh`` holds); ``derive`` for segments written before schema 2."""
    return f"""
INSERT INTO _fresh
SELECT {select_list()} FROM (
    SELECT DISTINCT ON (trace_id, span_id) {select_list(cast_json=True, derive=derive)}
    FROM read_parquet(?, union_by_name = true)
) p
WHERE NOT EXISTS (SELECT 1 FROM spans s WHERE s.trace_id = p.trace_id AND s.span_id = p.span_id)
  AND NOT EXISTS (SELECT 1 FROM _fresh f WHERE f.trace_id = p.trace_id AND f.span_id = p.span_id)
"""


# The new spans go through a temp table so that the session catalog (tracer.store.catalog) reads
# exactly what was inserted.
_FRESH_SQL = {False: _fresh_sql(derive=False), True: _fresh_sql(derive=True)}
_INSERT_SQL = (f"INSERT INTO spans SELECT {select_list()} FROM _fresh "
               "ORDER BY session_id NULLS LAST, seq NULLS LAST, start_time_ns")


def _absorb(
    con: duckdb.DuckDBPyConnection, paths: list[Path], rows: list[int], listed: list[str],
    legacy: AbstractSet[Path] = frozenset(),
) -> int:
    """One transaction: insert the segments' rows and record their names. Returns rows inserted."""
    now = time.time_ns()
    con.execute("BEGIN TRANSACTION")
    try:
        inserted = 0
        if paths:
            con.execute("CREATE OR REPLACE TEMP TABLE _fresh AS SELECT * FROM spans WHERE false")
            for derive in (False, True):
                group = [str(p) for p in paths if (p in legacy) == derive]
                if group:
                    con.execute(_FRESH_SQL[derive], [group])
            row = con.execute(_INSERT_SQL).fetchone()
            inserted = row[0] if row is not None else 0
            catalog.refresh(con, "_fresh")
            con.execute("DROP TABLE _fresh")
            con.execute(
                "INSERT INTO compacted_segments SELECT unnest(?::VARCHAR[]), unnest(?::BIGINT[]), ?",
                [[p.name for p in paths], rows, now],
            )
        con.execute(
            "DELETE FROM compacted_segments WHERE compacted_at_ns < ? AND NOT list_contains(?::VARCHAR[], name)",
            [now - LEDGER_RETENTION_NS, listed],
        )
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return int(inserted)


def ensure_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create the main tables when missing, upgrade a table written before schema 2 (adds the
    promoted columns, filled from the attributes) and record the schema version, in one transaction;
    then build the session catalog when it is missing or older (:func:`tracer.store.catalog.ensure`)."""
    con.execute("BEGIN TRANSACTION")
    try:
        for ddl in MAIN_DDL:
            con.execute(ddl)
        have = {r[0] for r in con.execute(
            "SELECT column_name FROM duckdb_columns() WHERE database_name = current_database() "
            "AND schema_name = 'main' AND table_name = 'spans'").fetchall()}
        missing = [(name, sql_type) for name, sql_type, _, _ in PROMOTED if name not in have]
        for name, sql_type in missing:
            con.execute(f"ALTER TABLE spans ADD COLUMN {name} {sql_type}")
        if missing:
            con.execute("UPDATE spans SET " + ", ".join(f"{name} = {derived(name)}" for name, _ in missing))
        con.execute(
            "INSERT INTO store_meta VALUES ('schema_version', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [str(SCHEMA_VERSION)],
        )
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    catalog.ensure(con)


def compact(
    layout: StoreLayout,
    *,
    timeout: float = 10.0,
    max_files_per_transaction: int = 512,
    tmp_min_age: float = 60.0,
) -> CompactResult:
    """Move every committed segment into the main database. Never raises for lock contention:
    a busy store comes back as ``result.busy``; segments stay where they are, nothing is lost.
    Raises :class:`StorePermissionError` when the store cannot be written (read-only), and
    :class:`StoreError` when its database cannot be opened."""
    result = CompactResult(store=str(layout.root))
    deadline = time.monotonic() + timeout
    if not layout.root.is_dir():
        return result  # no store yet (writers create it): nothing to compact
    check_writable(layout)  # a read-only store is a permission problem, not a busy one
    if not layout.segments.is_dir():
        return result  # an empty store: nothing to compact
    lock = FileLock(layout.compact_lock)
    if not lock.acquire(timeout):
        result.busy = "another compaction is running"
        return result
    try:
        result.tmp_cleaned = clean_tmp(layout, min_age=tmp_min_age)
        segments = list_segments(layout)
        result.segments_seen = len(segments)
        try:
            con = open_main_rw(layout.main, deadline)
        except duckdb.Error as exc:
            if "permission denied" in str(exc).lower() or "read-only" in str(exc).lower():
                raise StorePermissionError(f"{layout.main}: permission denied: {exc}") from exc
            raise StoreError(f"{layout.main}: cannot open the store database: {exc}") from exc
        if con is None:
            result.busy = "spans.duckdb is held by readers or another process"
            return result
        try:
            ensure_schema(con)
            listed = [p.name for p in segments]
            done = {
                r[0]
                for r in con.execute(
                    "SELECT name FROM compacted_segments WHERE list_contains(?::VARCHAR[], name)", [listed]
                ).fetchall()
            }
            fresh = [p for p in segments if p.name not in done]
            legacy: set[Path] = set()
            good, rows, bad = _valid_segments(fresh, result, legacy)
            for start in range(0, max(len(good), 1), max_files_per_transaction):
                chunk = good[start : start + max_files_per_transaction]
                chunk_rows = rows[start : start + max_files_per_transaction]
                inserted = _absorb(con, chunk, chunk_rows, listed, legacy)
                result.rows_inserted += inserted
                result.duplicates_skipped += sum(chunk_rows) - inserted
                result.segments_compacted += len(chunk)
            con.execute("CHECKPOINT")
        finally:
            con.close()
        to_delete = [p for p in segments if p.name in done] + good
        _delete(layout, to_delete, bad, deadline, result)
        return result
    finally:
        lock.release()


def _delete(
    layout: StoreLayout, absorbed: list[Path], bad: list[Path], deadline: float, result: CompactResult
) -> None:
    """Delete absorbed segments (and set aside bad ones) while no reader holds a file list."""
    if not absorbed and not bad:
        return
    readers = FileLock(layout.readers_lock)
    if not readers.acquire(max(0.5, deadline - time.monotonic())):
        result.deletes_deferred = len(absorbed)  # the ledger hides them; the next run deletes them
        return
    try:
        for path in absorbed:
            try:
                os.unlink(path)
                result.segments_deleted += 1
            except FileNotFoundError:
                pass
        if bad:
            layout.quarantine.mkdir(exist_ok=True)
            for path in bad:
                try:
                    os.replace(path, layout.quarantine / path.name)
                except OSError as exc:
                    log.warning("prunegate store: could not quarantine %s: %s", path, exc)
        fsync_path(layout.segments)
    finally:
        readers.release()
