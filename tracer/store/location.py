"""Where a store is: the one place that turns a ``--store`` argument (or its absence) into a location.

:func:`resolve_store` is the only function that does it: ``Store()``, every command and the dashboard
call it. A location is a directory ``Path`` or a :class:`BucketURL` (``s3://bucket/prefix``).
Standard library only at import time (``BucketURL.exists`` asks the bucket through
:mod:`tracer.store.s3` when called).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tracer.contract.settings import BUCKET_SCHEME, DEFAULT_STORE_DIRNAME, STORE_ENV


@dataclass(frozen=True)
class BucketURL:
    """A store on an S3-compatible bucket: ``s3://bucket/prefix`` (the prefix empty or ending in ``/``).

    It stands where a store's directory ``Path`` does (``store.path``): ``str()`` gives the URL back,
    ``exists()`` asks the bucket (tracer.store.s3); it is no ``os.PathLike``, so nothing opens it as
    a local file by mistake."""

    bucket: str
    prefix: str = ""

    @classmethod
    def parse(cls, url: str) -> BucketURL:
        rest = url[len(BUCKET_SCHEME):]
        bucket, _, prefix = rest.partition("/")
        if not bucket:
            raise ValueError(f"{url}: no bucket name (expected s3://bucket/prefix)")
        prefix = prefix.strip("/")
        return cls(bucket, prefix + "/" if prefix else "")

    def __str__(self) -> str:
        return f"{BUCKET_SCHEME}{self.bucket}/{self.prefix}"

    def exists(self) -> bool:
        """Whether the store holds any object (one LIST)."""
        from tracer.store.s3 import bucket_has_objects

        return bucket_has_objects(self)

    def is_dir(self) -> bool:
        return self.exists()

    def resolve(self) -> BucketURL:
        return self

    def absolute(self) -> BucketURL:
        return self


StoreLocation = Path | BucketURL


def is_bucket(arg: object) -> bool:
    """Whether ``arg`` names a store on a bucket (``s3://...``)."""
    return isinstance(arg, BucketURL) or str(arg).startswith(BUCKET_SCHEME)


def resolve_store(arg: str | os.PathLike[str] | BucketURL | None = None) -> StoreLocation:
    """The store: ``arg`` when given, else ``$PRUNEGATE_STORE``, else ``./prunegate-store``; a directory
    ``Path``, or a :class:`BucketURL` for ``s3://bucket/prefix``."""
    if isinstance(arg, BucketURL):
        return arg
    if arg is not None and str(arg) != "":
        text = str(arg) if isinstance(arg, str) else os.fspath(arg)
    else:
        text = os.environ.get(STORE_ENV) or str(Path.cwd() / DEFAULT_STORE_DIRNAME)
    return BucketURL.parse(text) if text.startswith(BUCKET_SCHEME) else Path(text)


def local_store(arg: str | os.PathLike[str] | None = None) -> Path:
    """:func:`resolve_store` for what only works on a directory (the demo, the spool); ValueError for a bucket."""
    where = resolve_store(arg)
    if isinstance(where, BucketURL):
        raise ValueError(f"{where}: this needs a store directory, not a bucket")
    return where
