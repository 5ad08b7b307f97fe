"""JSON records kept beside a store's spans: comparisons, in one format under ``<store>/sweeps/``.

Every record has an ``id`` that starts with its kind and its UTC time (:func:`new_id`, so names sort
by time), a ``kind``, a ``title``, ``created`` and ``time_ns``. A **sweep** (``prunegate compare``
and the dashboard's run form: every arm with its interval and what reproduces it) adds ``command``,
``options``, ``sessions``, ``arms``, ``rows`` and ``differences``; a **saved comparison** (the
dashboard's "Save this comparison") adds the ``params`` it was run with and the ``results`` shown.
Sweeps stored before records had a kind hold no ``kind``, ``title`` or ``time_ns``: they read as sweeps.

The one way in and out of that area, for a directory and a bucket alike: :func:`put_record` writes a
record whole or not at all (a directory: a temporary file renamed over; a bucket: one PUT);
:func:`record_paths` lists them oldest first (their names start with their UTC time), a bucket's
copied once into a local cache (a record never changes once written); :func:`read_record` reads
one back, naming the file when it is not JSON.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

from tracer.contract.settings import spool_base
from tracer.store.location import BucketURL, resolve_store

__all__ = ["COMPARISONS", "new_id", "put_record", "read_record", "record_paths", "stamp"]

COMPARISONS = "sweeps"  # the area of sweeps and saved comparisons (its name from when it held sweeps only)


def new_id(kind: str, now_ns: int) -> str:
    """``<kind>-<UTC time to the nanosecond>Z-<6 hex>``: unique, sorts by time, safe in a URL and a file name."""
    return f"{kind}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime(now_ns // 10**9))}.{now_ns % 10**9:09d}Z-" \
           f"{secrets.token_hex(3)}"


def stamp(kind: str, title: str) -> dict[str, object]:
    """The fields every record starts with: id, kind, title, created (UTC, to the second), time_ns."""
    now = time.time_ns()
    return {"id": new_id(kind, now), "kind": kind, "title": title,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now // 10**9)), "time_ns": now}


def put_record(store_path: str | os.PathLike[str] | BucketURL, area: str, name: str,
               record: dict[str, Any]) -> Path | str:
    """Write ``record`` as ``<store>/<area>/<name>.json``, whole or not at all; where it is (a path,
    or on a bucket its URL)."""
    where = resolve_store(store_path)
    if isinstance(where, BucketURL):
        from tracer.store.s3 import S3Store

        return S3Store(where).put_json(f"{area}/{name}.json", record)
    folder = where / area
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    tmp = folder / f".{name}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(record, indent=1))
    os.replace(tmp, path)
    return path


def record_paths(store_path: str | os.PathLike[str] | BucketURL, area: str, prefix: str = "") -> list[Path]:
    """The records of ``area`` whose names start with ``prefix``, oldest first, as local files (a
    bucket's are fetched once into ``<spool>/bucket-<area>/``)."""
    where = resolve_store(store_path)
    if isinstance(where, BucketURL):
        return _cached(where, area, prefix)
    folder = where / area
    if not folder.is_dir():
        return []
    return sorted(folder.glob(f"{prefix}*.json"))


def _cached(where: BucketURL, area: str, prefix: str) -> list[Path]:
    from tracer.store.s3 import S3Store

    store = S3Store(where)
    folder = spool_base() / f"bucket-{area}" / hashlib.sha256(str(where).encode()).hexdigest()[:16]
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for key in store.list_keys(f"{area}/"):
        name = key.rsplit("/", 1)[-1]
        if not (name.startswith(prefix) and name.endswith(".json")):
            continue
        local = folder / name
        if not local.exists():
            tmp = folder / f".{name}.{os.getpid()}.tmp"
            tmp.write_text(json.dumps(store.get_json(key), indent=1))
            os.replace(tmp, local)
        out.append(local)
    return sorted(out)


def read_record(path: str | os.PathLike[str]) -> Any:
    """One record read back (ValueError naming the file when it cannot be read or is not JSON)."""
    p = Path(path)
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{p}: {exc}") from None
