"""The pipeline's sink into the store: span chunks -> Arrow; batches of chunks -> one segment each.

Also owns the spool for that store (spill when the store refuses a batch, recover later) and an
optional background compaction so segments do not pile up in a long-running process.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from tracer.contract import names as sn
from tracer.store import Store
from tracer.store.cancel import Cancel
from tracer.store.rows import records_to_table, rows_to_table
from tracer.store.schema import TRACER_STATS
from tracer.store.segments import list_segments
from tracer.store.spool import Spool, spooled_line

log = logging.getLogger(__name__)

CANCEL_WAIT = 10.0  # seconds a cancelled compaction gets to stop (an interrupted statement stops in well under 1 s)


def _concat(tables: list[pa.Table]) -> pa.Table:
    return tables[0] if len(tables) == 1 else pa.concat_tables(tables)


class StoreSink:
    """Writes span batches into a :class:`Store`; spills to a :class:`Spool` when it cannot."""

    name = "store"
    accepts_records = True  # span records (tracer.spans.direct) are converted in bulk by prepare

    def __init__(
        self,
        store: Store | str | os.PathLike[str] | None = None,
        *,
        spool_dir: str | os.PathLike[str] | None = None,
        fsync: bool = True,
        auto_compact: bool = True,
        compact_threshold: int = 64,
    ) -> None:
        self.store = store if isinstance(store, Store) else Store(store)
        self.spool = Spool.for_store(self.store.path, Path(spool_dir) if spool_dir else None)
        self.fsync = fsync
        self.auto_compact = auto_compact
        self.compact_threshold = compact_threshold
        self._writes = 0
        self._compactor: threading.Thread | None = None
        self._cancel = Cancel()

    # -- Sink protocol -----------------------------------------------------------------------------
    def prepare(self, spans: Sequence[Any]) -> pa.Table:
        """A chunk of spans and span records -> Arrow (pure, no I/O; runs on the thread that ended
        the chunk)."""
        return records_to_table(spans)

    def write(self, prepared: list[pa.Table]) -> None:
        """Append prepared chunks as ONE segment. Raises on any failure."""
        self.store.write_table(_concat(prepared), fsync=self.fsync)
        self._writes += 1
        if self.auto_compact and self._writes % 8 == 0:
            self._maybe_compact()

    def spill(self, prepared: list[pa.Table]) -> bool:
        """Persist prepared chunks in the spool for a later retry. Raises OSError when it refuses."""
        self.spool.write_table(_concat(prepared))
        return True

    def has_spilled(self) -> bool:
        return bool(self.spool.pending())

    def recover(self) -> int:
        """Move spooled batches into the store; returns spans moved (raises if the store refuses)."""
        return self.spool.recover(self.store)

    def describe_spooled(self) -> str:
        """One line: how many spans wait in the spool, where, and the command that moves them in."""
        return spooled_line(self.spool.pending_rows(), self.spool.path, self.store.path)

    def write_stats(self, stats: Mapping[str, Any], resource: Mapping[str, Any]) -> None:
        """Record the pipeline's counters as one ``prunegate.tracer.stats`` row (spool on failure)."""
        now = time.time_ns()
        attrs = {sn.TRACER_STAT_KEYS[k]: v for k, v in stats.items() if v is not None}
        attrs[sn.TRACER_SINK] = self.name
        attrs[sn.PROCESS_PID] = os.getpid()
        row = {
            "trace_id": secrets.token_hex(16),
            "span_id": secrets.token_hex(8),
            "name": TRACER_STATS,
            "start_time_ns": now,
            "end_time_ns": now,
            "attributes": attrs,
            "resource": dict(resource),
            "scope_name": "tracer.spans.pipeline",
        }
        table = rows_to_table([row])
        try:
            self.store.write_table(table, fsync=self.fsync)
        except OSError:
            self.spool.write_table(table)

    def close(self, timeout: float = 5.0) -> None:
        """Wait up to ``timeout`` for a background compaction, then cancel it (the store stays as it
        was; the next compaction moves those segments) and wait for it to stop: a process must not
        exit with that thread inside DuckDB, which the C++ runtime answers with SIGABRT."""
        thread = self._compactor
        if thread is None:
            return
        thread.join(timeout)
        if not thread.is_alive():
            return
        self._cancel()
        thread.join(CANCEL_WAIT)
        if thread.is_alive():
            log.warning("prunegate auto-compaction of %s did not stop within %.0f s of being cancelled; the "
                        "process may abort if it exits now", self.store.path, timeout + CANCEL_WAIT)
        else:
            log.info("prunegate auto-compaction of %s cancelled at close; `prunegate compact` moves its "
                     "segments", self.store.path)

    # -- background compaction -------------------------------------------------------------------
    def _maybe_compact(self) -> None:
        if self._compactor is not None and self._compactor.is_alive():
            return
        if len(list_segments(self.store.layout)) < self.compact_threshold:
            return
        self._cancel = Cancel()
        self._compactor = threading.Thread(target=self._compact, args=(self._cancel,), name="prunegate-compact",
                                           daemon=True)
        self._compactor.start()

    def _compact(self, cancel: Cancel) -> None:
        try:
            result = self.store.compact(timeout=2.0, cancel=cancel)
            if result.busy:
                log.debug("prunegate auto-compaction skipped: %s", result.busy)
        except Exception as exc:  # never let maintenance hurt the agent
            log.warning("prunegate auto-compaction of %s failed: %s", self.store.path, exc)
