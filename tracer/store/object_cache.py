"""A local copy of the bucket objects a reader downloaded.

Why: a reader of an ``s3://`` store GETs every object of the days it reads, and the dashboard reads
again whenever the store changes. Objects never change once written (a segment's name is unique; a
compacted file is named by the hash of its inputs), so a copy kept on local disk is never stale: the
next read downloads only the objects that are new since. A copy is used only when its size is the
listed size and it parses; anything else is dropped and downloaded again. The cache is bounded
(least recently read objects go first) and never fails a read: a cache that cannot be written (a
full or read-only disk) is reported once and the read goes on from the bucket.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
from pathlib import Path

log = logging.getLogger(__name__)

DEFAULT_LIMIT = 2 << 30  # bytes kept at most


class ObjectCache:
    """Objects of one S3 endpoint's buckets under ``root``, at most ``limit`` bytes."""

    def __init__(self, root: Path, namespace: str, limit: int = DEFAULT_LIMIT) -> None:
        self.root = root
        self.namespace = namespace  # the endpoint: the same bucket name elsewhere is another bucket
        self.limit = limit
        self.hits = 0
        self.misses = 0
        self._size: int | None = None  # bytes under root, counted on the first write
        self._warned = False

    def path(self, bucket: str, key: str) -> Path:
        digest = hashlib.sha256(f"{self.namespace}\0{bucket}\0{key}".encode()).hexdigest()
        return self.root / digest[:2] / f"{digest}.parquet"

    def get(self, bucket: str, key: str, size: int) -> bytes | None:
        """The cached copy of ``key`` when it has the listed ``size``, else None (a wrong copy is dropped)."""
        p = self.path(bucket, key)
        try:
            if p.stat().st_size != size:  # half-written by a process that died, or not this object
                self.drop(bucket, key)
                self.misses += 1
                return None
            data = p.read_bytes()
            os.utime(p)  # least recently read goes first
        except FileNotFoundError:
            self.misses += 1
            return None
        except OSError as exc:
            self._warn(f"cannot read {p}: {exc}")
            self.misses += 1
            return None
        self.hits += 1
        return data

    def put(self, bucket: str, key: str, data: bytes) -> None:
        """Keep ``data`` as ``key``'s copy (written whole, then renamed into place); trim to the limit."""
        if len(data) > self.limit:
            return
        p = self.path(bucket, key)
        tmp = p.with_name(f"{p.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(data)
            os.replace(tmp, p)
        except OSError as exc:
            self._warn(f"cannot write {p}: {exc}")
            self._discard(tmp)
            return
        if self._size is None:
            self._size = sum(f.stat().st_size for f in self._files())
        else:
            self._size += len(data)
        if self._size > self.limit:
            self._trim()

    def drop(self, bucket: str, key: str) -> None:
        """Forget ``key``'s copy (it did not parse, or had the wrong size)."""
        try:
            self.path(bucket, key).unlink(missing_ok=True)
        except OSError as exc:
            self._warn(f"cannot remove a bad copy of {key}: {exc}")
        self._size = None

    def _discard(self, tmp: Path) -> None:
        """Remove a partial copy left by a failed write (there may be none: the write failed first)."""
        try:
            tmp.unlink(missing_ok=True)
        except OSError as exc:
            log.debug("prunegate: cannot remove %s: %s", tmp, exc)

    def _files(self) -> list[Path]:
        return [f for f in self.root.glob("*/*.parquet") if f.is_file()]

    def _trim(self) -> None:
        """Remove the least recently read copies until the cache holds 90% of its limit."""
        files = sorted(((st.st_mtime_ns, st.st_size, f) for f in self._files() for st in (f.stat(),)),
                       key=lambda t: t[0])
        total = sum(size for _, size, _ in files)
        for _, size, f in files:
            if total <= self.limit * 0.9:
                break
            try:
                f.unlink()
                total -= size
            except FileNotFoundError:  # another reader trimmed it first
                total -= size
            except OSError as exc:
                self._warn(f"cannot trim {f}: {exc}")
                break
        self._size = total

    def _warn(self, message: str) -> None:
        if not self._warned:
            self._warned = True
            log.warning("prunegate: the bucket object cache is not used (%s); reading from the bucket", message)


__all__ = ["DEFAULT_LIMIT", "ObjectCache"]
