"""The store directory and its immutable segment files.

A writer turns an Arrow table into a Parquet file under ``tmp/``, fsyncs it, and renames it into
``segments/``. The rename is the commit point: a segment either exists whole or not at all, and a
writer killed mid-write leaves only a ``*.tmp`` file that readers never look at and the compactor
deletes later. Writers never open the DuckDB file, so they never wait for a lock.
"""

from __future__ import annotations

import errno
import functools
import itertools
import json
import os
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tracer.contract.names import AFTERWARDS_SPANS
from tracer.errors import StoreError, StorePermissionError
from tracer.store.locks import fsync_path, pid_alive
from tracer.store.schema import ARROW_SCHEMA, PROMOTED_NAMES, SCHEMA_VERSION


def check_writable(layout: StoreLayout) -> None:
    """Raise :class:`StorePermissionError` when this process cannot create files in the store.

    Tries for real (a file in ``tmp/`` or the root): ``os.access`` says yes to root on a
    read-only mount and cannot see every refusal."""
    where = layout.tmp if layout.tmp.is_dir() else layout.root
    probe = where / f"probe.{os.getpid()}.{secrets.token_hex(4)}{TMP_SUFFIX}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise StorePermissionError(
                f"{where}: permission denied: this process cannot write the store ({exc.strerror})"
            ) from exc
        raise
    os.close(fd)
    os.unlink(probe)


SEGMENT_SUFFIX = ".parquet"
TMP_SUFFIX = ".tmp"
MARKER = "prunegate-store.json"
_counter = itertools.count()


@dataclass(frozen=True)
class StoreLayout:
    """The paths of a store directory."""

    root: Path

    @property
    def segments(self) -> Path:
        return self.root / "segments"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    @property
    def quarantine(self) -> Path:
        return self.root / "quarantine"

    @property
    def main(self) -> Path:
        return self.root / "spans.duckdb"

    @property
    def previous(self) -> Path:
        """The database as it was before the last compaction (what ``recover`` rebuilds from)."""
        return self.root / "spans.duckdb.previous"

    @property
    def absorbed(self) -> Path:
        """Segments the last compaction moved into spans.duckdb, kept until the next one (with
        ``previous`` they rebuild a damaged spans.duckdb)."""
        return self.root / "absorbed"

    @property
    def compact_lock(self) -> Path:
        return self.root / "compact.lock"

    @property
    def readers_lock(self) -> Path:
        return self.root / "readers.lock"

    @property
    def marker(self) -> Path:
        return self.root / MARKER

    def check_version(self) -> None:
        """Raise :class:`StoreError` when the store's marker says a newer prunegate wrote it (a schema
        this version does not know: reading or writing it could lose what that version stores)."""
        try:
            text = self.marker.read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError):
            return
        except OSError as exc:
            if isinstance(exc, PermissionError):
                raise StorePermissionError(f"{self.marker}: permission denied ({exc.strerror})") from exc
            raise
        try:
            version = json.loads(text).get("schema_version")
        except (ValueError, AttributeError):
            raise StoreError(f"{self.marker}: not a prunegate store marker (damaged?); it should read "
                             f'{{"format": "prunegate-store", "schema_version": {SCHEMA_VERSION}}}') from None
        if not isinstance(version, int) or isinstance(version, bool) or version > SCHEMA_VERSION or version < 1:
            raise StoreError(f"{self.root}: store schema {version!r}, this prunegate reads 1 to {SCHEMA_VERSION} "
                             "(written by a newer prunegate? upgrade it)")

    def ensure(self) -> None:
        """Create the directory tree (idempotent, safe to race with other processes)."""
        self.check_version()
        self.segments.mkdir(parents=True, exist_ok=True)
        self.tmp.mkdir(exist_ok=True)
        if not self.marker.exists():
            tmp = self.tmp / f"marker.{os.getpid()}.{secrets.token_hex(4)}{TMP_SUFFIX}"
            tmp.write_text(f'{{"format": "prunegate-store", "schema_version": {SCHEMA_VERSION}}}\n')
            os.replace(tmp, self.marker)


def new_segment_name(prefix: str = "") -> str:
    """A unique, time-ordered segment name: ``<ns>-<pid>-<n>-<random>.parquet``."""
    return f"{prefix}{time.time_ns():020d}-{os.getpid()}-{next(_counter):06d}-{secrets.token_hex(4)}{SEGMENT_SUFFIX}"


# Segments live minutes: write them cheaply. Dictionary-encode only the low-cardinality columns and
# keep statistics only where a reader filters (about half the CPU of pyarrow's defaults).
_DICTIONARY_COLUMNS = ["name", "kind", "status_code", "resource", "scope_name", "scope_version", "session_id",
                       "events", "links"]  # fmt: skip
_STATISTICS_COLUMNS = ["start_time_ns", "end_time_ns", "session_id", "seq", "trace_id", "name"]


def write_parquet(table: pa.Table, path: Path) -> None:
    """Write a store-schema table as a Parquet file (no fsync, no rename: see write_segment)."""
    pq.write_table(
        table,
        str(path),
        compression="snappy",
        use_dictionary=_DICTIONARY_COLUMNS,
        write_statistics=_STATISTICS_COLUMNS,
        write_page_checksum=True,  # readers verify every page (tracer.store.verify)
    )


def _tmp_path(layout: StoreLayout, name: str) -> Path:
    return layout.tmp / f"{name}.{os.getpid()}{TMP_SUFFIX}"


def _publish(layout: StoreLayout, tmp: Path, name: str, fsync: bool) -> Path:
    final = layout.segments / name
    if fsync:
        fsync_path(tmp)
    os.rename(tmp, final)  # the commit point
    if fsync:
        fsync_path(layout.segments)
    return final


def write_segment(
    layout: StoreLayout, table: pa.Table, *, name: str | None = None, fsync: bool = True
) -> Path:
    """Write ``table`` as one new segment, atomically. Raises OSError on any filesystem failure."""
    if table.schema != ARROW_SCHEMA:
        table = table.cast(ARROW_SCHEMA)
    name = name or new_segment_name()
    tmp = _tmp_path(layout, name)
    try:
        write_parquet(table, tmp)
        final = _publish(layout, tmp, name, fsync)
    except BaseException:
        _unlink_quietly(tmp)
        raise
    from tracer.store.verify import vouch

    vouch(final, table.num_rows)  # this process wrote it whole: its readers need not read it through
    return final


def ingest_file(layout: StoreLayout, source: Path, name: str, *, fsync: bool = True) -> Path:
    """Copy an existing segment-format Parquet file (e.g. a spool file) in as segment ``name``.

    The same ``name`` for the same source makes a retried ingest idempotent: the compactor's
    ledger remembers names it has already absorbed.
    """
    tmp = _tmp_path(layout, name)
    try:
        shutil.copyfile(source, tmp)
        return _publish(layout, tmp, name, fsync)
    except BaseException:
        _unlink_quietly(tmp)
        raise


def list_segments(layout: StoreLayout) -> list[Path]:
    """Committed segments, oldest first (names start with a nanosecond timestamp)."""
    try:
        names = [e.name for e in os.scandir(layout.segments) if e.name.endswith(SEGMENT_SUFFIX)]
    except FileNotFoundError:
        return []
    return [layout.segments / n for n in sorted(names)]


@functools.lru_cache(maxsize=4096)
def _afterwards_only(path: Path, size: int, mtime_ns: int) -> bool:
    meta = pq.read_metadata(str(path))
    if meta.num_rows == 0:
        return True
    try:
        column = meta.schema.names.index("name")
    except ValueError:
        return False
    for i in range(meta.num_row_groups):
        stats = meta.row_group(i).column(column).statistics
        if stats is None or not stats.has_min_max or stats.min != stats.max or stats.min not in AFTERWARDS_SPANS:
            return False
    return True


def afterwards_only(path: Path) -> bool:
    """Whether every span of a committed segment is one added afterwards (an annotation or a saved
    comparison, :data:`tracer.contract.names.AFTERWARDS_SPANS`), from its Parquet footer's statistics
    of the span names (no data read; remembered per file: a committed segment never changes). False
    when it cannot tell (no statistics, or the file is gone)."""
    try:
        st = path.stat()
        return _afterwards_only(path, st.st_size, st.st_mtime_ns)
    except (OSError, ValueError):
        return False


def segment_rows(path: Path) -> int:
    """Row count from the Parquet footer (no data read)."""
    return pq.read_metadata(str(path)).num_rows


def segment_footer(path: Path) -> tuple[int, bool]:
    """Row count, and whether the segment has the promoted columns (schema 2; a segment written
    before has only the JSON attributes), from the Parquet footer (no data read)."""
    meta = pq.read_metadata(str(path))
    return meta.num_rows, set(PROMOTED_NAMES) <= set(meta.schema.names)


def clean_tmp(layout: StoreLayout, *, min_age: float = 60.0, max_age: float = 86400.0) -> int:
    """Delete temp files left by dead writers; returns how many were removed.

    A temp file is removed when its writer's pid is gone and it is older than ``min_age`` seconds,
    or whatever its pid when it is older than ``max_age`` (pids get reused).
    """
    removed = 0
    now = time.time()
    try:
        entries = list(os.scandir(layout.tmp))
    except FileNotFoundError:
        return 0
    for entry in entries:
        name = entry.name.removesuffix(".wal")  # the WAL of a compactor's new database goes with it
        if not name.endswith(TMP_SUFFIX):
            continue
        try:
            age = now - entry.stat().st_mtime
        except FileNotFoundError:
            continue
        pid_text = name[: -len(TMP_SUFFIX)].rsplit(".", 1)[-1]
        pid = int(pid_text) if pid_text.isdigit() else -1
        if age > max_age or (age > min_age and not pid_alive(pid)):
            if _unlink_quietly(Path(entry.path)):
                removed += 1
    return removed


def _unlink_quietly(path: Path) -> bool:
    try:
        if path.is_dir() and not path.is_symlink():  # a compactor's swap directory (tracer.store.compact)
            shutil.rmtree(path)
        else:
            os.unlink(path)
        return True
    except OSError:
        return False
