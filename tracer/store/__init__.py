"""The prunegate trace store: a directory that many processes write to and read from at once.

Layout (see docs/store.md for the whole design)::

    <store>/
      segments/*.parquet   immutable span batches, one per writer flush (atomic rename)
      tmp/                 segments being written; leftovers of killed writers, cleaned up later
      spans.duckdb         the compacted main table plus the ledger of absorbed segments
      compact.lock         flock: one compactor at a time
      readers.lock         flock: readers (shared) vs. segment deletion (exclusive)
      claims/<session>     imported sessions: flock while written, "committed" once they are

Writers append segments and never open DuckDB; ``compact()`` moves segments into ``spans.duckdb``;
``reader()`` gives a consistent snapshot over both. Queries take parameters, never formatted values.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracer.contract.settings import STORE_ENV
from tracer.errors import StoreError, StorePermissionError
from tracer.store.location import BucketURL, StoreLocation, is_bucket, local_store, resolve_store

# pyarrow loads when a Store is made, not on ``import tracer.store`` (the command line's --help and
# the settings stay cheap); DuckDB only for readers and the compactor: writers never need it.
if TYPE_CHECKING:
    import pyarrow as pa

    from tracer.store.cancel import Cancel
    from tracer.store.compact import CompactResult
    from tracer.store.reader import StoreReader
    from tracer.store.rows import SpanRow

Params = Sequence[Any] | dict[str, Any] | None

__all__ = [
    "BucketURL", "CompactResult", "Store", "StoreError", "StoreLocation", "StorePermissionError", "StoreReader",
    "is_bucket", "local_store", "resolve_store",
]

ENV_STORE = STORE_ENV  # the name tests and callers used before tracer.contract.settings


class Store:
    """A handle on a store directory. Cheap to create; touches the disk only when used.

    ``Store("s3://bucket/prefix")`` (or ``$PRUNEGATE_STORE`` naming one) gives a
    :class:`tracer.store.s3.S3Store`: the same API over a bucket."""

    def __new__(cls, path: str | os.PathLike[str] | BucketURL | None = None) -> Store:
        if cls is Store and isinstance(resolve_store(path), BucketURL):
            from tracer.store.s3 import S3Store

            return super().__new__(S3Store)
        return super().__new__(cls)

    def __init__(self, path: str | os.PathLike[str] | BucketURL | None = None) -> None:
        from tracer.store.segments import StoreLayout

        where = resolve_store(path)
        assert isinstance(where, Path)  # a bucket URL made an S3Store (__new__)
        self.path: Path = where
        self.layout = StoreLayout(self.path)
        self._ensured = False

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its path or URL (a worker rebuilds its own handle; __new__ picks the kind)."""
        return (Store, (str(self.path),))

    # -- writing ---------------------------------------------------------------------------------
    def ensure(self) -> None:
        """Create the directory tree if needed (raises OSError when the path cannot be a store)."""
        if not self._ensured:
            self.layout.ensure()
            self._ensured = True

    def write_table(self, table: pa.Table, *, fsync: bool = True) -> Path:
        """Append one Arrow table (store schema, see :mod:`tracer.store.schema`) as a new segment."""
        from tracer.store.segments import write_segment

        self.ensure()
        return write_segment(self.layout, table, fsync=fsync)

    def write_rows(self, rows: Iterable[Mapping[str, Any]], *, fsync: bool = True) -> int:
        """Append span rows (decoded form) as one segment; returns the number written."""
        from tracer.store.rows import rows_to_table

        table = rows_to_table(rows)
        if table.num_rows:
            self.write_table(table, fsync=fsync)
        return table.num_rows

    def ingest_file(self, source: Path, name: str) -> None:
        """Copy a segment-format file (a spool file) in as segment ``name`` (idempotent per name)."""
        from tracer.store.segments import ingest_file

        self.ensure()
        ingest_file(self.layout, source, name)

    # -- maintenance -----------------------------------------------------------------------------
    def compact(self, *, timeout: float = 10.0, cancel: Cancel | None = None) -> CompactResult:
        """Move segments into ``spans.duckdb`` (see :mod:`tracer.store.compact`); ``cancel`` stops it
        from another thread, the store as it was."""
        from tracer.store.compact import compact

        return compact(self.layout, timeout=timeout, cancel=cancel)

    def repair(self) -> str | None:
        """Read every block of ``spans.duckdb``; when one is damaged, rebuild it (from what can still be
        read of it, the copy from before the last compaction and the segments; see
        :func:`tracer.store.compact.rebuild`). None when it was sound, else what was done."""
        from tracer.store.compact import rebuild, verify_main

        problem = verify_main(self.layout)
        if problem is None:
            return None
        result = rebuild(self.layout, f"spans.duckdb was damaged ({problem})")
        return result.rebuilt or f"spans.duckdb is damaged ({problem}) and could not be rebuilt now: {result.busy}"

    def pending_segments(self) -> list[Path]:
        """Segment files on disk (some may already be absorbed and awaiting deletion)."""
        from tracer.store.segments import list_segments

        return list_segments(self.layout)

    def fingerprint(self, *, activity: bool = False) -> str:
        """Changes whenever the store does (a segment written or compacted away, the database
        rewritten, a sweep or saved comparison added); caches keyed by it are never stale. Stats the
        directory only, reads no data. ``activity``: ignore what is added afterwards (segments that
        hold only annotations or saved comparisons, and the comparison records), for caches of what
        sessions did: saving an annotation then re-reads the annotations only, not every session
        (a segment's span names are read once from its Parquet footer)."""
        import hashlib

        from tracer.store.records import COMPARISONS
        from tracer.store.segments import afterwards_only, list_segments

        names = [p.name for p in list_segments(self.layout) if not (activity and afterwards_only(p))]
        try:
            stat = self.layout.main.stat()
            main = f"{stat.st_mtime_ns}:{stat.st_size}"
        except OSError:
            main = "-"
        try:  # a record is renamed into its folder: the folder's time moves
            records = "-" if activity else str((self.layout.root / COMPARISONS).stat().st_mtime_ns)
        except OSError:
            records = "-"
        return hashlib.sha1("\n".join([main, records, *names]).encode()).hexdigest()

    # -- reading ---------------------------------------------------------------------------------
    def reader(self, *, attach_timeout: float = 2.0, sessions: list[str] | None = None) -> StoreReader:
        """A consistent snapshot for several queries; close it (``with``) promptly. ``sessions`` says
        the queries look only at those sessions: a bucket store then fetches only the row groups that
        may hold them (a directory's Parquet and DuckDB scans skip the rest by themselves)."""
        from tracer.store.reader import StoreReader

        return StoreReader(self.layout, attach_timeout=attach_timeout)

    def query(self, sql: str, params: Params = None) -> list[dict[str, Any]]:
        """Run one query on a fresh snapshot; rows as dicts (JSON columns as JSON text)."""
        with self.reader() as r:
            return r.query(sql, params)

    def query_arrow(self, sql: str, params: Params = None) -> pa.Table:
        """Run one query on a fresh snapshot; an Arrow table."""
        with self.reader() as r:
            return r.arrow(sql, params)

    def count(self) -> int:
        """Number of spans in the store."""
        with self.reader() as r:
            return r.count()

    def sessions(self) -> list[dict[str, Any]]:
        """One row per session (the ``sessions`` view), newest first."""
        return self.query("SELECT * FROM sessions ORDER BY start_time_ns DESC, session_id")

    def spans(self, session_id: str) -> list[SpanRow]:
        """A session's spans in event order (``seq``, then start time), JSON columns decoded."""
        rows = self.query(
            "SELECT * FROM spans WHERE session_id = ? ORDER BY seq NULLS LAST, start_time_ns, span_id",
            [session_id],
        )
        from tracer.store.rows import decode_row

        return [decode_row(r) for r in rows]

    def trace(self, trace_id: str) -> list[SpanRow]:
        """All spans of one trace in start order, JSON columns decoded."""
        rows = self.query(
            "SELECT * FROM spans WHERE trace_id = ? ORDER BY start_time_ns, span_id", [trace_id.lower()]
        )
        from tracer.store.rows import decode_row

        return [decode_row(r) for r in rows]


def __getattr__(name: str) -> Any:
    """``StoreReader`` and ``CompactResult`` load DuckDB on first use, not on ``import tracer.store``."""
    if name == "StoreReader":
        from tracer.store.reader import StoreReader

        return StoreReader
    if name == "CompactResult":
        from tracer.store.compact import CompactResult

        return CompactResult
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
