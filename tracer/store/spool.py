"""The spool: where spans go when the store cannot take them, until it can.

A spool is a local directory (by default outside the store, since the store may be the thing that
is broken) of Parquet files in the segment format. Recovery claims a file by renaming it (so two
processes never ingest the same file), copies it into the store as a segment with a name derived
from the spool file's (so a retry after a crash is recognised by the compactor's ledger), and
deletes it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from tracer.contract.settings import spool_base
from tracer.store.location import BucketURL, StoreLocation
from tracer.store.locks import fsync_path, pid_alive
from tracer.store.schema import ARROW_SCHEMA
from tracer.store.segments import (
    SEGMENT_SUFFIX,
    TMP_SUFFIX,
    new_segment_name,
    write_parquet,
)

if TYPE_CHECKING:
    from tracer.store import Store

log = logging.getLogger(__name__)

CLAIM = ".claimed-"


def _where(store_root: StoreLocation) -> str:
    """The store's absolute path, or its ``s3://`` URL."""
    return str(store_root) if isinstance(store_root, BucketURL) else str(Path(store_root).absolute())


def default_spool_dir(store_root: StoreLocation) -> Path:
    """``$PRUNEGATE_SPOOL_DIR/<hash>`` or ``~/.cache/prunegate/spool/<hash>`` for this store path (or URL)."""
    digest = hashlib.sha256(_where(store_root).encode()).hexdigest()[:16]
    return spool_base() / digest


def recover_command(store_root: StoreLocation, spool_dir: Path | None = None) -> str:
    """The command that moves a spool's spans into the store (named in every spool message)."""
    cmd = f"prunegate recover --store {shlex.quote(_where(store_root))}"
    if spool_dir is not None and Path(spool_dir).absolute() != default_spool_dir(store_root).absolute():
        cmd += f" --spool-dir {shlex.quote(str(spool_dir))}"
    return cmd


def spooled_line(spans: int, spool_dir: Path, store_root: StoreLocation, why: str | None = None) -> str:
    """The one line a command prints when spans went to the spool instead of the store."""
    because = f" ({why})" if why else ""
    return (f"{spans} spans did not reach the store {store_root}{because}: they are in the spool {spool_dir}; "
            f"once the store is writable run: {recover_command(store_root, spool_dir)}")


class Spool:
    """A directory of spooled span tables for one store."""

    def __init__(self, path: Path, store_root: StoreLocation | None = None) -> None:
        self.path = Path(path)
        self.store_root = store_root

    @classmethod
    def for_store(cls, store_root: StoreLocation, spool_dir: Path | None = None) -> Spool:
        return cls(Path(spool_dir) if spool_dir else default_spool_dir(store_root), store_root)

    def _ensure(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        note = self.path / "STORE"
        if self.store_root is not None and not note.exists():
            note.write_text(f"{_where(self.store_root)}\n")

    def write_table(self, table: pa.Table) -> Path:
        """Persist ``table`` atomically (tmp, fsync, rename). Raises OSError when the disk refuses."""
        self._ensure()
        name = new_segment_name()
        tmp = self.path / f"{name}.{os.getpid()}{TMP_SUFFIX}"
        try:
            write_parquet(table.cast(ARROW_SCHEMA) if table.schema != ARROW_SCHEMA else table, tmp)
            fsync_path(tmp)
            os.rename(tmp, self.path / name)
            fsync_path(self.path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return self.path / name

    def pending(self) -> list[Path]:
        """Spool files waiting for the store, including ones claimed by processes that died."""
        try:
            entries = sorted(os.scandir(self.path), key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError):
            return []
        out = []
        for entry in entries:
            if entry.name.endswith(SEGMENT_SUFFIX):
                out.append(Path(entry.path))
            elif CLAIM in entry.name:
                pid = entry.name.rsplit(CLAIM, 1)[1]
                if pid.isdigit() and not pid_alive(int(pid)):
                    out.append(Path(entry.path))
        return out

    def pending_rows(self) -> int:
        """Rows waiting in the spool (from Parquet footers)."""
        total = 0
        for path in self.pending():
            try:
                total += pq.read_metadata(str(path)).num_rows
            except FileNotFoundError:
                continue  # recovered by another process meanwhile
            except Exception as exc:  # recovery sets it aside as *.damaged, with a warning
                log.warning("prunegate spool: unreadable spool file %s: %s", path, exc)
        return total

    def damaged(self) -> list[Path]:
        """Spool files recovery could not read (renamed ``*.damaged``, kept for a person to look at)."""
        try:
            return sorted(p for p in self.path.iterdir() if p.name.endswith(".damaged"))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def recover(self, store: Store) -> int:
        """Move spooled files into the store; returns rows moved. Raises OSError if the store
        still refuses writes (the file is then left, unclaimed, for the next attempt)."""
        moved = 0
        for path in self.pending():
            base = path.name.split(CLAIM, 1)[0]
            claimed = self.path / f"{base}{CLAIM}{os.getpid()}"
            try:
                os.rename(path, claimed)
            except FileNotFoundError:
                continue  # another process claimed it first
            try:
                rows = pq.read_metadata(str(claimed)).num_rows
            except Exception as exc:
                log.warning("prunegate spool: unreadable spool file %s left in place: %s", claimed, exc)
                os.rename(claimed, self.path / f"{base}.damaged")
                continue
            try:
                store.ingest_file(claimed, f"spool-{base}")
            except BaseException:
                os.rename(claimed, self.path / base)
                raise
            os.unlink(claimed)
            moved += rows
        return moved
