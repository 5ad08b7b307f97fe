"""Reading a segment through before trusting it: every page, the schema, the JSON text.

A Parquet footer can be whole while pages are damaged (random bytes a third of the way in), the
file can be Parquet of another schema, or JSON columns can hold text that is not JSON. Any of
those used to make every query over the store fail with a traceback. :func:`verify_segment` reads
the file once (every page, with its CRC when the writer stored one: prunegate's segments carry
them), checks the columns against the store schema and that each JSON value parses (a lone
surrogate escape counts as parseable: readers repair it, see :mod:`tracer.store.text`). Readers
skip a segment that fails, with one warning naming it, and compaction quarantines it. Segments
are immutable, so a process verifies each file once (keyed by name, size and mtime).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tracer.errors import SegmentDamaged
from tracer.store.schema import ARROW_SCHEMA, JSON_COLUMNS, PROMOTED_NAMES, safe_json

__all__ = ["SegmentDamaged", "verify_segment", "vouch"]

_REQUIRED = {f.name: f.type for f in ARROW_SCHEMA if f.name not in PROMOTED_NAMES}
_PROMOTED = {f.name: f.type for f in ARROW_SCHEMA if f.name in PROMOTED_NAMES}
_lock = threading.Lock()
_seen: dict[tuple[str, int, int], tuple[int, bool]] = {}


def _key(path: Path) -> tuple[str, int, int]:
    st = os.stat(path)
    return str(path), st.st_size, st.st_mtime_ns


def vouch(path: Path, rows: int) -> None:
    """Record a segment this process has just written itself as verified (no need to read it back)."""
    try:
        key = _key(path)
    except OSError:
        return
    with _lock:
        _seen[key] = (rows, True)


def verify_segment(path: Path) -> tuple[int, bool]:
    """Row count and whether the segment has the promoted columns (schema 2), once every page,
    the schema and the JSON have been checked. Raises :class:`SegmentDamaged` (or OSError)."""
    key = _key(path)
    with _lock:
        hit = _seen.get(key)
    if hit is not None:
        return hit
    try:
        pf = pq.ParquetFile(str(path), page_checksum_verification=True)
    except (pa.ArrowException, OSError) as exc:
        if isinstance(exc, (FileNotFoundError, PermissionError)):
            raise
        raise SegmentDamaged(f"not a readable Parquet file: {exc}") from exc
    schema = pf.schema_arrow
    names = set(schema.names)
    missing = sorted(set(_REQUIRED) - names)
    if missing:
        raise SegmentDamaged(f"not a prunegate segment: no column {', '.join(missing)}")
    for name, want in {**_REQUIRED, **_PROMOTED}.items():
        if name in names and not _compatible(schema.field(name).type, want):
            raise SegmentDamaged(f"column {name} is {schema.field(name).type}, the store's is {want}")
    current = set(_PROMOTED) <= names
    columns = list(_REQUIRED) + [n for n in _PROMOTED if n in names]
    rows = 0
    for group in range(pf.num_row_groups):
        try:
            table = pf.read_row_group(group, columns=columns)
            table.validate(full=True)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise SegmentDamaged(f"row group {group}: {exc}") from exc
        bad = _bad_json(table)
        if bad:
            raise SegmentDamaged(f"row group {group}: {bad}")
        rows += table.num_rows
    with _lock:
        _seen[key] = (rows, current)
    return rows, current


def _compatible(got: pa.DataType, want: pa.DataType) -> bool:
    if pa.types.is_dictionary(got):
        got = got.value_type
    if pa.types.is_large_string(got) or pa.types.is_string_view(got):
        got = pa.string()
    return got == want or (pa.types.is_null(got))


_local = threading.local()
_JSON_CHECKS = ", ".join(
    f"count(*) FILTER (WHERE {c} IS NOT NULL AND {safe_json(c, 'null')} = 'null'::JSON AND {c} <> 'null')"
    for c in sorted(JSON_COLUMNS))


def _connection() -> Any:
    """This thread's in-memory DuckDB connection for the JSON check. Kept: opening one costs about
    40 ms, several times the check of a 2,000-span segment, and a reader over 50 new segments paid
    it 50 times (DuckDB connections are not shared between threads, nor with a forked child: compare's
    workers may be forked, so one opened before the fork is left alone)."""
    held = getattr(_local, "held", None)
    if held is None or held[0] != os.getpid():
        import duckdb

        held = _local.held = (os.getpid(), duckdb.connect(":memory:"))
    return held[1]


def _bad_json(table: pa.Table) -> str | None:
    """Which JSON column holds text that is not JSON (even once lone surrogate escapes are replaced)."""
    con = _connection()
    con.register("_segment", table)
    try:
        row = con.execute(f"SELECT {_JSON_CHECKS} FROM _segment").fetchall()[0]
    finally:
        con.unregister("_segment")
    for column, n in zip(sorted(JSON_COLUMNS), row or (), strict=True):
        if n:
            return f"{n} values of {column} are not JSON"
    return None

