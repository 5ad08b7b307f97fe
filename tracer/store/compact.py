"""Compaction: move committed segments into ``spans.duckdb`` by writing a new database beside it.

Order of operations, and why each step is safe to crash in (or to fail in, on a full disk):
1. take ``compact.lock`` (exclusive flock): one compactor at a time;
2. copy ``spans.duckdb`` to ``tmp/`` and open the copy (readers keep reading the original);
3. in ONE transaction on the copy: insert the new segments' rows (deduplicated by
   ``(trace_id, span_id)`` against themselves and the table), update the session catalog of those
   spans (:mod:`tracer.store.catalog`) and record each segment's name in ``compacted_segments``;
   COMMIT, CHECKPOINT, close, fsync. A crash or a full disk here leaves the original untouched;
4. swap: the original becomes ``spans.duckdb.previous`` (a hard link), the copy is renamed over
   ``spans.duckdb`` (atomic: a reader opens the old file or the new one, never a half);
5. take ``readers.lock`` exclusively (bounded; every reader holds it shared from listing the
   segments until it closes), delete the segments of the compaction before (``absorbed/``: they are
   in ``previous`` now) and move the ones just absorbed there. A crash before the move leaves files
   whose names are in the ledger: readers skip them and the next compaction moves them.
``previous`` plus ``absorbed/`` plus ``segments/`` hold every span, so a damaged ``spans.duckdb``
is rebuilt from them (:func:`rebuild`, run by ``prunegate recover`` and by a compaction that finds
it damaged). Writers are never involved: they keep renaming new segments into ``segments/``.
"""

from __future__ import annotations

import errno
import logging
import os
import random
import secrets
import shutil
import time
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from tracer.errors import CompactionCancelled, StoreDamaged, StoreError, StoreNoSpace, StorePermissionError
from tracer.store import catalog
from tracer.store.cancel import Cancel
from tracer.store.claims import release_segment
from tracer.store.locks import FileLock, fsync_path
from tracer.store.schema import MAIN_DDL, PROMOTED, PROMOTED_NAMES, SCHEMA_VERSION, derived, select_list
from tracer.store.segments import (
    SEGMENT_SUFFIX,
    TMP_SUFFIX,
    StoreLayout,
    check_writable,
    clean_tmp,
    list_segments,
)
from tracer.store.verify import SegmentDamaged, verify_segment

log = logging.getLogger(__name__)

LEDGER_RETENTION_NS = 7 * 86400 * 10**9  # forget absorbed names a week after their files are gone
# DuckDB's memory while compacting: past it, its sorts, joins and temp tables spill to a swap
# directory under tmp/ instead of growing (its default is 80% of the machine's memory, which a
# compaction beside `serve` filled with cached blocks; docs/scale.md). Rows of very large content
# (100 kB strings) cannot be spilled when appended: a compaction that runs out is done again
# without the limit, so the limit costs time, never a compaction.
MEMORY_LIMIT = "256MB"


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
    released: list[str] = field(default_factory=list)  # sessions of quarantined segments: importable again
    busy: str | None = None
    rebuilt: str | None = None  # spans.duckdb was damaged and rebuilt: what was found and what it was rebuilt from

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def is_lock_error(exc: BaseException) -> bool:
    """Whether a DuckDB error means "someone holds the file in a conflicting mode": another
    process (a file lock) or another connection of this process (read-only vs read-write)."""
    if isinstance(exc, duckdb.IOException):
        return "lock" in str(exc).lower()
    resource_in_use = getattr(duckdb, "ResourceInUseException", None)
    return resource_in_use is not None and isinstance(exc, resource_in_use)


_DAMAGE = ("corrupt database", "not a valid duckdb database", "checksum", "invalid database header",
           "database file is truncated", "failed to read", "could not read enough bytes")


def is_damage(exc: BaseException) -> bool:
    """Whether a DuckDB error means the database file itself is damaged (not a lock, not a query)."""
    text = str(exc).lower()
    return isinstance(exc, duckdb.Error) and any(d in text for d in _DAMAGE)


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether a DuckDB error means it ran out of the memory it was allowed."""
    oom = getattr(duckdb, "OutOfMemoryException", None)
    return (oom is not None and isinstance(exc, oom)) or "out of memory" in str(exc).lower()


def is_no_space(exc: BaseException) -> bool:
    """Whether an error (OSError or DuckDB's IO error) means the disk or quota is full."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(exc).lower()
    return "no space left" in text or "disk quota exceeded" in text


def first_line(exc: BaseException) -> str:
    """An error's first line (DuckDB's messages run on with the SQL and a caret)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def damaged(layout: StoreLayout, exc: BaseException) -> StoreDamaged:
    """The one-line error for a damaged ``spans.duckdb``, naming the command that rebuilds it."""
    return StoreDamaged(f"{layout.main} is damaged ({first_line(exc)}); `prunegate recover --store {layout.root}` "
                        "rebuilds it from the previous copy and the segments")


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
    paths: list[Path], result: CompactResult, legacy: set[Path], cancel: Cancel | None = None
) -> tuple[list[Path], list[int], list[Path]]:
    """Split segments into readable ones (with row counts) and ones to quarantine; add to ``legacy``
    those written before schema 2 (their promoted columns are derived as they are inserted)."""
    good, rows, bad = [], [], []
    for path in paths:
        if cancel is not None:
            cancel.check()
        try:
            n, current = verify_segment(path)
            rows.append(n)
            good.append(path)
            if not current:
                legacy.add(path)
        except FileNotFoundError:
            continue  # deleted by a compactor that ran before us; nothing to do
        except (SegmentDamaged, OSError) as exc:  # damaged: set it aside instead of blocking forever
            log.warning("prunegate store: quarantining unreadable segment %s: %s", path, exc)
            bad.append(path)
            result.quarantined.append(path.name)
    return good, rows, bad


_SOURCE = "read_parquet($files, union_by_name = true, filename = true, file_row_number = true)"


def _fresh_sql(*, derive: bool) -> str:
    """Collect segments' new rows in the temp table ``_fresh``, each span once (against themselves,
    the table and what ``_fresh`` holds); ``derive`` for segments written before schema 2.

    Which rows are new is decided on keys alone, each row named by its file and row number, and
    only those rows are then read whole: deduplicating whole rows (``DISTINCT ON`` over every
    column) held every new span's content in a hash table at once, most of compaction's peak memory
    (docs/scale.md)."""
    return f"""
INSERT INTO _fresh
SELECT {select_list(cast_json=True, derive=derive)} FROM {_SOURCE} p
SEMI JOIN (
    SELECT DISTINCT ON (k.trace_id, k.span_id) k.filename, k.file_row_number
    FROM (SELECT CAST(trace_id AS VARCHAR) AS trace_id, CAST(span_id AS VARCHAR) AS span_id,
                 filename, file_row_number FROM {_SOURCE}) k
    WHERE NOT EXISTS (SELECT 1 FROM spans s WHERE s.trace_id = k.trace_id AND s.span_id = k.span_id)
      AND NOT EXISTS (SELECT 1 FROM _fresh f WHERE f.trace_id = k.trace_id AND f.span_id = k.span_id)
) n USING (filename, file_row_number)
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
                    con.execute(_FRESH_SQL[derive], {"files": group})
            row = con.execute(_INSERT_SQL).fetchone()
            inserted = row[0] if row is not None else 0
            catalog.refresh(con, "_fresh")
            con.execute("DROP TABLE _fresh")
            con.execute(
                "INSERT INTO compacted_segments SELECT unnest(?::VARCHAR[]), unnest(?::BIGINT[]), ? "
                "ON CONFLICT (name) DO NOTHING",  # a rebuild re-reads segments a salvaged ledger names
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
    cancel: Cancel | None = None,
) -> CompactResult:
    """Move every committed segment into the main database (a new one, swapped in). Never raises
    for lock contention: a busy store comes back as ``result.busy``; segments stay where they are
    (so does everything when ``cancel`` is called: ``busy`` then says it was cancelled).
    Raises :class:`StorePermissionError` when the store cannot be written (read-only),
    :class:`StoreNoSpace` when there is no room for the new database (the store is unchanged), and
    :class:`StoreError` when a database cannot be opened. A damaged ``spans.duckdb`` is rebuilt
    (:func:`rebuild`; ``result.rebuilt`` says so)."""
    result = CompactResult(store=str(layout.root))
    deadline = time.monotonic() + timeout
    if not layout.root.is_dir():
        return result  # no store yet (writers create it): nothing to compact
    layout.check_version()
    check_writable(layout)  # a read-only store is a permission problem, not a busy one
    if not layout.segments.is_dir():
        return result  # an empty store: nothing to compact
    lock = FileLock(layout.compact_lock)
    if not lock.acquire(timeout):
        result.busy = "another compaction is running"
        return result
    cancel = cancel or Cancel()
    try:
        return _compact_locked(layout, result, deadline, max_files_per_transaction, tmp_min_age, cancel)
    except CompactionCancelled:
        _uncount(result)  # none swapped in
        result.busy = "cancelled before the swap: the store is as it was"
        return result
    finally:
        lock.release()


def _compact_locked(
    layout: StoreLayout, result: CompactResult, deadline: float, max_files_per_transaction: int,
    tmp_min_age: float, cancel: Cancel,
) -> CompactResult:
    """:func:`compact` once it holds ``compact.lock``; raises :class:`CompactionCancelled` at a step boundary,
    or from the DuckDB statement a cancel interrupted, as long as nothing was swapped in."""
    result.tmp_cleaned = clean_tmp(layout, min_age=tmp_min_age)
    segments = list_segments(layout)
    result.segments_seen = len(segments)
    listed = [p.name for p in segments]
    try:
        state = _main_state(layout, listed, deadline)
    except StoreDamaged as exc:
        reason = f"spans.duckdb was damaged ({first_line(exc.__cause__ or exc)})"
        result.rebuilt = _rebuild_locked(layout, reason, result, max_files_per_transaction)
        log.warning("prunegate store %s: %s", layout.root, result.rebuilt)
        return result
    if state is None:
        result.busy = "spans.duckdb is held by another process"
        return result
    done, current = state
    fresh = [p for p in segments if p.name not in done]
    legacy: set[Path] = set()
    good, rows, bad = _valid_segments(fresh, result, legacy, cancel)
    swapped = False
    if good or not current:
        work = _work_path(layout)
        try:
            try:
                _write_new(layout, work, good, rows, listed, legacy, result, max_files_per_transaction,
                           MEMORY_LIMIT, cancel)
            except duckdb.Error as exc:  # large content rows: DuckDB could not spill them
                if cancel.requested or not is_out_of_memory(exc):
                    raise
                log.warning("prunegate store %s: compaction needs more than %s (%s); compacting again "
                            "without a memory limit", layout.root, MEMORY_LIMIT, first_line(exc))
                _unlink_work(work)
                _uncount(result)
                _write_new(layout, work, good, rows, listed, legacy, result, max_files_per_transaction, None, cancel)
            cancel.check()
            _swap_in(layout, work)
            swapped = True
        except (OSError, duckdb.Error) as exc:
            if cancel.requested:
                raise CompactionCancelled from exc
            _raise_for(layout, exc, work)
        finally:
            _unlink_work(work)
    retired = [p for p in segments if p.name in done] + (good if swapped else [])
    _retire(layout, retired, bad, deadline, result, rotate=swapped)
    return result


def _uncount(result: CompactResult) -> None:
    """Forget what a new database that was not swapped in had absorbed."""
    result.rows_inserted = result.duplicates_skipped = result.segments_compacted = 0


def _write_new(
    layout: StoreLayout, work: Path, good: list[Path], rows: list[int], listed: list[str], legacy: set[Path],
    result: CompactResult, per_transaction: int, memory_limit: str | None, cancel: Cancel,
) -> None:
    """Write the new database at ``work``: a copy of spans.duckdb with the segments ``good`` absorbed
    (counted in ``result``), DuckDB's memory bounded by ``memory_limit`` (None: DuckDB's default);
    ``cancel`` interrupts it."""
    if layout.main.exists():
        _copy_main(layout, work)
    cancel.check()
    con = _connect_work(work, memory_limit)
    cancel.attach(con)
    try:
        ensure_schema(con)
        for start in range(0, max(len(good), 1), per_transaction):
            cancel.check()
            chunk = good[start : start + per_transaction]
            chunk_rows = rows[start : start + per_transaction]
            inserted = _absorb(con, chunk, chunk_rows, listed, legacy)
            result.rows_inserted += inserted
            result.duplicates_skipped += sum(chunk_rows) - inserted
            result.segments_compacted += len(chunk)
        con.execute("CHECKPOINT")
    finally:
        cancel.attach(None)
        con.close()


def _raise_for(layout: StoreLayout, exc: BaseException, work: Path) -> None:
    """Turn a failure while writing the new database into the one error that says what to do."""
    if is_no_space(exc):
        need = layout.main.stat().st_size if layout.main.exists() else 0
        raise StoreNoSpace(
            f"{layout.root}: no space left on device for the new spans.duckdb compaction writes beside the old "
            f"(about {need:,} bytes plus the new spans); the store is unchanged and readable: free space and run "
            "`prunegate compact` again") from exc
    if isinstance(exc, PermissionError) or "permission denied" in str(exc).lower():
        raise StorePermissionError(f"{work}: permission denied: {exc}") from exc
    if is_damage(exc):
        raise damaged(layout, exc) from exc
    if isinstance(exc, OSError):
        raise exc
    raise StoreError(f"{layout.main}: compaction failed, the store is unchanged: {exc}") from exc


def _work_path(layout: StoreLayout) -> Path:
    """Where a compactor writes the new database (a temp file: a dead compactor's is cleaned up)."""
    layout.tmp.mkdir(exist_ok=True)
    return layout.tmp / f"spans-{secrets.token_hex(4)}.duckdb.{os.getpid()}{TMP_SUFFIX}"


def _swap(work: Path) -> Path:
    """The directory DuckDB spills to while writing ``work`` (removed with it; :func:`clean_tmp`
    removes a dead compactor's)."""
    return work.with_name("swap-" + work.name.removeprefix("spans-"))


def _connect_work(work: Path, memory_limit: str | None = MEMORY_LIMIT) -> duckdb.DuckDBPyConnection:
    """The new database, opened with DuckDB's memory bounded by ``memory_limit`` (None: unbounded)."""
    config: dict[str, Any] = {"temp_directory": str(_swap(work))}
    if memory_limit is not None:
        config["memory_limit"] = memory_limit
    return duckdb.connect(str(work), config=config)


def _wal(path: Path) -> Path:
    return path.with_name(path.name + ".wal")


def _unlink_work(work: Path) -> None:
    for p in (work, _wal(work)):
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass
    shutil.rmtree(_swap(work), ignore_errors=True)


def _copy_main(layout: StoreLayout, work: Path) -> None:
    """Copy spans.duckdb (and a WAL left by a compactor of an older version) to ``work``."""
    shutil.copyfile(layout.main, work)
    if _wal(layout.main).exists():
        shutil.copyfile(_wal(layout.main), _wal(work))


def _swap_in(layout: StoreLayout, work: Path) -> None:
    """Make ``work`` the store's database, atomically; the old one becomes ``spans.duckdb.previous``."""
    fsync_path(work)
    if layout.main.exists():
        link = layout.tmp / f"previous-{secrets.token_hex(4)}.{os.getpid()}{TMP_SUFFIX}"
        os.link(layout.main, link)
        os.replace(link, layout.previous)
        try:  # its transactions are in the copy (DuckDB replayed it there); never against the new file
            os.unlink(_wal(layout.main))
        except FileNotFoundError:
            pass
    os.replace(work, layout.main)
    fsync_path(layout.root)


def _main_state(layout: StoreLayout, listed: list[str], deadline: float) -> tuple[set[str], bool] | None:
    """The listed segments spans.duckdb has absorbed, and whether its schema and catalog are current
    (else a compaction with no segment still rewrites it); None while another process holds it for
    writing (until ``deadline``). Raises :class:`StoreDamaged`."""
    if not layout.main.exists():
        return set(), True
    con = duckdb.connect(":memory:")
    try:
        delay = 0.005
        while True:
            try:
                con.execute("ATTACH ? AS store (READ_ONLY)", [str(layout.main)])
                break
            except duckdb.Error as exc:
                if not is_lock_error(exc):
                    raise
                if time.monotonic() >= deadline:
                    return None
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 0.1) * (0.5 + random.random())
        tables = {r[0] for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = 'store'").fetchall()}
        if not {"spans", "compacted_segments", "store_meta"} <= tables:
            return set(), False
        meta = dict(con.execute("SELECT key, value FROM store.store_meta").fetchall())
        columns = {r[0] for r in con.execute(
            "SELECT column_name FROM duckdb_columns() WHERE database_name = 'store' AND table_name = 'spans'").fetchall()}
        current = (meta.get("schema_version") == str(SCHEMA_VERSION)
                   and meta.get(catalog.META_KEY) == catalog.CATALOG_VERSION and set(PROMOTED_NAMES) <= columns)
        done = {r[0] for r in con.execute(
            "SELECT name FROM store.compacted_segments WHERE list_contains(?::VARCHAR[], name)", [listed]).fetchall()}
        return done, current
    except duckdb.Error as exc:
        if is_damage(exc):
            raise damaged(layout, exc) from exc
        if "permission denied" in str(exc).lower():
            raise StorePermissionError(f"{layout.main}: permission denied: {exc}") from exc
        raise StoreError(f"{layout.main}: cannot open the store database: {exc}") from exc
    finally:
        con.close()


def _retire(
    layout: StoreLayout, absorbed: list[Path], bad: list[Path], deadline: float, result: CompactResult,
    *, rotate: bool,
) -> None:
    """While no reader holds a file list: after a swap, delete the segments the compaction before
    kept (``previous`` holds them now); move the absorbed ones to ``absorbed/`` and bad ones aside."""
    if not absorbed and not bad and not rotate:
        return
    readers = FileLock(layout.readers_lock)
    if not readers.acquire(max(0.5, deadline - time.monotonic())):
        result.deletes_deferred = len(absorbed)  # the ledger hides them; the next run moves them
        return
    try:
        if rotate:
            for old in _files(layout.absorbed):
                try:
                    os.unlink(old)
                except FileNotFoundError:
                    pass
        result.segments_deleted += _move_into(layout.absorbed, absorbed)
        if bad:
            layout.quarantine.mkdir(exist_ok=True)
            for path in bad:
                try:
                    os.replace(path, layout.quarantine / path.name)
                except OSError as exc:
                    log.warning("prunegate store: could not quarantine %s: %s", path, exc)
                else:  # its sessions are gone from the store: importing their input again restores them
                    result.released += release_segment(layout, path.name)
        fsync_path(layout.segments)
    finally:
        readers.release()


def _files(folder: Path) -> list[Path]:
    try:
        return sorted(folder / e.name for e in os.scandir(folder) if e.name.endswith(SEGMENT_SUFFIX))
    except FileNotFoundError:
        return []


# ------------------------------------------------------------------------------ a damaged database
def verify_main(layout: StoreLayout) -> str | None:
    """Read every table of spans.duckdb through (each block carries a checksum) and look every key of
    its indexed tables up (index blocks are read only by lookups); None when it is sound (or absent),
    else why not. A full read of the file: ``prunegate recover`` runs it, not every reader."""
    if not layout.main.exists():
        return None
    con = duckdb.connect(":memory:")
    try:
        con.execute("ATTACH ? AS store (READ_ONLY)", [str(layout.main)])
        tables = [r[0] for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = 'store'").fetchall()]
        for table in tables:
            for _ in con.sql(f'SELECT * FROM store."{table}"').to_arrow_reader(65536):
                pass
        for table, key in _INDEXED:
            if table in tables:
                for (value,) in con.execute(f"SELECT {key} FROM store.{table}").fetchall():
                    con.execute(f"SELECT count(*) FROM store.{table} WHERE {key} = ?", [value]).fetchall()
        return None
    except duckdb.Error as exc:
        if is_damage(exc):
            return first_line(exc)
        raise StoreError(f"{layout.main}: cannot open the store database: {exc}") from exc
    finally:
        con.close()


_INDEXED = (("store_meta", "key"), ("compacted_segments", "name"))  # the primary keys of MAIN_DDL


def rebuild(layout: StoreLayout, reason: str, *, timeout: float = 30.0) -> CompactResult:
    """Rebuild a damaged spans.duckdb: what can still be read of it (row group by row group), then
    ``spans.duckdb.previous`` (the database before the last compaction), then every segment of
    ``absorbed/`` and ``segments/``, each span once; the damaged file goes to ``quarantine/``."""
    result = CompactResult(store=str(layout.root))
    check_writable(layout)
    lock = FileLock(layout.compact_lock)
    if not lock.acquire(timeout):
        result.busy = "another compaction is running"
        return result
    try:
        result.rebuilt = _rebuild_locked(layout, reason, result, 512)
        return result
    finally:
        lock.release()


_ROW_GROUP = 122_880  # DuckDB's row group: the unit a damaged block takes down


def _rebuild_locked(layout: StoreLayout, reason: str, result: CompactResult, per_transaction: int) -> str:
    work = _work_path(layout)
    notes: list[str] = []
    total: tuple[Any, ...] | None = None
    try:
        con = _connect_work(work, None)  # recovery: whatever memory it takes
        try:
            for ddl in MAIN_DDL:
                con.execute(ddl)
            for label, source in (("the damaged file", layout.main), ("the previous copy", layout.previous)):
                if source.exists():
                    notes.append(f"{label}: {_salvage(con, source)}")
            ensure_schema(con)
            files = _files(layout.absorbed) + list_segments(layout)
            legacy: set[Path] = set()
            good, rows, bad = _valid_segments(files, result, legacy)
            listed = [p.name for p in files]
            for start in range(0, len(good), per_transaction):
                chunk, chunk_rows = good[start : start + per_transaction], rows[start : start + per_transaction]
                inserted = _absorb(con, chunk, chunk_rows, listed, legacy)
                result.rows_inserted += inserted
                result.duplicates_skipped += sum(chunk_rows) - inserted
                result.segments_compacted += len(chunk)
            notes.append(f"{len(good)} segments")
            total = con.execute("SELECT count(*) FROM spans").fetchone()
            con.execute("CHECKPOINT")
        finally:
            con.close()
        fsync_path(work)
        if layout.main.exists():
            layout.quarantine.mkdir(exist_ok=True)
            aside = layout.quarantine / f"spans.duckdb.{time.time_ns()}.damaged"
            os.replace(layout.main, aside)
            notes.append(f"the damaged file is {aside}")
            try:
                os.replace(_wal(layout.main), aside.with_name(aside.name + ".wal"))
            except FileNotFoundError:
                pass
        os.replace(work, layout.main)
        fsync_path(layout.root)
        bad_in_segments = [p for p in bad if p.parent == layout.segments]
        if bad_in_segments:
            _retire(layout, [], bad_in_segments, time.monotonic() + 5, result, rotate=False)
    except (OSError, duckdb.Error) as exc:
        _raise_for(layout, exc, work)
    finally:
        _unlink_work(work)
    spans = total[0] if total else 0
    return f"{reason}; rebuilt with {spans} spans from " + "; ".join(notes)


def _salvage(con: duckdb.DuckDBPyConnection, source: Path) -> str:
    """Copy into ``spans`` (and the ledger) what can be read of another database file, row group by
    row group: a damaged block costs its row group, not the file. Says what it got."""
    try:
        con.execute("ATTACH ? AS src (READ_ONLY)", [str(source)])
    except duckdb.Error as exc:
        return f"unreadable ({first_line(exc)})"
    try:
        tables = {r[0] for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = 'src'").fetchall()}
        if "spans" not in tables:
            return "no spans table"
        columns = {r[0] for r in con.execute(
            "SELECT column_name FROM duckdb_columns() WHERE database_name = 'src' AND table_name = 'spans'").fetchall()}
        legacy = not set(PROMOTED_NAMES) <= columns
        top = con.execute("SELECT max(rowid) FROM src.spans").fetchone()
        last = top[0] if top and top[0] is not None else -1
        got, lost_groups = 0, 0
        for low in range(0, last + 1, _ROW_GROUP):
            try:
                row = con.execute(
                    f"INSERT INTO spans SELECT {select_list('s', derive=legacy)} FROM src.spans s "
                    "WHERE s.rowid BETWEEN ? AND ? AND NOT EXISTS (SELECT 1 FROM spans m "
                    "WHERE m.trace_id = s.trace_id AND m.span_id = s.span_id)", [low, low + _ROW_GROUP - 1]).fetchone()
                got += row[0] if row else 0
            except duckdb.Error:
                lost_groups += 1
        if "compacted_segments" in tables:
            try:
                con.execute("INSERT INTO compacted_segments SELECT * FROM src.compacted_segments "
                            "ON CONFLICT DO NOTHING")
            except duckdb.Error as exc:  # the ledger only hides files: without it a segment is read again,
                log.warning("prunegate store: ledger of %s unreadable (%s)", source, exc)  # deduplicated by ids
        return f"{got} spans" + (f" ({lost_groups} damaged row groups of up to {_ROW_GROUP} spans lost)"
                                 if lost_groups else "")
    finally:
        con.execute("DETACH src")


def _move_into(folder: Path, paths: Sequence[Path]) -> int:
    """Move ``paths`` into ``folder`` (made if needed); how many moved. A file already gone was taken
    by another compaction and is skipped."""
    if paths:
        folder.mkdir(exist_ok=True)
    moved = 0
    for path in paths:
        try:
            os.replace(path, folder / path.name)
            moved += 1
        except FileNotFoundError:
            pass
    return moved
