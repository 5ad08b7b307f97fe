"""The store's segments on an S3-compatible bucket: PUT-only writers, day partitions, idempotent compaction.

Why: past one machine the store lives where every host can reach it. Object storage has no
``flock`` and no atomic rename, but a PUT is atomic (an object exists whole or not at all) and
spans have ids, which is all the local design really relies on:

- **writers** PUT immutable segments (the same Parquet files as ``segments/``) under
  ``segments/day=YYYY-MM-DD/<ns>-<host>-<pid>-<random>.parquet``: one object per day a batch
  touches, rows sorted by session; no locks, no renames, names never clash;
- **compaction** (:meth:`BucketStore.compact`, one job per day) reads a day's segments and earlier
  compacted files, keeps each ``(trace_id, span_id)`` once, sorts by session and ``seq``, PUTs
  ``compacted/day=D/<hash of its inputs>.parquet``, then deletes its inputs. Killed at any point
  and run again, it reads what is left and writes the same rows: idempotent;
- **readers** list only the days they are asked for (partition pruning), GET those objects and show
  each ``(trace_id, span_id)`` once (a segment and the compacted file holding it, listed in the
  same snapshot, are the same spans), with the same views as the local store. A reader of given
  sessions (:meth:`BucketStore.reader` with ``sessions=``) reads only Parquet footers (ranged GETs
  of each object's tail, cached: objects are immutable) and then only the row groups whose
  ``session_id`` statistics can hold them: objects are sorted by session and written in row groups
  of :data:`ROW_GROUP_ROWS` rows, so one session is usually one ranged GET.

A reader that lists a segment which a compaction deletes before the GET retries with a fresh
listing (the compacted file then holds those spans).
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import secrets
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tracer.store.object_cache import ObjectCache
from tracer.store.schema import ARROW_SCHEMA, PROMOTED_NAMES, VIEWS, empty_select, select_list

log = logging.getLogger(__name__)

SEGMENTS, COMPACTED = "segments/", "compacted/"
ROW_GROUP_ROWS = 1024  # rows per row group of every object: the unit a one-session read fetches
_STATISTICS = ["session_id", "trace_id", "start_time_ns", "seq", "name"]  # what readers prune on
_FOOTER_BYTES = 32 << 10  # the ranged GET of an object's tail that usually holds its whole footer


class _Ranged(io.RawIOBase):
    """An object read by ranged GETs, as pyarrow's Parquet reader asks for its row groups: each
    ``read`` is one GET of exactly the bytes asked for (the footer is read by :func:`_footer`)."""

    def __init__(self, store: BucketStore, key: str, size: int) -> None:
        self.store, self.key, self.size, self.pos = store, key, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self.pos = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence] + offset
        return self.pos

    def read(self, n: int = -1) -> bytes:
        end = self.size if n is None or n < 0 else min(self.size, self.pos + n)
        if end <= self.pos:
            return b""
        data = self.range(self.pos, end)
        self.pos += len(data)
        return data

    def range(self, start: int, end: int) -> bytes:
        got = self.store.client.get_object(Bucket=self.store.bucket, Key=self.key, Range=f"bytes={start}-{end - 1}")
        return bytes(got["Body"].read())


def _footer(obj: _Ranged) -> Any:
    """An object's Parquet footer (FileMetaData) from one ranged GET of its tail (two when the footer
    is larger than ``_FOOTER_BYTES``), not pyarrow's 64 KiB speculative read."""
    tail = obj.range(max(0, obj.size - _FOOTER_BYTES), obj.size)
    length = int.from_bytes(tail[-8:-4], "little")
    if tail[-4:] != b"PAR1" or length + 8 > obj.size:
        raise ValueError(f"{obj.key}: not a Parquet file (no footer)")
    if length + 8 > len(tail):
        tail = obj.range(obj.size - length - 8, obj.size)
    return pq.read_metadata(pa.BufferReader(b"PAR1" + tail[-(length + 8):]))  # offsets stay the object's


def _may_hold(stats: Any, wanted: list[str]) -> bool:
    """Whether a row group whose session_id statistics are ``stats`` can hold one of ``wanted``."""
    if stats is None or not stats.has_min_max:
        return True
    return any(stats.min <= sid <= stats.max for sid in wanted)


def day_of(ns: int) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(ns // 10**9))


def current_table(table: pa.Table) -> pa.Table:
    """``table`` in the current schema: an object written before schema 2 gets its promoted columns
    from its attributes (schema.derived); compaction PUTs the result, so the day is upgraded once."""
    if set(PROMOTED_NAMES) <= set(table.column_names):
        return table
    con = duckdb.connect()
    try:
        con.register("t", table)
        return con.sql(f"SELECT {select_list(derive=True)} FROM t").to_arrow_table().cast(ARROW_SCHEMA)
    finally:
        con.close()


@dataclass
class BucketCompaction:
    """What one :meth:`BucketStore.compact` call did for one day."""

    day: str
    inputs: int  # objects read
    rows: int  # rows written (each span once)
    written: str | None  # the compacted object's key, None when there was nothing to do
    deleted: int
    new_rows: int = 0  # rows read from segments (not from earlier compacted files)
    duplicates: int = 0  # rows of the inputs dropped as copies of a span already kept


class BucketStore:
    """The trace store on ``bucket`` (under ``prefix``) of an S3 client (``boto3.client("s3", ...)``).

    ``requests`` counts the HTTP requests this object's client has sent and ``bytes_read`` the bytes
    its GETs returned (for sizing; a client shared by two stores counts for both)."""

    def __init__(self, client: Any, bucket: str, prefix: str = "", cache: ObjectCache | None = None) -> None:
        self.client, self.bucket, self.prefix = client, bucket, prefix
        self.cache = cache  # local copies of the objects whole-object reads downloaded (object_cache.py)
        self.requests = 0
        self.bytes_read = 0
        self._footers: dict[str, Any] = {}  # key -> pq.FileMetaData (objects never change)
        client.meta.events.register("before-send.s3.*", self._count)
        client.meta.events.register("after-call.s3.GetObject", self._count_bytes)

    def _count(self, **_: Any) -> None:
        self.requests += 1

    def _count_bytes(self, parsed: Any = None, **_: Any) -> None:
        self.bytes_read += int((parsed or {}).get("ContentLength") or 0)

    # -- writing -------------------------------------------------------------------------------
    def write_table(self, table: pa.Table) -> list[str]:
        """PUT ``table`` (rows in the store schema) as one segment per day it touches; the keys."""
        if table.num_rows == 0:
            return []
        days = [day_of(ns) for ns in table.column("start_time_ns").to_pylist()]
        table = table.append_column("_day", pa.array(days))
        keys = []
        for day in sorted(set(days)):
            part = table.filter(pc.equal(table.column("_day"), day)).drop_columns(["_day"])
            part = part.sort_by([("session_id", "ascending"), ("seq", "ascending"), ("start_time_ns", "ascending")])
            key = (f"{self.prefix}{SEGMENTS}day={day}/{time.time_ns()}-{socket.gethostname()}-{os.getpid()}-"
                   f"{secrets.token_hex(4)}.parquet")
            self._put(key, part)
            keys.append(key)
        return keys

    def _put(self, key: str, table: pa.Table) -> None:
        buf = io.BytesIO()
        pq.write_table(table, buf, compression="zstd", row_group_size=ROW_GROUP_ROWS, write_statistics=_STATISTICS)
        self.client.put_object(Bucket=self.bucket, Key=key, Body=buf.getvalue())

    # -- listing and reading -------------------------------------------------------------------
    def days(self) -> list[str]:
        """Days that have segments or compacted files (one LIST per area)."""
        out: set[str] = set()
        for area in (SEGMENTS, COMPACTED):
            for page in self._pages(f"{self.prefix}{area}", delimiter="/"):
                for p in page.get("CommonPrefixes", []):
                    out.add(p["Prefix"].rstrip("/").rsplit("day=", 1)[1])
        return sorted(out)

    def keys(self, day: str) -> list[str]:
        """A day's objects: compacted files first, then segments."""
        return [key for key, _ in self.objects(day)]

    def objects(self, day: str) -> list[tuple[str, int]]:
        """A day's objects and their sizes (one LIST per area)."""
        out: list[tuple[str, int]] = []
        for area in (COMPACTED, SEGMENTS):
            for page in self._pages(f"{self.prefix}{area}day={day}/"):
                out.extend((o["Key"], int(o["Size"])) for o in page.get("Contents", [])
                           if o["Key"].endswith(".parquet"))
        return out

    def _pages(self, prefix: str, delimiter: str | None = None) -> Iterable[dict[str, Any]]:
        kw = {"Bucket": self.bucket, "Prefix": prefix, **({"Delimiter": delimiter} if delimiter else {})}
        return self.client.get_paginator("list_objects_v2").paginate(**kw)

    def _get(self, key: str, size: int, *, keep: bool = True) -> pa.Table:
        """One whole object as a table: the local copy when there is a good one, else a GET (kept
        unless ``keep`` is False)."""
        cache = self.cache
        if cache is not None:
            data = cache.get(self.bucket, key, size)
            if data is not None:
                try:
                    return current_table(pq.read_table(io.BytesIO(data)))
                except (pa.ArrowException, OSError) as exc:  # a damaged copy: the bucket's is the truth
                    log.warning("prunegate: dropping a damaged cached copy of s3://%s/%s: %s", self.bucket, key, exc)
                    cache.drop(self.bucket, key)
        body = self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        table = current_table(pq.read_table(io.BytesIO(body)))
        if cache is not None and keep:  # only what parsed is kept
            cache.put(self.bucket, key, body)
        return table

    def _sessions_of(self, key: str, size: int, sessions: list[str]) -> pa.Table | None:
        """The row groups of one object that may hold ``sessions`` (footer statistics), by ranged GETs."""
        obj = _Ranged(self, key, size)
        meta = self._footers.get(key)
        if meta is None:
            meta = self._footers[key] = _footer(obj)
        col = meta.schema.names.index("session_id")
        groups = [i for i in range(meta.num_row_groups) if _may_hold(meta.row_group(i).column(col).statistics, sessions)]
        if not groups:
            return None
        pf = pq.ParquetFile(pa.PythonFile(obj, mode="r"), metadata=meta, pre_buffer=True)
        return current_table(pf.read_row_groups(groups))

    def read_day(self, day: str, *, attempts: int = 3, sessions: list[str] | None = None) -> pa.Table | None:
        """Every object of ``day`` as one table (duplicates not yet removed), or None. With ``sessions``,
        only the row groups that may hold them (footers and ranged GETs, not whole objects)."""
        for attempt in range(attempts):
            try:
                if sessions is None:
                    tables = [self._get(k, size) for k, size in self.objects(day)]
                else:
                    tables = [t for k, size in self.objects(day)
                              if (t := self._sessions_of(k, size, sessions)) is not None]
                break
            except self.client.exceptions.NoSuchKey:
                if attempt == attempts - 1:
                    raise
        return pa.concat_tables(tables, promote_options="default") if tables else None

    def reader(self, days: Iterable[str] | None = None,
               sessions: Iterable[str] | None = None) -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB connection with ``spans`` and the store's views over ``days`` (all by
        default); with ``sessions``, holding at least those sessions' spans (read by ranged GETs of the
        row groups that may hold them: filter on ``session_id`` in the query)."""
        wanted = self.days() if days is None else sorted(set(days))
        only = sorted(set(sessions)) if sessions is not None else None
        tables = [t for t in (self.read_day(d, sessions=only) for d in wanted) if t is not None]
        con = duckdb.connect()
        if tables:
            con.register("_segment_files", pa.concat_tables(tables, promote_options="default"))
            con.execute(f"CREATE TEMP VIEW _spans AS SELECT {select_list(cast_json=True)} FROM ("
                        "SELECT DISTINCT ON (trace_id, span_id) * FROM _segment_files)")
        else:
            con.execute(f"CREATE TEMP VIEW _spans AS {empty_select()}")
        con.execute("CREATE TEMP VIEW spans AS SELECT *, end_time_ns - start_time_ns AS duration_ns FROM _spans")
        for name, sql in VIEWS:
            con.execute(f"CREATE TEMP VIEW {name} AS {sql}")
        return con

    def query(self, sql: str, params: Any = None, *, days: Iterable[str] | None = None,
              sessions: Iterable[str] | None = None) -> list[dict[str, Any]]:
        con = self.reader(days, sessions)
        try:
            cur = con.execute(sql, params) if params is not None else con.execute(sql)
            names = [d[0] for d in cur.description or ()]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
        finally:
            con.close()

    # -- compaction ----------------------------------------------------------------------------
    def compact(self, day: str) -> BucketCompaction:
        """Fold ``day``'s objects into one compacted file (each span once, sorted by session)."""
        objects = self.objects(day)
        keys = [k for k, _ in objects]
        if not keys or (len(keys) == 1 and keys[0].startswith(f"{self.prefix}{COMPACTED}")):
            return BucketCompaction(day, len(keys), 0, None, 0)
        tables = [self._get(k, size, keep=False) for k, size in objects]  # (its inputs are about to go)
        table = pa.concat_tables(tables, promote_options="default")
        new_rows = sum(t.num_rows for k, t in zip(keys, tables, strict=True)
                       if not k.startswith(f"{self.prefix}{COMPACTED}"))
        con = duckdb.connect()
        con.register("t", table)
        merged = con.sql("SELECT * FROM (SELECT DISTINCT ON (trace_id, span_id) * FROM t) "
                         "ORDER BY session_id, seq, start_time_ns, span_id").to_arrow_table()
        con.close()
        name = hashlib.sha256("\n".join(sorted(keys)).encode()).hexdigest()[:24]
        out = f"{self.prefix}{COMPACTED}day={day}/{name}.parquet"
        self._put(out, merged.cast(ARROW_SCHEMA))  # the PUT is the commit: its inputs are now redundant
        old = [k for k in keys if k != out]
        for start in range(0, len(old), 1000):
            self.client.delete_objects(Bucket=self.bucket,
                                       Delete={"Objects": [{"Key": k} for k in old[start:start + 1000]]})
        return BucketCompaction(day, len(keys), merged.num_rows, out, len(old), new_rows,
                                table.num_rows - merged.num_rows)
