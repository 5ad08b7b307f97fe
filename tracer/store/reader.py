"""A consistent, read-only snapshot of the store for queries.

A reader is a private connection (a cursor) of the process's one in-memory reader database. On open it
1. takes ``readers.lock`` shared (so no compactor deletes a segment it is about to read),
2. lists ``segments/``,
3. ATTACHes ``spans.duckdb`` READ_ONLY under a name of its own (:attr:`StoreReader.db`), retrying
   while a compactor holds it, bounded,
4. drops from its list every segment the attached database says it has already absorbed,
5. defines its temp view ``spans`` = main table UNION ALL the remaining segments; the views over
   ``spans`` (:data:`tracer.store.schema.VIEWS`) are the database's, defined once, and bind to the
   querying connection's own ``spans`` when a query runs.
Why one database: opening a DuckDB database costs about 12 ms and binding the six views about 20 ms,
two thirds of a reader's open, and a dashboard page opens several readers; a cursor costs nothing.
Listing before attaching is what makes compaction invisible: a segment absorbed before the attach
is in the ledger (so it is read from the table only); one absorbed after cannot be, because the
compactor cannot open the file for writing while we have it attached. Hold a reader briefly:
while it is open, compaction waits (writers do not).
"""

from __future__ import annotations

import itertools
import logging
import os
import random
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from tracer.errors import StoreError
from tracer.store import catalog
from tracer.store.compact import damaged, is_damage, is_lock_error
from tracer.store.locks import FileLock
from tracer.store.schema import COLUMN_NAMES, COLUMNS, PROMOTED_NAMES, VIEWS, empty_select, select_list
from tracer.store.segments import StoreLayout, list_segments
from tracer.store.verify import SegmentDamaged, verify_segment

__all__ = ["StoreError", "StoreReader", "Params"]

log = logging.getLogger(__name__)

Params = Sequence[Any] | dict[str, Any] | None
_LOGGED: set[str] = set()  # damaged files already logged by this process (the dashboard reads often)


# The process's reader database (see the module's docstring), the lock guarding it, the databases a
# forked child inherited (kept, never closed there), and each reader's attach name.
_SHARED: duckdb.DuckDBPyConnection | None = None
_SHARED_LOCK = threading.Lock()
_INHERITED: list[duckdb.DuckDBPyConnection] = []
_NAMES = itertools.count(1)  # attached databases are the database's, not a connection's: one name per reader


def _after_fork() -> None:
    """A forked child (compare's workers may be forked) opens its own database: its parent's is not
    usable there (and is kept, not closed: destroying it in the child crashes the child), and the lock
    may have been held by a thread the child does not have."""
    global _SHARED, _SHARED_LOCK
    if _SHARED is not None:
        _INHERITED.append(_SHARED)
    _SHARED, _SHARED_LOCK = None, threading.Lock()


os.register_at_fork(after_in_child=_after_fork)


def _connection() -> duckdb.DuckDBPyConnection:
    """A new connection to this process's reader database, creating the database (and its views over
    a placeholder ``spans``, which every reader's temp view of that name hides) on first use."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            con = duckdb.connect(":memory:")
            con.execute(f"CREATE TABLE spans AS SELECT *, 0::BIGINT AS duration_ns FROM ({empty_select()}) WHERE false")
            for name, sql in VIEWS:
                con.execute(f"CREATE VIEW {name} AS {sql}")
            _SHARED = con
        return _SHARED.cursor()


def _discard_shared(reason: str) -> None:
    """Open the next readers on a new database: this one failed in a way that may have left it unusable
    (DuckDB invalidates a database after a fatal error) or holding a store's file. The readers still
    open on it keep it until they close."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is not None:
            log.warning("prunegate store reader: a new reader database from now on: %s", reason)
            _SHARED = None


_PENDING_SESSIONS_MAX = 256


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _paths_sql(paths: list[str]) -> str:
    return "[" + ", ".join(map(_literal, paths)) + "]"


# A version 1 segment's columns, with the promoted ones NULL until derived (see _define_views).
_LEGACY_SELECT = ", ".join(
    name if name not in PROMOTED_NAMES else f"CAST(NULL AS {sql_type}) AS {name}" for name, sql_type, _ in COLUMNS
)


class StoreReader:
    """Query the unified views of one store snapshot. Use as a context manager."""

    db = "store"  # the attached spans.duckdb's name in SQL; each reader of a store sets its own
    catalog = False  # spans.duckdb holds the session catalog compaction keeps (tracer.store.catalog)
    _views = False  # the views over spans are defined (not on every subclass: a bucket reader has its own)
    _catalog_defined = False

    def __init__(self, layout: StoreLayout, *, attach_timeout: float = 2.0) -> None:
        self.layout = layout
        self.complete = True
        self.main_attached = False
        self.warnings: list[str] = []
        self.pending_segments: list[Path] = []
        self.damaged_segments: list[Path] = []
        self.legacy_segments: list[Path] = []  # written before schema 2: promoted columns derived on read
        self._main_legacy = False
        self._lock = FileLock(layout.readers_lock, shared=True)
        self.db = f"store_{next(_NAMES)}"
        self.con = _connection()
        try:
            self._open(attach_timeout)
        except duckdb.Error as exc:  # a damaged spans.duckdb (a block failing its checksum) and the like
            self.close()
            raise self.failed(exc) from exc
        except BaseException:
            self.close()
            raise

    # -- setup -------------------------------------------------------------------------------
    def _warn(self, message: str, *, once_key: str | None = None) -> None:
        """Record a warning on this snapshot; log it (once per process for ``once_key``)."""
        self.warnings.append(message)
        if once_key is not None:
            if once_key in _LOGGED:
                return
            _LOGGED.add(once_key)
        log.warning("prunegate store %s: %s", self.layout.root, message)

    def _open(self, attach_timeout: float) -> None:
        deadline = time.monotonic() + attach_timeout
        self.layout.check_version()
        if not self.layout.root.exists():
            self._warn("store directory does not exist yet; no spans")
        elif not self._lock.acquire(attach_timeout):
            self._warn("could not take readers.lock; a compactor is deleting segments, retry")
            self.complete = False
        segments = list_segments(self.layout)
        absorbed = self._attach_main(deadline, [p.name for p in segments])
        self.pending_segments, self.damaged_segments = self._readable(
            [p for p in segments if p.name not in absorbed]
        )
        self._define_views()

    def _readable(self, paths: list[Path]) -> tuple[list[Path], list[Path]]:
        """Split segments into readable ones and damaged ones (skipped, one warning each naming the
        file: the other segments stay visible; ``prunegate compact`` moves damaged ones to quarantine/)."""
        good, bad = [], []
        for path in paths:
            try:
                _, current = verify_segment(path)
            except FileNotFoundError:
                continue  # deleted by a compactor after we listed it: absorbed, so in the table
            except PermissionError as exc:
                bad.append(path)
                self.complete = False
                self._warn(f"skipping segment {path}: permission denied ({exc.strerror})", once_key=str(path))
            except (SegmentDamaged, OSError) as exc:  # truncated, zero bytes, not Parquet, damaged pages, ...
                bad.append(path)
                self.complete = False
                self._warn(
                    f"skipping unreadable segment {path}: {exc}; `prunegate compact` quarantines it",
                    once_key=str(path),
                )
            else:
                good.append(path)
                if not current:
                    self.legacy_segments.append(path)
        return good, bad

    def _attach_main(self, deadline: float, names: list[str]) -> set[str]:
        main = self.layout.main
        if not main.exists():
            return set()
        delay = 0.005
        while True:
            try:
                self.con.execute(f"ATTACH ? AS {self.db} (READ_ONLY)", [str(main)])
                break
            except duckdb.Error as exc:
                if is_damage(exc):
                    raise damaged(self.layout, exc) from exc
                if not is_lock_error(exc):
                    raise StoreError(f"{main}: cannot open the store database: {exc}") from exc
                if time.monotonic() >= deadline:
                    self.complete = False
                    self._warn(
                        "spans.duckdb is locked by another process (a compactor?); "
                        "showing only spans not yet compacted"
                    )
                    return set()
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 0.1) * (0.5 + random.random())
        has_tables = self._scalar(
            f"SELECT count(*) FROM duckdb_tables() WHERE database_name = '{self.db}' "
            "AND table_name IN ('spans', 'compacted_segments')"
        )
        if has_tables < 2:
            return set()
        self.main_attached = True
        self.catalog = self._scalar(
            f"SELECT count(*) FROM {self.db}.store_meta WHERE key = '" + catalog.META_KEY + "' AND value = '"
            + catalog.CATALOG_VERSION + "'") == 1
        present = self._scalar(
            f"SELECT count(*) FROM duckdb_columns() WHERE database_name = '{self.db}' AND table_name = 'spans' "
            f"AND list_contains({list(PROMOTED_NAMES)!r}, column_name)"
        )
        self._main_legacy = present < len(PROMOTED_NAMES)  # not yet upgraded by a compaction
        rows = self.con.execute(
            f"SELECT name FROM {self.db}.compacted_segments WHERE list_contains(?::VARCHAR[], name)", [names]
        ).fetchall()
        return {r[0] for r in rows}

    def _define_views(self) -> None:
        con = self.con
        if self.main_attached:
            con.execute(f"CREATE TEMP VIEW _main_spans AS SELECT {select_list(derive=self._main_legacy)} "
                        f"FROM {self.db}.spans")
        else:
            con.execute(f"CREATE TEMP VIEW _main_spans AS {empty_select()}")
        if self.pending_segments:
            legacy = set(self.legacy_segments)
            current = [str(p) for p in self.pending_segments if p not in legacy]
            old = [str(p) for p in self.pending_segments if p in legacy]
            parts = []
            for name, files, legacy_files in (("_current_files", current, False), ("_legacy_files", old, True)):
                if files:  # TEMP: a relation's create_view would be seen by every reader of the database
                    con.execute(f"CREATE TEMP VIEW {name} AS SELECT * FROM read_parquet({_paths_sql(files)}, "
                                "union_by_name = true)")
                    parts.append(f"SELECT {_LEGACY_SELECT if legacy_files else '*'}, {legacy_files} AS _legacy FROM {name}")
            # Version 1 rows get their promoted columns derived after the dedupe below, so a query's
            # filter (on name, session) is applied before any attribute is parsed.
            con.execute("CREATE TEMP VIEW _segment_files AS " + " UNION ALL BY NAME ".join(parts))
            # Spans have ids: a span stored twice (a retried spool recovery, two imports racing) is
            # shown once, here as in compaction.
            anti_join = ""
            if self.main_attached:
                scope = self._pending_sessions()
                only = f"m.session_id IN ({', '.join(map(_literal, scope))}) AND " if scope else ""
                anti_join = (f"WHERE NOT EXISTS (SELECT 1 FROM {self.db}.spans m WHERE {only}"
                             "m.trace_id = f.trace_id AND m.span_id = f.span_id)")
            con.execute(
                f"CREATE TEMP VIEW _segment_spans AS SELECT {select_list(cast_json=True, derive='_legacy')} FROM ("
                f"SELECT DISTINCT ON (trace_id, span_id) * FROM _segment_files f {anti_join})"
            )
        else:
            con.execute(f"CREATE TEMP VIEW _segment_spans AS {empty_select()}")
        con.execute(
            "CREATE TEMP VIEW spans AS SELECT *, end_time_ns - start_time_ns AS duration_ns FROM "
            "(SELECT * FROM _main_spans UNION ALL SELECT * FROM _segment_spans)"
        )
        self._views = True

    def _pending_sessions(self) -> list[str] | None:
        """The sessions of the pending segments' spans, when the check for spans stored twice can be
        limited to the database's rows of those sessions (None: it reads every row's ids).

        Why: that check ran in every query over ``spans``, and read the ids of every span in the
        database (34 of 35 ms for one session's spans at 10,024 sessions, 10 annotations pending);
        the database's rows of a few sessions are found by their row groups' statistics. A span stored
        twice is the same span, so the same session. Not limited when a pending span has no session
        (or its session is derived after this, in a version 1 segment), the database's session column
        is not there yet, or the sessions are many (their list would cost more than it saves)."""
        if self._main_legacy or self.legacy_segments:
            return None
        rows = self.con.execute(
            "SELECT DISTINCT session_id FROM _segment_files LIMIT " + str(_PENDING_SESSIONS_MAX + 1)).fetchall()
        sessions = [r[0] for r in rows]
        if not sessions or None in sessions or len(sessions) > _PENDING_SESSIONS_MAX:
            return None
        return sessions

    @property
    def catalog_views(self) -> bool:
        """Whether this reader serves ``catalog_sessions``, ``catalog_counts``, ``catalog_roots`` and
        ``catalog_search`` (:func:`tracer.store.catalog.views`). They are defined on first ask: binding
        them costs tens of milliseconds per reader, and most readers (one session's steps, one
        violation) never read them."""
        if self._views and not self._catalog_defined:
            files = ("_segment_files" if self.pending_segments
                     and self._scalar(catalog.pending_activity_sql("_segment_files")) else None)
            for name, sql in catalog.views(self.catalog, "_segment_spans", files, db=self.db):
                self.con.execute(f"CREATE TEMP VIEW {name} AS {sql}")
            self._catalog_defined = True
        return self._views

    # -- queries -------------------------------------------------------------------------------
    def arrow(self, sql: str, params: Params = None) -> pa.Table:
        """Run ``sql`` (with ``?`` or ``$name`` parameters) and return an Arrow table."""
        try:
            return self.con.sql(sql, params=params).to_arrow_table()
        except duckdb.Error as exc:
            raise self.failed(exc) from exc

    def query(self, sql: str, params: Params = None) -> list[dict[str, Any]]:
        """Run ``sql`` and return rows as dicts (JSON columns stay JSON text)."""
        try:
            result = self.con.execute(sql, params) if params is not None else self.con.execute(sql)
            names = [d[0] for d in result.description or ()]
            return [dict(zip(names, row, strict=True)) for row in result.fetchall()]
        except duckdb.Error as exc:
            raise self.failed(exc) from exc

    def failed(self, exc: BaseException) -> StoreError:
        """The one-line error for a failed query: a damaged spans.duckdb names ``prunegate recover``."""
        if isinstance(exc, duckdb.FatalException):
            _discard_shared(f"{type(exc).__name__}: {exc}")
        if is_damage(exc):
            return damaged(self.layout, exc)
        return StoreError(f"{self.layout.root}: query failed: {exc}")

    def count(self) -> int:
        """Number of spans visible in this snapshot."""
        return int(self._scalar("SELECT count(*) FROM spans"))

    def _scalar(self, sql: str) -> Any:
        row = self.con.execute(sql).fetchone()
        return row[0] if row is not None else None

    @property
    def columns(self) -> tuple[str, ...]:
        return COLUMN_NAMES

    # -- lifetime ------------------------------------------------------------------------------
    def close(self) -> None:
        """Detach and release the shared lock; lets a waiting compactor proceed."""
        try:
            self._detach()
        finally:
            try:
                self.con.close()
            finally:
                self._lock.release()

    def _detach(self) -> None:
        try:
            self.con.execute(f"DETACH DATABASE IF EXISTS {self.db}")
        except duckdb.Error as exc:  # left attached, it would hold spans.duckdb open in this process
            _discard_shared(f"{self.layout.root}: cannot detach {self.db}: {exc}")

    def __enter__(self) -> StoreReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
