"""``--store s3://bucket/prefix``: the :class:`~tracer.store.Store` API over a :class:`BucketStore`.

Why a subclass of ``Store``: every command, the span pipeline's sink, the importers' committer and
the dashboard take a ``Store``; ``Store("s3://...")`` returns this one, so all of them write and read
a bucket without knowing it. What changes on a bucket (docs/scale.md):

- writes are PUTs of immutable objects (:meth:`BucketStore.write_table`); a refused PUT raises
  ``OSError`` like a full disk, so writers spool it exactly as they do for a directory;
- readers (:class:`BucketReader`) list the days, GET the objects and define the same views;
- ``compact()`` folds each day into one object (idempotent; no lock);
- claims of imported sessions (``flock`` files) stay on this host, in a directory under the spool
  base: two importers on one host still commit each session once; across hosts the span ids make a
  second copy invisible to readers and compaction.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from tracer.contract.settings import s3_cache_dir, s3_endpoint, spool_base
from tracer.errors import StoreError
from tracer.store import Store
from tracer.store.bucket import COMPACTED, SEGMENTS, BucketStore
from tracer.store.cancel import Cancel
from tracer.store.compact import CompactResult
from tracer.store.location import BucketURL, resolve_store
from tracer.store.object_cache import ObjectCache
from tracer.store.reader import Params, StoreReader
from tracer.store.segments import StoreLayout

log = logging.getLogger(__name__)

_CLIENTS: dict[str | None, Any] = {}
_BUCKETS: dict[str, BucketStore] = {}


def client(endpoint: str | None = None) -> Any:
    """A boto3 S3 client for ``endpoint`` (default :func:`~tracer.contract.settings.s3_endpoint`), one per process."""
    endpoint = endpoint or s3_endpoint()
    if endpoint not in _CLIENTS:
        try:
            import boto3
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise StoreError("s3:// stores need boto3: pip install 'prunegate[s3]'") from exc
        try:
            _CLIENTS[endpoint] = boto3.client("s3", endpoint_url=endpoint)
        except ValueError as exc:  # botocore: "Invalid endpoint: not-a-url"
            raise StoreError(f"$PRUNEGATE_S3_ENDPOINT {endpoint!r} is not an endpoint URL (http(s)://host[:port]): "
                             f"{exc}") from None
    return _CLIENTS[endpoint]


def _botocore_errors() -> tuple[type[BaseException], ...]:
    from botocore.exceptions import BotoCoreError, ClientError

    return (BotoCoreError, ClientError)


def bucket_has_objects(url: BucketURL) -> bool:
    """Whether anything is stored under the URL's prefix (one LIST); False when the bucket is missing."""
    try:
        page = client().list_objects_v2(Bucket=url.bucket, Prefix=url.prefix, MaxKeys=1)
    except _botocore_errors() as exc:
        if "NoSuchBucket" in str(exc):
            return False
        raise StoreError(f"{url}: {exc}") from exc
    return bool(page.get("KeyCount") or page.get("Contents"))


class S3Store(Store):
    """A store on a bucket; ``Store("s3://bucket/prefix")`` makes one (see the module doc)."""

    def __init__(self, path: str | BucketURL | None = None) -> None:
        where = resolve_store(path)
        if not isinstance(where, BucketURL):
            raise ValueError(f"{where}: not an s3:// store")
        self.path: BucketURL = where  # type: ignore[assignment]  # Store.path is a Path; a bucket store's is its URL
        key = f"{s3_endpoint()}|{where}"
        if key not in _BUCKETS:  # one per process: its request counters hook the client, its footer cache is shared
            cache_dir = s3_cache_dir()
            cache = ObjectCache(cache_dir, str(s3_endpoint())) if cache_dir is not None else None
            _BUCKETS[key] = BucketStore(client(), where.bucket, where.prefix, cache=cache)
        self.bucket = _BUCKETS[key]
        digest = hashlib.sha256(str(where).encode()).hexdigest()[:16]
        self.layout = StoreLayout(spool_base() / "bucket-claims" / digest)  # claims only: see the module doc
        self._ensured = False

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    # -- writing ---------------------------------------------------------------------------------
    def ensure(self) -> None:
        """Create the local claims directory; the bucket must exist (OSError when it does not)."""
        if self._ensured:
            return
        self.layout.ensure()
        try:
            self.bucket.client.head_bucket(Bucket=self.path.bucket)
        except _botocore_errors() as exc:
            raise OSError(f"{self.path}: bucket not reachable: {exc}") from exc
        self._ensured = True

    def write_table(self, table: pa.Table, *, fsync: bool = True) -> Path:
        """PUT ``table`` as one object per day it touches (a PUT is atomic and durable once answered).
        A refused PUT raises OSError, so writers spool the batch as for a full disk."""
        try:
            keys = self.bucket.write_table(table)
        except _botocore_errors() as exc:
            raise OSError(f"{self.path}: PUT refused: {exc}") from exc
        return Path(keys[0] if keys else "")

    def ingest_file(self, source: Path, name: str) -> None:
        """PUT a segment-format file (a spool file): its span ids make a repeated ingest harmless."""
        self.write_table(pq.read_table(source))

    def put_json(self, key: str, value: Any) -> str:
        """PUT a small JSON document under the store's prefix (compare's sweep records); its URL."""
        try:
            self.bucket.client.put_object(Bucket=self.path.bucket, Key=self.path.prefix + key,
                                          Body=json.dumps(value, indent=1).encode())
        except _botocore_errors() as exc:
            raise OSError(f"{self.path}: PUT refused: {exc}") from exc
        return f"{self.path}{key}"

    def get_json(self, key: str) -> Any:
        """A JSON document PUT by :meth:`put_json`, or None."""
        try:
            body = self.bucket.client.get_object(Bucket=self.path.bucket, Key=self.path.prefix + key)["Body"].read()
        except self.bucket.client.exceptions.NoSuchKey:
            return None
        return json.loads(body)

    def list_keys(self, area: str) -> list[str]:
        """Keys (relative to the prefix) under ``area``, e.g. ``sweeps/``."""
        out: list[str] = []
        for page in self.bucket._pages(self.path.prefix + area):
            out.extend(o["Key"][len(self.path.prefix):] for o in page.get("Contents", []))
        return sorted(out)

    # -- maintenance -----------------------------------------------------------------------------
    def repair(self) -> str | None:
        """Nothing to rebuild: a bucket store has no spans.duckdb (each day is its own object)."""
        return None

    def compact(self, *, timeout: float = 10.0, cancel: Cancel | None = None) -> CompactResult:
        """Fold each day's objects into one (:meth:`BucketStore.compact`, idempotent, no lock); a
        ``cancel`` stops it between days (each day folded is whole)."""
        result = CompactResult(store=str(self.path))
        try:
            for day in self.bucket.days():
                if cancel is not None and cancel.requested:
                    result.busy = f"cancelled after {result.segments_compacted} objects folded; the rest wait"
                    break
                done = self.bucket.compact(day)
                if done.written is not None:
                    result.segments_seen += done.inputs
                    result.segments_compacted += done.inputs
                    result.rows_inserted += done.new_rows - done.duplicates
                    result.duplicates_skipped += done.duplicates
                    result.segments_deleted += done.deleted
        except _botocore_errors() as exc:
            raise StoreError(f"{self.path}: compaction failed: {exc}") from exc
        return result

    def pending_segments(self) -> list[Path]:
        """Objects not yet compacted (as key paths)."""
        return [Path(k) for d in self.bucket.days() for k in self.bucket.keys(d) if f"/{SEGMENTS}" in f"/{k}"]

    def fingerprint(self, *, activity: bool = False) -> str:
        """Changes whenever an object is written, compacted or deleted (one LIST per area).
        ``activity`` is accepted for :meth:`tracer.store.Store.fingerprint`'s callers; a bucket's
        objects are not told apart, so every write changes it."""
        names: list[str] = []
        for area in (SEGMENTS, COMPACTED):
            for page in self.bucket._pages(self.path.prefix + area):
                names.extend(f"{o['Key']}:{o.get('ETag', '')}" for o in page.get("Contents", []))
        return hashlib.sha1("\n".join(sorted(names)).encode()).hexdigest()

    # -- reading ---------------------------------------------------------------------------------
    def reader(self, *, attach_timeout: float = 2.0, sessions: list[str] | None = None,
               days: list[str] | None = None) -> StoreReader:
        """A snapshot: the listed objects of ``days`` (all by default), each span once; with
        ``sessions``, only the row groups that may hold them (ranged GETs; filter on session_id)."""
        return BucketReader(self, days, sessions)

    def spans(self, session_id: str) -> list[dict[str, Any]]:
        """A session's spans in event order, read by ranged GETs of the row groups that may hold it."""
        from tracer.store.rows import decode_row

        with self.reader(sessions=[session_id]) as r:
            rows = r.query("SELECT * FROM spans WHERE session_id = ? ORDER BY seq NULLS LAST, start_time_ns, span_id",
                           [session_id])
        return [decode_row(row) for row in rows]


class BucketReader(StoreReader):
    """:class:`StoreReader`'s interface over a bucket's objects (no locks: a listing is the snapshot)."""

    def __init__(self, store: S3Store, days: list[str] | None = None,  # no super(): no lock file, no database
                 sessions: list[str] | None = None) -> None:
        self.layout = SimpleNamespace(root=store.path)  # type: ignore[assignment]  # only .root is read on a bucket
        self.complete = True
        self.main_attached = False
        self.warnings: list[str] = []
        self.pending_segments: list[Path] = []
        self.damaged_segments: list[Path] = []
        self.legacy_segments: list[Path] = []
        try:
            self.con: duckdb.DuckDBPyConnection = store.bucket.reader(days, sessions)
        except _botocore_errors() as exc:
            raise StoreError(f"{store.path}: cannot read the bucket: {exc}") from exc

    def close(self) -> None:
        self.con.close()


__all__ = ["BucketReader", "Params", "S3Store", "bucket_has_objects", "client"]
