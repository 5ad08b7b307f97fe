"""Cancelling a compaction from another thread (no DuckDB import: the sink holds one of these)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from tracer.errors import CompactionCancelled

if TYPE_CHECKING:
    import duckdb


class Cancel:
    """Asks a compaction running on another thread to stop (call the object). The DuckDB statement in
    flight is interrupted and :func:`tracer.store.compact.compact` returns with ``busy`` set and the store as it was (the
    new database is a temp file until the swap). Why: a process that exits while a thread is inside
    DuckDB is aborted by the C++ runtime (SIGABRT, exit status 134), so a closing sink stops its
    background compaction first (:meth:`tracer.store.sink.StoreSink.close`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._con: duckdb.DuckDBPyConnection | None = None
        self.requested = False

    def __call__(self) -> None:
        with self._lock:
            self.requested = True
            if self._con is not None:
                self._con.interrupt()

    def attach(self, con: duckdb.DuckDBPyConnection | None) -> None:
        """The connection a cancel interrupts (None: none now); interrupts it at once if already asked."""
        with self._lock:
            self._con = con
            if con is not None and self.requested:
                con.interrupt()

    def check(self) -> None:
        if self.requested:
            raise CompactionCancelled

