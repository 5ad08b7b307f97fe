"""Imported sessions into the store, each exactly once and whole, or counted where they went instead.

Why not the span pipeline: the pipeline batches spans by time, so one session can straddle
segments, and a writer killed between two segments leaves half a session that a re-import would
merge with its new copy. Here each conversation is recorded in memory (its spans get ids derived
from the session id, so a second recording of it has the same ids), and sessions are written
whole, several to a segment:

1. claim the session (:mod:`tracer.store.claims`): committed already, or held by a live process,
   means this process stores nothing for it (a held one is waited for at the end, and taken over
   if its holder dies without committing);
2. write the batch as one segment (the rename is the commit: whole or absent);
3. mark its claims committed.

When the store refuses the segment (full disk, read-only) the batch goes to the spool instead,
counted, and :func:`tracer.store.spool.recover_command` names the command that moves it in later.
Recovery and re-import are idempotent: the same span ids are shown once by readers and kept once
by compaction.
"""

from __future__ import annotations

import hashlib
import logging
import os
import random
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.id_generator import IdGenerator

from tracer.contract.settings import FAULT_STOP_ENV
from tracer.spans.direct import DIRECT_FLAG
from tracer.store import Store
from tracer.store.claims import Claim, ClaimState, commit_many, take
from tracer.store.rows import records_to_table
from tracer.store.spool import Spool

log = logging.getLogger(__name__)

BATCH_BYTES = 64 * 1024 * 1024  # a segment is written once its spans hold this much (large messages), so
# an import's memory does not grow with the size of its conversations
FAULT_ENV = FAULT_STOP_ENV  # test hook: "<point>:<n>" stops (SIGSTOP) the n-th time
_fault_hits: dict[str, int] = {}


def fault_point(name: str) -> None:
    """Fault-injection hook for the crash tests: stop this process here when asked to.

    ``PRUNEGATE_FAULT_STOP=segment-written:2`` sends SIGSTOP to the process the second time it
    reaches ``segment-written``, so a test can ``kill -9`` it at exactly that point."""
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    point, _, nth = spec.partition(":")
    if point != name:
        return
    _fault_hits[name] = _fault_hits.get(name, 0) + 1
    if _fault_hits[name] == int(nth or "1"):
        os.kill(os.getpid(), signal.SIGSTOP)


class SessionIds(IdGenerator):
    """Span and trace ids derived from the current session id: the same conversation recorded twice
    gets the same ids, so any second copy (a re-import after a crash, a recovered spool file) is
    the same spans, shown and kept once."""

    def __init__(self) -> None:
        self._rng = random.Random(0)

    def seed(self, session_id: str) -> None:
        self._rng = random.Random(hashlib.sha256(session_id.encode()).digest())

    def generate_span_id(self) -> int:
        return self._rng.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self._rng.getrandbits(128) or 1


class _Collect(SpanProcessor):
    """Keeps ended spans in memory until the committer takes them: span records from a session's
    direct path (tracer.spans.direct: no SDK span object per span, what made a session's commit cost
    milliseconds), SDK spans for anything else (its root, when not direct)."""

    takes_records = True  # tracer.spans.direct.direct_writer: sessions may hand records here

    def __init__(self) -> None:
        self.spans: list[Any] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)

    def on_end_record(self, record: tuple) -> None:
        self.spans.append(record)

    def take(self) -> list[Any]:
        spans, self.spans = self.spans, []
        return spans


@dataclass
class CommitReport:
    """Where every session this committer was given ended up (session ids and span counts)."""

    stored: dict[str, int] = field(default_factory=dict)  # written into the store (spans each)
    spooled: dict[str, int] = field(default_factory=dict)  # written to the spool instead
    lost: dict[str, int] = field(default_factory=dict)  # neither the store nor the spool took them
    already: list[str] = field(default_factory=list)  # committed before (by anyone)
    busy: list[str] = field(default_factory=list)  # still held by a live process at the end
    failed: dict[str, str] = field(default_factory=dict)  # recording raised: session id -> reason
    store_error: str | None = None  # why the store refused a batch
    spool_error: str | None = None
    spool_dir: str | None = None


@dataclass
class _Pending:
    sid: str
    table: pa.Table
    claim: Claim | None


class SessionCommitter:
    """Record conversations and commit them to ``store`` as whole sessions (see the module doc)."""

    def __init__(self, store: Store, *, batch_spans: int = 2048, wait_busy: float = 60.0,
                 spool: Spool | None = None) -> None:
        self.store = store
        self.batch_spans = batch_spans
        self.wait_busy = wait_busy
        self.spool = spool or Spool.for_store(store.path)
        self.ids = SessionIds()
        self._collect = _Collect()
        self.provider = TracerProvider(resource=Resource.create({"service.name": "prunegate"}), id_generator=self.ids)
        self.provider.add_span_processor(self._collect)
        setattr(self.provider, DIRECT_FLAG, True)  # sessions write span records (tracer.spans.direct)
        self.report = CommitReport(spool_dir=str(self.spool.path))
        self._batch: list[_Pending] = []
        self._batch_rows = 0
        self._batch_bytes = 0
        self._deferred: list[tuple[str, Callable[[Any], None]]] = []
        try:
            store.ensure()  # claims live in the store: create it first
        except OSError as exc:  # read-only or impossible: every batch will go to the spool, counted
            self.report.store_error = _describe(exc)

    def add(self, sid: str, record: Callable[[Any], None]) -> ClaimState:
        """Commit session ``sid``; ``record(tracer_provider)`` records its spans. Returns what the
        claim said (MINE: it is being written; COMMITTED: already there; BUSY: deferred to finish)."""
        claim = take(self.store.layout, sid)
        if claim.state is ClaimState.COMMITTED:
            self.report.already.append(sid)
        elif claim.state is ClaimState.BUSY:
            self._deferred.append((sid, record))
        else:
            fault_point("claimed")
            self._record(sid, record, claim if claim.state is ClaimState.MINE else None)
        return claim.state

    def _record(self, sid: str, record: Callable[[Any], None], claim: Claim | None) -> None:
        self.ids.seed(sid)
        try:
            record(self.provider)
            table = records_to_table(self._collect.take())
        except Exception as exc:  # one conversation that cannot be recorded must not stop the rest
            self._collect.take()
            if claim is not None:
                claim.release()
            self.report.failed[sid] = f"{type(exc).__name__}: {exc}"
            return
        self._batch.append(_Pending(sid, table, claim))
        self._batch_rows += table.num_rows
        self._batch_bytes += table.nbytes
        if self._batch_rows >= self.batch_spans or self._batch_bytes >= BATCH_BYTES:
            self.flush()

    def flush(self) -> None:
        """Write the pending sessions as one segment (or spool them), then mark them committed."""
        batch, self._batch, self._batch_rows, self._batch_bytes = self._batch, [], 0, 0
        if not batch:
            return
        table = pa.concat_tables([p.table for p in batch])
        try:
            segment = self.store.write_table(table)
        except OSError as exc:
            self.report.store_error = _describe(exc)
            self._spool(batch, table)
            return
        fault_point("segment-written")
        for p in batch:
            self.report.stored[p.sid] = p.table.num_rows
        failed = commit_many([p.claim for p in batch if p.claim is not None], segment.name)
        for key, error in failed.items():  # the spans are in the store; span ids cover a re-import
            log.warning("prunegate import: could not mark session %s committed: %s", key, error)
        fault_point("committed")

    def _spool(self, batch: Sequence[_Pending], table: pa.Table) -> None:
        try:
            self.spool.write_table(table)
            target = self.report.spooled
        except OSError as exc:
            self.report.spool_error = _describe(exc)
            target = self.report.lost
        for p in batch:
            target[p.sid] = p.table.num_rows
            if p.claim is not None:
                p.claim.release()

    def finish(self) -> CommitReport:
        """Flush, then wait (up to ``wait_busy``) for sessions other processes held: take over any
        whose holder died without committing."""
        self.flush()
        for sid, record in self._deferred:
            claim = take(self.store.layout, sid, timeout=self.wait_busy)
            if claim.state is ClaimState.COMMITTED:
                self.report.already.append(sid)
            elif claim.state is ClaimState.BUSY:
                self.report.busy.append(sid)
            else:
                self._record(sid, record, claim if claim.state is ClaimState.MINE else None)
        self._deferred = []
        self.flush()
        self.provider.shutdown()
        return self.report


def _describe(exc: OSError) -> str:
    return f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")
