"""A span processor that never loses a span silently.

The SDK's ``BatchSpanProcessor`` drops the oldest span when its queue is full and only logs an
export failure. :class:`ReliableSpanProcessor` instead:

- collects ended spans in a small buffer; every ``chunk_size`` spans the thread that ended the
  last one *prepares* the chunk (for the store: converts it to Arrow, ~1 ms for 256 spans) while
  the spans are still hot in that CPU's cache, and the span objects die young. Measured on the
  2-CPU reference machine, converting on a background thread instead cost about three times more
  CPU in total (the other core re-reads every span cold), which is what decides end-to-end
  throughput under the GIL (see docs/store.md, "Performance");
- a *write* thread persists prepared chunks as one batch (for the store: one fsynced Parquet
  segment) when ``max_batch_size`` spans are ready or ``schedule_delay`` has passed, and converts
  stragglers itself when spans trickle in. All I/O happens there, never on the agent's thread;
- keeps the prepared-but-unwritten spans bounded (``max_queue_size``): when full, the ending
  thread waits up to ``max_wait`` for the writer (backpressure). If the writer is still stuck,
  chunks go to an *overflow* that a spool thread writes to the sink's local spool, and the agent
  stops waiting until the writer has caught up; if the spool is stuck as well, spans are dropped
  and counted. Spooled spans return to the store on a later successful write, on ``force_flush``
  and in the next process using the same store;
- counts everything: ``received == stored + spooled + dropped + queued`` at any moment, and
  ``failed`` counts spans whose write raised or was refused (then spooled or dropped);
- never raises into the agent; warns once per kind of trouble through :mod:`logging`;
- flushes at exit (``atexit``), on ``force_flush()`` and on ``shutdown()``, then records its
  counters as a ``prunegate.tracer.stats`` row when the sink supports it.
"""

from __future__ import annotations

import atexit
import collections
import logging
import os
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, attach, detach, set_value
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from tracer.errors import ExportFailed
from tracer.spans.direct import as_spans

log = logging.getLogger(__name__)

STAT_KEYS = ("received", "stored", "spooled", "recovered", "failed", "dropped")


@runtime_checkable
class Sink(Protocol):
    """Where spans go, in two steps:

    ``prepare(spans)`` turns a small chunk of spans into whatever the sink writes (cheap, pure,
    no I/O: it runs on the thread that ended the span);
    ``write(prepared_chunks)`` persists several prepared chunks as one batch, raising on failure.

    A sink may also be a :class:`SpoolingSink` (it keeps what a failed write leaves), a
    :class:`StatsSink` (it records the processor's counters at shutdown) and a :class:`RecordSink`
    (it takes span records); the processor checks which once, when it is built.
    """

    name: str

    def prepare(self, spans: Sequence[ReadableSpan]) -> Any: ...

    def write(self, prepared: list[Any]) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class SpoolingSink(Sink, Protocol):
    """A sink with a local spool: prepared chunks a write could not persist are kept on local disk
    (``spill``, False when even that failed) and moved into the sink later (``recover``, the spans
    moved); ``describe_spooled`` is the one line that says where they are and how to move them."""

    def spill(self, prepared: list[Any]) -> bool: ...

    def has_spilled(self) -> bool: ...

    def recover(self) -> int: ...

    def describe_spooled(self) -> str: ...


@runtime_checkable
class StatsSink(Sink, Protocol):
    """A sink that records the processor's counters (``STAT_KEYS`` and ``last_error``) at shutdown."""

    def write_stats(self, stats: Mapping[str, Any], resource: Mapping[str, Any]) -> None: ...


@runtime_checkable
class RecordSink(Sink, Protocol):
    """A sink whose ``prepare`` also takes span records (tuples, tracer.spans.direct) mixed with SDK
    spans when ``accepts_records`` is true; other sinks get records as SDK ``ReadableSpan`` objects."""

    accepts_records: bool


class ExporterSink:
    """Adapts any OpenTelemetry ``SpanExporter`` (e.g. OTLP) to the :class:`Sink` protocol.

    It has no spool: a failed export is counted as failed and dropped (the store keeps its own
    copy of every span when both are configured).
    """

    def __init__(self, exporter: SpanExporter, name: str | None = None) -> None:
        self.exporter = exporter
        self.name = name or type(exporter).__name__

    def prepare(self, spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
        return list(spans)

    def write(self, prepared: list[Any]) -> None:
        spans = [span for chunk in prepared for span in chunk]
        token = attach(set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
        try:
            result = self.exporter.export(spans)
        finally:
            detach(token)
        if result is not SpanExportResult.SUCCESS:
            raise ExportFailed(f"{self.name} returned {result!r}")

    def close(self) -> None:
        self.exporter.shutdown()


class SinkExporter(SpanExporter):
    """The other direction: a :class:`Sink` as a plain ``SpanExporter`` (e.g. the store behind the
    SDK's own processors). Failures become ``FAILURE`` results; nothing is spooled or counted."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            self.sink.write([self.sink.prepare(spans)])
        except Exception as exc:
            log.warning("prunegate: export to %s failed: %r", self.sink.name, exc)
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.sink.close()


class ReliableSpanProcessor(SpanProcessor):
    """Bounded-wait batching processor in front of a :class:`Sink` (see the module docstring)."""

    _shutdown: bool  # set by _init_state, read across a fork

    def __init__(
        self,
        sink: Sink,
        *,
        max_queue_size: int = 16384,
        max_batch_size: int = 8192,
        chunk_size: int = 256,
        schedule_delay: float = 1.0,
        max_wait: float = 0.5,
        overflow_size: int | None = None,
        recover_interval: float = 10.0,
        shutdown_timeout: float = 10.0,
    ) -> None:
        if chunk_size < 1 or max_batch_size < 1 or max_queue_size < chunk_size:
            raise ValueError("need chunk_size >= 1, max_batch_size >= 1 and max_queue_size >= chunk_size")
        self.sink = sink
        self.max_queue_size = max_queue_size
        self.max_batch_size = max_batch_size
        self.chunk_size = chunk_size
        self.schedule_delay = schedule_delay
        self.max_wait = max_wait
        self.overflow_size = overflow_size or max_queue_size
        self.recover_interval = recover_interval
        self.shutdown_timeout = shutdown_timeout
        self._records_ok = isinstance(sink, RecordSink) and bool(sink.accepts_records)  # else records become SDK spans
        self._spool: SpoolingSink | None = sink if isinstance(sink, SpoolingSink) else None
        self._stats_sink: StatsSink | None = sink if isinstance(sink, StatsSink) else None
        self._init_state()
        if hasattr(os, "register_at_fork"):
            ref = weakref.WeakMethod(self._after_fork)
            os.register_at_fork(after_in_child=lambda: (m := ref()) and m())
        ref_shutdown = weakref.WeakMethod(self.shutdown)
        atexit.register(lambda: (m := ref_shutdown()) and m())

    def _after_fork(self) -> None:
        """In a forked child: fresh locks, buffers and counters; a writer only if still running."""
        was_shut = self._shutdown
        self._init_state(start=not was_shut)
        self._shutdown = was_shut

    def _init_state(self, start: bool = True) -> None:
        """(Re)create locks, buffers, counters and the writer thread."""
        self._lock = threading.Lock()  # guards everything below except _raw
        self._work = threading.Condition(self._lock)  # the writer waits here
        self._room = threading.Condition(self._lock)  # producers wait here for pending room
        self._flushed = threading.Condition(self._lock)
        self._overflow_ready = threading.Condition(self._lock)
        self._overflow_room = threading.Condition(self._lock)
        self._convert_lock = threading.Lock()  # one converter at a time
        self._recover_lock = threading.Lock()
        self._raw: collections.deque[ReadableSpan] = collections.deque()  # appended without a lock
        # Spans move raw -> (converting) -> pending -> writing -> a final counter, or
        # pending-to-be -> overflow -> spooling -> spooled/dropped when the writer is stuck.
        self._taken = 0  # spans popped from _raw (under _convert_lock)
        self._direct_in = 0  # spans never buffered (ended after shutdown, or on_end failed)
        self._converting = 0
        self._pending: list[tuple[Any, int]] = []
        self._pending_rows = 0
        self._pending_since = 0.0
        self._writing = 0
        self._overflow: list[tuple[Any, int]] = []
        self._overflow_rows = 0
        self._spooling = 0
        self._counts = dict.fromkeys(STAT_KEYS[1:], 0)
        self._overflowing = False
        self._spill_stuck = False
        self._flush_req = 0
        self._flush_done = 0
        self._shutdown = False
        self._abandoned = False
        self._spool_abandoned = False
        self._warned: set[str] = set()
        self._last_error: str | None = None
        self._resource: Any = None
        self._need_recover = True
        self._last_recover = 0.0
        self._spooler: threading.Thread | None = None
        self._spooler_running = False
        self._writer = threading.Thread(target=self._run_write, name="prunegate-write", daemon=True)
        if start:
            self._writer.start()

    # -- the agent's side -------------------------------------------------------------------------
    def on_start(self, span: Any, parent_context: Any = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        """Buffer a finished span; every ``chunk_size`` spans prepare a chunk. Never raises;
        waits at most ``max_wait`` when the writer is behind."""
        try:
            if not span.context.trace_flags.sampled:
                return
            if self._shutdown:
                self._drop_direct("after-shutdown", "span ended after the tracer shut down; dropped")
                return
        except Exception as exc:  # a span object we cannot even read
            self._drop_direct("on-end", f"span could not be queued: {exc!r}")
            return
        raw = self._raw
        raw.append(span)
        if len(raw) >= self.chunk_size and self._convert_lock.acquire(blocking=False):
            try:
                self._convert(self.chunk_size, wait=True)
            finally:
                self._convert_lock.release()

    def on_end_record(self, record: tuple) -> None:
        """Buffer a finished span given as a span record (tracer.spans.direct; its session checked
        sampling); otherwise the same as :meth:`on_end`. Never raises."""
        if self._shutdown:
            self._drop_direct("after-shutdown", "span ended after the tracer shut down; dropped")
            return
        raw = self._raw
        raw.append(record)  # type: ignore[arg-type]  # records and SDK spans share the buffer
        if len(raw) >= self.chunk_size and self._convert_lock.acquire(blocking=False):
            try:
                self._convert(self.chunk_size, wait=True)
            finally:
                self._convert_lock.release()

    def _drop_direct(self, kind: str, message: str) -> None:
        with self._lock:
            self._direct_in += 1
            self._counts["dropped"] += 1
        self._warn_once(kind, message)

    def _convert(self, limit: int | None, *, wait: bool) -> None:
        """(``_convert_lock`` held.) Pop up to ``limit`` raw spans, prepare them, queue the result.
        Never raises: a span that cannot be prepared is dropped and counted."""
        raw = self._raw
        k = len(raw) if limit is None else min(limit, len(raw))
        if k <= 0:
            return
        chunk = [raw.popleft() for _ in range(k)]
        with self._lock:
            self._taken += k
            self._converting += k
        if self._resource is None:
            first: Any = chunk[0]
            self._resource = first[-1].resource if type(first) is tuple else getattr(first, "resource", None)
        for prepared, n in self._prepare(chunk):
            self._enqueue(prepared, n, wait=wait)

    def _prepare(self, chunk: list[ReadableSpan]) -> list[tuple[Any, int]]:
        if not self._records_ok:  # a sink that takes SDK spans only: build them from the records
            try:
                chunk = as_spans(chunk)
            except Exception as exc:
                self._note_error("prepare", exc)
        try:
            return [(self.sink.prepare(chunk), len(chunk))]
        except Exception as exc:
            self._note_error("prepare", exc)
        out = []
        for span in chunk:  # isolate the bad span(s), keep the rest
            try:
                out.append((self.sink.prepare([span]), 1))
            except Exception:
                with self._lock:
                    self._converting -= 1
                    self._counts["dropped"] += 1
                    self._counts["failed"] += 1
        return out

    def _enqueue(self, prepared: Any, n: int, *, wait: bool) -> None:
        """Hand a prepared chunk to the writer; if it is stuck, to the spool thread (bounded waits).

        ``wait`` is False when the writer itself converts: it never waits for itself."""
        with self._lock:
            if wait and not self._overflowing and self._pending_rows + n > self.max_queue_size:
                deadline = time.monotonic() + self.max_wait
                self._work.notify()
                while self._pending_rows + n > self.max_queue_size and not self._shutdown:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        self._overflowing = True
                        self._warn_once(
                            "overflow",
                            f"writing to {self.sink.name} made no room for {self.max_wait}s; "
                            "sending spans to the spool instead of waiting",
                        )
                        break
                    self._room.wait(remaining)
            self._converting -= n  # (counted as "converting" until it has a place)
            if self._overflowing and wait:
                self._to_overflow(prepared, n)
                return
            if not self._pending:
                self._pending_since = time.monotonic()
            self._pending.append((prepared, n))
            self._pending_rows += n
            if self._pending_rows >= self.max_batch_size:
                self._work.notify()

    def _to_overflow(self, prepared: Any, n: int) -> None:
        """(Lock held.) Queue for the spool thread; drop (counted) only if that is stuck too."""
        if self._overflow_rows + n > self.overflow_size and not self._spill_stuck:
            self._converting += n  # still queued while we wait
            deadline = time.monotonic() + self.max_wait
            while self._overflow_rows + n > self.overflow_size and time.monotonic() < deadline:
                self._overflow_room.wait(deadline - time.monotonic())
            if self._overflow_rows + n > self.overflow_size:
                self._spill_stuck = True
            self._converting -= n
        if self._overflow_rows + n > self.overflow_size:
            self._counts["dropped"] += n
            self._warn_once("dropped", f"both {self.sink.name} and its spool are stuck; dropping spans")
            return
        self._overflow.append((prepared, n))
        self._overflow_rows += n
        if not self._spooler_running:
            self._spooler_running = True
            self._spooler = threading.Thread(target=self._run_spooler, name="prunegate-spool", daemon=True)
            self._spooler.start()
        self._overflow_ready.notify()

    # -- write thread ----------------------------------------------------------------------------
    def _run_write(self) -> None:
        self._try_recover(force=True)
        tick = min(self.schedule_delay, 0.25)
        last_taken = -1
        while True:
            with self._lock:
                if self._abandoned:
                    return
                flush_gen = self._flush_req if self._flush_req > self._flush_done else 0
                stopping = self._shutdown
                due = self._pending_rows >= self.max_batch_size or (
                    bool(self._pending) and time.monotonic() - self._pending_since >= self.schedule_delay
                )
                idle_raw = bool(self._raw) and self._taken == last_taken  # no conversion since last look
                last_taken = self._taken
                if not (due or flush_gen or stopping or idle_raw):
                    self._work.wait(tick)
                    continue
            if flush_gen or stopping:
                # Drain first (a producer converting right now may be waiting for room), then take
                # the stragglers, then write what that produced.
                self._write_pending(all_of_it=True)
                with self._convert_lock:
                    self._convert(None, wait=False)
                self._write_pending(all_of_it=True)
            else:
                if idle_raw and self._convert_lock.acquire(blocking=False):
                    try:  # spans trickling in: convert the partial chunk here (cold path)
                        self._convert(None, wait=False)
                    finally:
                        self._convert_lock.release()
                if due:  # converted stragglers wait for their batch to be due like the rest
                    self._write_pending(all_of_it=False)
            if flush_gen:
                self._finish_flush(flush_gen)
            elif stopping:
                with self._lock:
                    if not (self._raw or self._pending):
                        return

    def _write_pending(self, all_of_it: bool) -> None:
        while True:
            with self._lock:
                if not self._pending or self._abandoned:
                    return
                items, rows = self._pending, self._pending_rows
                self._pending, self._pending_rows = [], 0
                self._writing = rows
                self._room.notify_all()
            self._write(items, rows)
            if not all_of_it:
                return

    def _write(self, items: list[tuple[Any, int]], rows: int) -> None:
        prepared = [p for p, _ in items]
        try:
            self.sink.write(prepared)
        except Exception as exc:
            if self._abandoned:
                return
            self._note_error("write", exc)
            with self._lock:
                self._counts["failed"] += rows
            self._spill(prepared, rows, source="writing")
            return
        with self._lock:
            if self._abandoned:
                return
            self._counts["stored"] += rows
            self._writing = 0
            self._overflowing = False  # the writer is moving again: producers may wait for it again
        self._try_recover()

    def _spill(self, prepared: list[Any], rows: int, *, source: str) -> None:
        """Persist prepared chunks via the sink's spool, else count them dropped.

        ``source`` names the counter the rows leave: ``writing``, ``spooling`` or ``sweep``."""
        spool = self._spool
        try:
            ok = bool(spool.spill(prepared)) if spool is not None else False
        except Exception as exc:
            ok = False
            self._note_error("spool", exc)
        with self._lock:
            if source == "spooling":
                if self._spool_abandoned:
                    return  # already counted as dropped by shutdown
                self._spooling -= rows
                self._flushed.notify_all()
            elif source == "writing":
                if self._abandoned:
                    return
                self._writing = 0
            self._counts["spooled" if ok else "dropped"] += rows
            if ok:
                self._need_recover = True
        if not ok:
            self._warn_once("lost", f"{rows} spans could not be stored nor spooled (sink {self.sink.name})")

    def _finish_flush(self, gen: int) -> None:
        """Everything prepared is written: let the spooler finish, retry the spool, release waiters."""
        with self._lock:
            while (self._overflow or self._spooling) and self._spooler_running:
                self._flushed.wait(0.05)
        self._try_recover(force=True)
        with self._lock:
            self._flush_done = max(self._flush_done, gen)
            self._flushed.notify_all()

    def _try_recover(self, force: bool = False) -> None:
        """Move spooled spans back into the sink (after a success, on flush, at start)."""
        spool = self._spool
        if spool is None or not self._need_recover:
            return
        if not force and time.monotonic() - self._last_recover < self.recover_interval:
            return
        with self._recover_lock:
            self._last_recover = time.monotonic()
            try:
                if not spool.has_spilled():
                    self._need_recover = False
                    return
                moved = spool.recover()
            except Exception as exc:
                self._note_error("recover", exc)
                return
            with self._lock:
                self._counts["recovered"] += moved
            self._need_recover = False

    # -- spool thread (only while the writer is stuck) -------------------------------------------
    def _run_spooler(self) -> None:
        while True:
            with self._lock:
                while not self._overflow:
                    if self._shutdown or not self._overflow_ready.wait(5.0):
                        if not self._overflow or self._spool_abandoned:
                            self._spooler_running = False  # restarted by _to_overflow when needed
                            self._flushed.notify_all()
                            return
                items, rows = self._overflow, self._overflow_rows
                self._overflow, self._overflow_rows = [], 0
                self._spooling += rows
                self._spill_stuck = False
                self._overflow_room.notify_all()
            self._spill([p for p, _ in items], rows, source="spooling")
            with self._lock:
                if self._spool_abandoned:
                    return

    # -- reporting -------------------------------------------------------------------------------
    def _warn_once(self, kind: str, message: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            log.warning("prunegate tracer: %s", message)

    def _note_error(self, kind: str, exc: BaseException) -> None:
        self._last_error = f"{kind}: {type(exc).__name__}: {exc}"
        self._warn_once(kind, f"{kind} failed for sink {self.sink.name}: {exc!r} (counted; see stats())")

    def stats(self) -> dict[str, Any]:
        """Counters (see the module docstring) plus ``queued`` (not yet final) and ``last_error``."""
        with self._lock:
            raw = len(self._raw)
            return {
                "received": self._taken + raw + self._direct_in,
                **self._counts,
                "queued": raw
                + self._converting
                + self._pending_rows
                + self._writing
                + self._overflow_rows
                + self._spooling,
                "last_error": self._last_error,
            }

    # -- flush / shutdown ------------------------------------------------------------------------
    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Write everything buffered (spilling what fails) and retry the spool; False on timeout."""
        deadline = time.monotonic() + timeout_millis / 1000
        with self._lock:
            if self._shutdown:
                return True
            self._flush_req += 1
            gen = self._flush_req
            self._work.notify_all()
            while self._flush_done < gen:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._flushed.wait(remaining)
        return True

    def shutdown(self) -> None:
        """Flush (bounded by ``shutdown_timeout``), stop the threads, record stats. Idempotent."""
        with self._lock:
            if self._shutdown:
                return
        deadline = time.monotonic() + self.shutdown_timeout
        self.force_flush(int(self.shutdown_timeout * 1000))
        with self._lock:
            self._shutdown = True
            self._work.notify_all()
            self._room.notify_all()
            self._overflow_ready.notify_all()
        if self._writer.is_alive():
            self._writer.join(max(0.0, deadline - time.monotonic()))
        self._sweep(self._writer.is_alive(), deadline)
        spooler = self._spooler
        if spooler is not None:
            spooler.join(max(0.0, deadline - time.monotonic()))
            if spooler.is_alive():  # the spool itself hangs: what it still holds is lost
                with self._lock:
                    self._spool_abandoned = True
                    lost = self._overflow_rows + self._spooling
                    self._overflow, self._overflow_rows, self._spooling = [], 0, 0
                    self._counts["dropped"] += lost
                self._warn_once("spool-hung", f"spool hung at shutdown; {lost} spans counted as dropped")
        self._record_stats()
        try:
            self.sink.close()
        except Exception as exc:
            self._note_error("close", exc)

    def _sweep(self, stuck: bool, deadline: float) -> None:
        """After the writer stopped (or hung in the sink): spill whatever is still held.

        Runs in a helper thread joined until ``deadline`` (at least half a second): a spool on a
        hung disk must not hang the agent's exit either. What it has not finished by then is
        counted as dropped."""
        raw, pending = self._take_held(stuck)
        if raw or pending:
            self._spill_held(raw, pending, deadline)

    def _take_held(self, stuck: bool) -> tuple[list[ReadableSpan], list[tuple[Any, int]]]:
        """Take the spans not yet written (raw, and prepared but pending) out of the pipeline's hands.

        With ``stuck``, a write that hung in the sink is abandoned and its spans counted as dropped."""
        got_lock = self._convert_lock.acquire(timeout=0.5)
        try:
            with self._lock:
                if stuck:
                    self._abandoned = True
                raw = list(self._raw)
                self._raw.clear()
                self._taken += len(raw)
                self._converting += len(raw)
                pending, self._pending, self._pending_rows = self._pending, [], 0
                handed, self._writing = (self._writing, 0) if stuck else (0, self._writing)
                self._counts["dropped"] += handed
                self._converting += sum(n for _, n in pending)
        finally:
            if got_lock:
                self._convert_lock.release()
        if handed:
            self._warn_once(
                "abandoned",
                f"{handed} spans were inside a hung {self.sink.name} write at shutdown; "
                "counted as dropped (they may or may not have been written)",
            )
        return raw, pending

    def _spill_held(self, raw: list[ReadableSpan], pending: list[tuple[Any, int]], deadline: float) -> None:
        """Spool what :meth:`_take_held` took, in a helper thread given until ``deadline``; the rest is dropped."""
        left = [len(raw) + sum(n for _, n in pending)]
        gone = [False]

        def run() -> None:
            work = list(pending) + (self._prepare(raw) if raw else [])
            with self._lock:  # spans _prepare dropped are already counted
                left[0] = sum(n for _, n in work)
            spool = self._spool
            for prepared, n in work:
                try:
                    ok = bool(spool.spill([prepared])) if spool is not None else False
                except Exception as exc:
                    ok = False
                    self._note_error("spool", exc)
                with self._lock:
                    if gone[0]:
                        return
                    left[0] -= n
                    self._converting -= n
                    self._counts["spooled" if ok else "dropped"] += n
                if not ok:
                    self._warn_once(
                        "lost", f"{n} spans could not be stored nor spooled (sink {self.sink.name})"
                    )

        helper = threading.Thread(target=run, name="prunegate-sweep", daemon=True)
        helper.start()
        helper.join(max(0.5, deadline - time.monotonic()))
        if helper.is_alive():
            with self._lock:
                gone[0] = True
                self._counts["dropped"] += left[0]
                self._converting -= left[0]
            self._warn_once("spool-hung", f"spool hung at shutdown; {left[0]} spans counted as dropped")

    def _record_stats(self) -> None:
        stats = self.stats()
        if stats["received"] == 0:
            return
        if stats["failed"] or stats["dropped"] or stats["spooled"]:
            log.warning("prunegate tracer (%s) at shutdown: %s", self.sink.name, stats)
            if self._spool is not None and stats["spooled"] > stats["recovered"]:
                try:
                    log.warning("prunegate tracer: %s", self._spool.describe_spooled())
                except Exception as exc:
                    self._note_error("spool", exc)
        if self._stats_sink is None:
            return
        resource = getattr(self._resource, "attributes", None) or {}
        try:
            self._stats_sink.write_stats({k: stats[k] for k in STAT_KEYS} | {"last_error": stats["last_error"]}, resource)
        except Exception as exc:
            self._note_error("stats", exc)
