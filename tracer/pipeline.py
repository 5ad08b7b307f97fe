"""A span processor that never loses a span silently.

The SDK's ``BatchSpanProcessor`` drops the oldest span when its queue is full and only logs an
export failure. :class:`ReliableSpanProcessor` instead:

- keeps a bounded queue; when it is full the ending thread waits up to ``max_wait`` seconds for
  room (backpressure). If the sink is still stuck, the span goes to an *overflow* queue that a
  second thread spills to the sink's on-disk spool, so the agent is never held longer than that;
- works in two background threads: a *prepare* thread turns small chunks of spans into the sink's
  form as soon as they arrive (for the store: Arrow, which frees the span objects early and keeps
  the garbage collector's work small), and a *write* thread persists the prepared chunks as one
  batch (for the store: one fsynced Parquet segment) when ``max_batch_size`` spans are ready or
  ``schedule_delay`` has passed. A slow disk delays writing, never the draining of the queue;
- on a write error spills the batch to the spool; spans come back from the spool into the store
  on a later successful write, on ``force_flush`` and in the next process using the same store;
- counts everything: ``received == stored + spooled + dropped + queued`` at any moment, and
  ``failed`` counts spans whose write raised or was refused. ``dropped`` only grows when even
  the spool refused (disk full), the sink has no spool, or a span could not be converted at all;
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
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, attach, detach, set_value
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

log = logging.getLogger(__name__)

STAT_KEYS = ("received", "stored", "spooled", "recovered", "failed", "dropped")


@runtime_checkable
class Sink(Protocol):
    """Where spans go, in two steps run by the processor's background threads:

    ``prepare(spans)`` turns a small chunk of spans into whatever the sink writes (cheap, pure);
    ``write(prepared_chunks)`` persists several prepared chunks as one batch, raising on failure.
    Optional, duck-typed: ``spill(prepared_chunks) -> bool`` (persist locally for a retry),
    ``has_spilled() -> bool``, ``recover() -> int``, ``write_stats(stats, resource)``.
    """

    name: str

    def prepare(self, spans: Sequence[ReadableSpan]) -> Any: ...

    def write(self, prepared: list[Any]) -> None: ...

    def close(self) -> None: ...


class ExportFailed(RuntimeError):
    """An exporter returned FAILURE instead of raising."""


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
    """Bounded-wait batching processor in front of a :class:`Sink` (see the module docstring).

    The agent's thread only appends to a deque (atomic under the GIL, no lock) unless the queue is
    full. Taking a lock per span would make the background threads queue behind the agent for
    that lock and starve them.
    """

    def __init__(
        self,
        sink: Sink,
        *,
        max_queue_size: int = 8192,
        max_batch_size: int = 8192,
        chunk_size: int = 256,
        chunk_delay: float = 0.05,
        schedule_delay: float = 1.0,
        max_wait: float = 0.5,
        overflow_size: int | None = None,
        recover_interval: float = 10.0,
        shutdown_timeout: float = 10.0,
    ) -> None:
        if not 1 <= chunk_size <= max_queue_size or max_batch_size < 1:
            raise ValueError("need 1 <= chunk_size <= max_queue_size and max_batch_size >= 1")
        self.sink = sink
        self.max_queue_size = max_queue_size
        self.max_batch_size = max_batch_size
        self.chunk_size = chunk_size
        self.chunk_delay = chunk_delay
        self.schedule_delay = schedule_delay
        self.max_wait = max_wait
        self.overflow_size = overflow_size or max_queue_size
        self.recover_interval = recover_interval
        self.shutdown_timeout = shutdown_timeout
        self._init_state()
        if hasattr(os, "register_at_fork"):
            ref = weakref.WeakMethod(self._after_fork)
            os.register_at_fork(after_in_child=lambda: (m := ref()) and m())
        ref_shutdown = weakref.WeakMethod(self.shutdown)
        atexit.register(lambda: (m := ref_shutdown()) and m())

    def _after_fork(self) -> None:
        """In a forked child: fresh locks, queues and counters; threads only if still running."""
        was_shut = self._shutdown
        self._init_state(start=not was_shut)
        self._shutdown = was_shut

    def _init_state(self, start: bool = True) -> None:
        """(Re)create locks, queues, counters and the background threads."""
        self._lock = threading.Lock()
        self._not_full = threading.Condition(self._lock)
        self._write_ready = threading.Condition(self._lock)
        self._flushed = threading.Condition(self._lock)
        self._overflow_ready = threading.Condition(self._lock)
        self._overflow_room = threading.Condition(self._lock)
        self._recover_lock = threading.Lock()
        self._wake = threading.Event()
        self._queue: collections.deque[ReadableSpan] = collections.deque()
        self._overflow: collections.deque[ReadableSpan] = collections.deque()
        # Spans move queue -> pending (prepared) -> handoff (being written) -> a final counter.
        self._pending: list[tuple[Any, int]] = []
        self._pending_rows = 0
        self._pending_since = 0.0
        self._handoff: list[tuple[Any, int]] | None = None
        # received == popped + len(queue) + overflow_in + direct_in (see stats())
        self._popped = 0
        self._overflow_in = 0
        self._direct_in = 0
        self._counts = dict.fromkeys(STAT_KEYS[1:], 0)
        self._in_flight = 0  # popped, not yet final (being prepared, pending or handed off)
        self._overflow_in_flight = 0
        self._overflowing = False
        self._spill_stuck = False
        self._flush_req = 0
        self._flush_done = 0
        self._shutdown = False
        self._prepare_done = False
        self._abandoned = False
        self._spool_abandoned = False
        self._warned: set[str] = set()
        self._last_error: str | None = None
        self._resource: Any = None
        self._need_recover = True
        self._last_recover = 0.0
        self._spooler: threading.Thread | None = None
        self._spooler_running = False
        self._preparer = threading.Thread(target=self._run_prepare, name="prunegate-prepare", daemon=True)
        self._writer = threading.Thread(target=self._run_write, name="prunegate-write", daemon=True)
        if start:
            self._preparer.start()
            self._writer.start()

    # -- the agent's side -------------------------------------------------------------------------
    def on_start(self, span: Any, parent_context: Any = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        """Enqueue a finished span; waits at most ``max_wait`` when the queue is full. Never raises."""
        try:
            if not span.context.trace_flags.sampled:
                return
            queue = self._queue
            if len(queue) < self.max_queue_size and not self._overflowing and not self._shutdown:
                queue.append(span)
                if len(queue) >= self.chunk_size and not self._wake.is_set():
                    self._wake.set()
                return
            self._on_end_slow(span)
        except Exception as exc:  # tracing must never break the agent
            with self._lock:
                self._direct_in += 1
                self._counts["dropped"] += 1
            self._warn_once("on-end", f"span could not be queued: {exc!r}")

    def _on_end_slow(self, span: ReadableSpan) -> None:
        with self._lock:
            if self._shutdown:
                self._direct_in += 1
                self._counts["dropped"] += 1
                self._warn_once("after-shutdown", "span ended after the tracer shut down; dropped")
                return
            if not self._overflowing and self._wait_for_room():
                self._queue.append(span)
                return
            self._to_overflow(span)

    def _wait_for_room(self) -> bool:
        """Backpressure (lock held): wait up to ``max_wait`` for the prepare thread to make room."""
        deadline = time.monotonic() + self.max_wait
        self._wake.set()
        while len(self._queue) >= self.max_queue_size:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._shutdown:
                self._overflowing = True
                self._warn_once(
                    "overflow",
                    f"export to {self.sink.name} made no room for {self.max_wait}s; "
                    "spilling spans to the spool instead of waiting longer",
                )
                return False
            self._not_full.wait(remaining)
        return True

    def _to_overflow(self, span: ReadableSpan) -> None:
        """Lock held. Hand the span to the spooler thread; drop (counted) only if that is stuck too."""
        self._overflow_in += 1
        if len(self._overflow) >= self.overflow_size and not self._spill_stuck:
            deadline = time.monotonic() + self.max_wait
            while len(self._overflow) >= self.overflow_size and time.monotonic() < deadline:
                self._overflow_room.wait(deadline - time.monotonic())
            if len(self._overflow) >= self.overflow_size:
                self._spill_stuck = True
        if len(self._overflow) >= self.overflow_size:
            self._counts["dropped"] += 1
            self._warn_once("dropped", f"both {self.sink.name} and its spool are stuck; dropping spans")
            return
        self._overflow.append(span)
        if not self._spooler_running:
            self._spooler_running = True
            self._spooler = threading.Thread(target=self._run_spooler, name="prunegate-spool", daemon=True)
            self._spooler.start()
        self._overflow_ready.notify()

    # -- prepare thread --------------------------------------------------------------------------
    def _run_prepare(self) -> None:
        timed_out = False
        try:
            while True:
                self._wake.clear()
                with self._lock:
                    if self._abandoned:
                        return
                    flush_gen = self._flush_req if self._flush_req > self._flush_done else 0
                    stopping = self._shutdown
                    backlog = self._pending_rows >= self.max_batch_size and self._handoff is not None
                urgent = bool(flush_gen) or stopping
                chunk = [] if backlog else self._take(force=urgent or timed_out)
                if chunk:
                    self._prepare(chunk)
                with self._lock:
                    self._maybe_hand_off(urgent and not chunk)
                    idle = not (self._queue or self._pending or self._handoff is not None)
                if chunk:
                    continue
                if flush_gen and idle:
                    self._finish_flush(flush_gen)
                    continue
                if stopping and idle:
                    return
                timeout = self.chunk_delay
                if self._pending:
                    timeout = min(
                        timeout, max(0.001, self._pending_since + self.schedule_delay - time.monotonic())
                    )
                timed_out = not self._wake.wait(timeout)
        finally:
            with self._lock:
                self._prepare_done = True
                self._write_ready.notify_all()

    def _take(self, force: bool) -> list[ReadableSpan]:
        """Pop up to ``chunk_size`` spans: a full chunk, or whatever is there when forced."""
        with self._lock:
            queue = self._queue
            n = len(queue)
            if not n or (n < self.chunk_size and not force):
                return []
            k = min(n, self.chunk_size)
            chunk = [queue.popleft() for _ in range(k)]
            self._popped += k
            self._in_flight += k
            if self._overflowing and len(queue) <= self.max_queue_size // 2:
                self._overflowing = False
            self._not_full.notify_all()
        if self._resource is None:
            self._resource = chunk[0].resource
        return chunk

    def _prepare(self, chunk: list[ReadableSpan]) -> None:
        """Convert a chunk now (frees the span objects); a span that cannot be converted is dropped."""
        try:
            prepared = [(self.sink.prepare(chunk), len(chunk))]
        except Exception as exc:
            self._note_error("prepare", exc)
            prepared = []
            for span in chunk:  # isolate the bad span(s), keep the rest
                try:
                    prepared.append((self.sink.prepare([span]), 1))
                except Exception:
                    self._finalize(dropped=1, failed=1)
        with self._lock:
            for item in prepared:
                if not self._pending:
                    self._pending_since = time.monotonic()
                self._pending.append(item)
                self._pending_rows += item[1]

    def _maybe_hand_off(self, drain: bool) -> None:
        """Lock held: give the pending batch to the writer when it is idle and the batch is due."""
        if not self._pending or self._handoff is not None:
            return
        due = (
            self._pending_rows >= self.max_batch_size
            or time.monotonic() - self._pending_since >= self.schedule_delay
        )
        if due or drain:
            self._handoff, self._pending, self._pending_rows = self._pending, [], 0
            self._write_ready.notify()

    # -- write thread ----------------------------------------------------------------------------
    def _run_write(self) -> None:
        self._try_recover(force=True)
        while True:
            with self._lock:
                while self._handoff is None:
                    if self._abandoned or (self._prepare_done and self._handoff is None):
                        return
                    self._write_ready.wait(1.0)
                items = self._handoff
            self._write(items)
            with self._lock:
                self._handoff = None
            self._wake.set()  # the prepare thread may hand off the next batch or finish a flush

    def _write(self, items: list[tuple[Any, int]]) -> None:
        rows = sum(n for _, n in items)
        prepared = [p for p, _ in items]
        try:
            self.sink.write(prepared)
        except Exception as exc:
            if self._abandoned:
                return
            self._note_error("write", exc)
            self._finalize(failed=rows)
            self._spill(prepared, rows)
            return
        if self._abandoned:
            return
        self._finalize(stored=rows)
        self._try_recover()

    def _finalize(self, *, stored: int = 0, spooled: int = 0, dropped: int = 0, failed: int = 0) -> None:
        """Move spans taken from the queue into their final counters."""
        with self._lock:
            c = self._counts
            c["stored"] += stored
            c["spooled"] += spooled
            c["dropped"] += dropped
            c["failed"] += failed
            self._in_flight -= stored + spooled + dropped

    def _spill(self, prepared: list[Any], rows: int, from_spooler: bool = False) -> None:
        """Persist prepared chunks via the sink's spool, else count them dropped."""
        spill = getattr(self.sink, "spill", None)
        try:
            ok = bool(spill(prepared)) if spill is not None else False
        except Exception as exc:
            ok = False
            self._note_error("spool", exc)
        if from_spooler:
            with self._lock:
                if self._spool_abandoned:
                    return  # already counted as dropped by shutdown
                self._counts["spooled" if ok else "dropped"] += rows
                self._overflow_in_flight -= rows
                self._flushed.notify_all()
        elif ok:
            self._finalize(spooled=rows)
        else:
            self._finalize(dropped=rows)
        if ok:
            self._need_recover = True
        else:
            self._warn_once("lost", f"{rows} spans could not be stored nor spooled (sink {self.sink.name})")

    def _try_recover(self, force: bool = False) -> None:
        """Move spooled spans back into the sink (after a success, on flush, at start)."""
        recover = getattr(self.sink, "recover", None)
        if recover is None or not self._need_recover:
            return
        if not force and time.monotonic() - self._last_recover < self.recover_interval:
            return
        with self._recover_lock:
            self._last_recover = time.monotonic()
            try:
                has = getattr(self.sink, "has_spilled", None)
                if has is not None and not has():
                    self._need_recover = False
                    return
                moved = recover()
            except Exception as exc:
                self._note_error("recover", exc)
                return
            with self._lock:
                self._counts["recovered"] += moved
            self._need_recover = False

    # -- spooler thread (only while the queue is stuck) ------------------------------------------
    def _run_spooler(self) -> None:
        while True:
            with self._lock:
                while not self._overflow:
                    if self._shutdown or not self._overflow_ready.wait(5.0):
                        if not self._overflow or self._spool_abandoned:
                            self._spooler_running = False  # restarted by _to_overflow when needed
                            self._flushed.notify_all()
                            return
                k = min(len(self._overflow), self.max_batch_size)
                batch = [self._overflow.popleft() for _ in range(k)]
                self._overflow_in_flight += k
                if len(self._overflow) <= self.overflow_size // 2:
                    self._spill_stuck = False
                self._overflow_room.notify_all()
            self._spill_spans(batch)
            with self._lock:
                if self._spool_abandoned:
                    return

    def _spill_spans(self, spans: list[ReadableSpan]) -> None:
        """Overflow spans (counted in ``_overflow_in_flight``) -> prepare -> spool."""
        try:
            prepared = [self.sink.prepare(spans)]
        except Exception as exc:
            self._note_error("prepare", exc)
            with self._lock:
                self._counts["dropped"] += len(spans)
                self._overflow_in_flight -= len(spans)
            return
        self._spill(prepared, len(spans), from_spooler=True)

    def _finish_flush(self, gen: int) -> None:
        """Everything taken is written: let the spooler finish, retry the spool, release waiters."""
        with self._lock:
            while (self._overflow or self._overflow_in_flight) and self._spooler_running:
                self._flushed.wait(0.05)
            leftovers = list(self._overflow)
            self._overflow.clear()
            self._overflow_in_flight += len(leftovers)
        if leftovers:  # the spooler idled out with work left: spill here
            self._spill_spans(leftovers)
        self._try_recover(force=True)
        with self._lock:
            self._flush_done = max(self._flush_done, gen)
            self._flushed.notify_all()

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
            qlen, olen = len(self._queue), len(self._overflow)
            return {
                "received": self._popped + qlen + self._overflow_in + self._direct_in,
                **self._counts,
                "queued": qlen + olen + self._in_flight + self._overflow_in_flight,
                "last_error": self._last_error,
            }

    # -- flush / shutdown ------------------------------------------------------------------------
    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Write everything queued (spilling what fails) and retry the spool; False on timeout."""
        deadline = time.monotonic() + timeout_millis / 1000
        with self._lock:
            if self._shutdown:
                return True
            self._flush_req += 1
            gen = self._flush_req
        self._wake.set()
        with self._lock:
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
            self._overflow_ready.notify_all()
            self._write_ready.notify_all()
        self._wake.set()
        for thread in (self._preparer, self._writer):
            if thread.is_alive():
                thread.join(max(0.0, deadline - time.monotonic()))
        self._sweep(self._preparer.is_alive() or self._writer.is_alive(), deadline)
        spooler = self._spooler
        if spooler is not None:
            spooler.join(max(0.0, deadline - time.monotonic()))
            if spooler.is_alive():  # the spool itself hangs: what it still holds is lost
                with self._lock:
                    self._spool_abandoned = True
                    lost = len(self._overflow) + self._overflow_in_flight
                    self._overflow.clear()
                    self._overflow_in_flight = 0
                    self._counts["dropped"] += lost
                self._warn_once("spool-hung", f"spool hung at shutdown; {lost} spans counted as dropped")
        self._record_stats()
        try:
            self.sink.close()
        except Exception as exc:
            self._note_error("close", exc)

    def _sweep(self, stuck: bool, deadline: float) -> None:
        """After the threads stopped (or hung in the sink): spill whatever is still held.

        Runs in a helper thread joined until ``deadline`` (at least half a second): a spool on a
        hung disk must not hang the agent's exit either. What it has not finished by then is
        counted as dropped."""
        with self._lock:
            if stuck:
                self._abandoned = True
            leftovers = list(self._queue)
            self._queue.clear()
            self._popped += len(leftovers)
            self._in_flight += len(leftovers)
            pending, self._pending, self._pending_rows = self._pending, [], 0
            handed = sum(n for _, n in self._handoff or ()) if stuck else 0
        if handed:
            self._finalize(dropped=handed)
            self._warn_once(
                "abandoned",
                f"{handed} spans were inside a hung {self.sink.name} write at shutdown; "
                "counted as dropped (they may or may not have been written)",
            )
        work: list[tuple[Any, int]] = (
            [([p for p, _ in pending], sum(n for _, n in pending))] if pending else []
        )
        work += [
            (leftovers[i : i + self.max_batch_size], -1)
            for i in range(0, len(leftovers), self.max_batch_size)
        ]
        if not work:
            return
        left = [sum(len(w) if n < 0 else n for w, n in work)]
        gone = [False]

        def run() -> None:
            for item, rows in work:
                ok, failed = False, 0
                if rows < 0:  # raw spans from the queue: prepare first
                    rows = len(item)
                    try:
                        item = [self.sink.prepare(item)]
                    except Exception as exc:
                        self._note_error("prepare", exc)
                        item, failed = None, rows
                if item is not None:
                    try:
                        spill = getattr(self.sink, "spill", None)
                        ok = bool(spill(item)) if spill is not None else False
                    except Exception as exc:
                        self._note_error("spool", exc)
                with self._lock:
                    if gone[0]:
                        return
                    left[0] -= rows
                    self._counts["spooled" if ok else "dropped"] += rows
                    self._counts["failed"] += failed
                    self._in_flight -= rows
                if not ok:
                    self._warn_once(
                        "lost", f"{rows} spans could not be stored nor spooled (sink {self.sink.name})"
                    )

        helper = threading.Thread(target=run, name="prunegate-sweep", daemon=True)
        helper.start()
        helper.join(max(0.5, deadline - time.monotonic()))
        if helper.is_alive():
            with self._lock:
                gone[0] = True
                self._counts["dropped"] += left[0]
                self._in_flight -= left[0]
            self._warn_once("spool-hung", f"spool hung at shutdown; {left[0]} spans counted as dropped")

    def _record_stats(self) -> None:
        stats = self.stats()
        if stats["received"] == 0:
            return
        if stats["failed"] or stats["dropped"] or stats["spooled"]:
            log.warning("prunegate tracer (%s) at shutdown: %s", self.sink.name, stats)
        write_stats = getattr(self.sink, "write_stats", None)
        if write_stats is None:
            return
        resource = getattr(self._resource, "attributes", None) or {}
        try:
            write_stats({k: stats[k] for k in STAT_KEYS} | {"last_error": stats["last_error"]}, resource)
        except Exception as exc:
            self._note_error("stats", exc)
