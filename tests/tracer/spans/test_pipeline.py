"""The span pipeline: nothing dropped silently, nothing raised into the agent, bounded waits.

Failures are real where they can be: a store path under a regular file (fails for root too), a
file-size limit (EFBIG, the "disk full" of one process), another process holding spans.duckdb.
Only the "exporter that raises / hangs" cases use small exporter classes, since that is the thing
under test.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from tracer.spans import ExporterSink, ReliableSpanProcessor
from tracer.store import Store
from tracer.store.sink import StoreSink
from tracer.store.spool import Spool


def _provider(proc: ReliableSpanProcessor) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": "pipeline-test"}), shutdown_on_exit=False)
    provider.add_span_processor(proc)
    return provider


def _spans(provider: TracerProvider, n: int, session: str = "p") -> None:
    tracer = provider.get_tracer("pipeline")
    for i in range(n):
        with tracer.start_as_current_span("step", attributes={"prunegate.session.id": session, "prunegate.seq": i}):
            pass


def _accounted(stats: dict) -> int:
    return stats["stored"] + stats["spooled"] + stats["dropped"] + stats["queued"]


def test_every_span_stored_and_counted(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    proc = ReliableSpanProcessor(StoreSink(store, spool_dir=tmp_path / "spool"), chunk_size=64, max_batch_size=300)
    provider = _provider(proc)
    _spans(provider, 1000)
    assert proc.force_flush()
    stats = proc.stats()
    assert stats["received"] == stats["stored"] == 1000
    assert stats["queued"] == stats["spooled"] == stats["dropped"] == stats["failed"] == 0
    assert store.count() == 1000
    provider.shutdown()
    assert store.query("SELECT received, stored, dropped FROM tracer_stats") == [
        {"received": 1000, "stored": 1000, "dropped": 0}
    ]
    assert proc.force_flush()  # after shutdown: a no-op, never an error


class Raising(SpanExporter):
    def __init__(self) -> None:
        self.calls = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.calls += 1
        raise ConnectionError("collector is down")

    def shutdown(self) -> None:
        raise RuntimeError("even shutdown fails")


class Refusing(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        pass


@pytest.mark.parametrize("exporter_cls", [Raising, Refusing])
def test_an_exporter_that_fails_is_counted_never_raised(exporter_cls, caplog: pytest.LogCaptureFixture) -> None:
    exporter = exporter_cls()
    proc = ReliableSpanProcessor(ExporterSink(exporter), chunk_size=10, max_batch_size=50)
    provider = _provider(proc)
    with caplog.at_level(logging.WARNING, logger="tracer.spans.pipeline"):
        _spans(provider, 200)
        assert proc.force_flush()
        error = proc.stats()["last_error"]
        provider.shutdown()  # Raising.shutdown raises too: counted, not raised
    stats = proc.stats()
    assert stats["received"] == 200 and stats["failed"] == 200 and stats["dropped"] == 200
    assert stats["stored"] == 0 and stats["queued"] == 0
    assert "collector is down" in error or "FAILURE" in error
    write_warnings = [r for r in caplog.records if "write failed" in r.getMessage()]
    assert len(write_warnings) == 1  # once, not once per batch


def test_unwritable_store_spools_then_recovers_on_the_next_flush(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a regular file where the store's parent directory should be")
    store = Store(blocker / "store")  # mkdir fails with ENOTDIR, for root as well
    spool_dir = tmp_path / "spool"
    proc = ReliableSpanProcessor(StoreSink(store, spool_dir=spool_dir), chunk_size=50, max_batch_size=100)
    provider = _provider(proc)
    _spans(provider, 500)  # must not raise
    assert proc.force_flush()
    stats = proc.stats()
    assert (stats["received"], stats["stored"], stats["spooled"], stats["failed"], stats["dropped"]) == (500, 0, 500, 500, 0)
    assert "NotADirectoryError" in stats["last_error"]
    assert Spool(spool_dir).pending_rows() == 500

    blocker.unlink()  # the store becomes writable
    assert proc.force_flush()
    assert proc.stats()["recovered"] == 500
    assert Spool(spool_dir).pending() == []
    assert store.count() == 500
    provider.shutdown()
    assert store.query("SELECT count(DISTINCT seq) AS n FROM spans WHERE session_id = 'p'") == [{"n": 500}]


def test_a_store_whose_segments_dir_is_a_file_spools_and_the_next_process_recovers(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    store.path.mkdir()
    (store.path / "segments").write_text("not a directory")
    spool_dir = tmp_path / "spool"
    proc = ReliableSpanProcessor(StoreSink(store, spool_dir=spool_dir))
    provider = _provider(proc)
    _spans(provider, 300)
    provider.shutdown()
    stats = proc.stats()
    assert stats["spooled"] == 300 and stats["stored"] == 0 and stats["dropped"] == 0
    assert Spool(spool_dir).pending_rows() == 301  # the spans and the stats row

    (store.path / "segments").unlink()
    later = ReliableSpanProcessor(StoreSink(Store(store.path), spool_dir=spool_dir))  # "the next process"
    assert later.force_flush()
    assert later.stats()["recovered"] == 301
    later.shutdown()
    assert store.query("SELECT count(*) AS n FROM spans WHERE session_id = 'p'") == [{"n": 300}]
    assert store.query("SELECT spooled FROM tracer_stats") == [{"spooled": 300}]


FULL_DISK = textwrap.dedent("""
    import json, resource, signal, sys
    from opentelemetry.sdk.trace import TracerProvider
    from tracer.spans.pipeline import ReliableSpanProcessor
    from tracer.store import Store
    from tracer.store.sink import StoreSink
    store, spool = sys.argv[1], sys.argv[2]
    Store(store).ensure()
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)           # writes past the limit fail with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))  # every segment and spool file is bigger
    proc = ReliableSpanProcessor(StoreSink(Store(store), spool_dir=spool), chunk_size=100, max_batch_size=200)
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(proc)
    tracer = provider.get_tracer("full")
    for i in range(1000):
        with tracer.start_as_current_span("step", attributes={"prunegate.seq": i, "pad": "x" * 64}):
            pass
    provider.shutdown()
    print(json.dumps(proc.stats()))
""")


def test_a_full_disk_is_counted_as_dropped_never_raised(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-c", FULL_DISK, str(tmp_path / "store"), str(tmp_path / "spool")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    stats = json.loads(run.stdout)
    assert stats["received"] == 1000 and stats["stored"] == 0 and stats["spooled"] == 0
    assert stats["failed"] == 1000 and stats["dropped"] == 1000
    assert "File too large" in stats["last_error"]
    assert "spans could not be stored nor spooled" in run.stderr  # warned, once
    assert run.stderr.count("could not be stored nor spooled") == 1
    assert Store(tmp_path / "store").count() == 0  # and the store is still a valid, readable store


class Stuck(StoreSink):
    """A store sink whose writes hang until released: an exporter stuck on a dead disk/endpoint."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.release = threading.Event()
        self.entered = threading.Event()

    def write(self, prepared: list) -> None:
        self.entered.set()
        self.release.wait(30)
        super().write(prepared)


def test_a_stuck_sink_costs_a_bounded_wait_then_spans_go_to_the_spool(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    sink = Stuck(store, spool_dir=tmp_path / "spool")
    proc = ReliableSpanProcessor(sink, max_queue_size=64, chunk_size=16, max_batch_size=32, max_wait=0.02,
                                 schedule_delay=0.01, overflow_size=4096)
    provider = _provider(proc)
    _spans(provider, 40)
    assert sink.entered.wait(10)
    _spans(provider, 2000, session="q")  # returns although the sink hangs: the overflow goes to the spool
    stats = proc.stats()
    assert stats["received"] == 2040 and _accounted(stats) == 2040 and stats["dropped"] == 0
    assert proc.force_flush(timeout_millis=200) is False  # the sink still hangs: flush says so, bounded
    sink.release.set()
    assert proc.force_flush()
    stats = proc.stats()
    assert stats["spooled"] > 0 and stats["stored"] + stats["spooled"] == 2040 and stats["dropped"] == 0
    assert stats["recovered"] == stats["spooled"]
    provider.shutdown()
    assert store.query("SELECT count(*) AS n, count(DISTINCT span_id) AS d FROM spans WHERE name = 'step'") == [
        {"n": 2040, "d": 2040}
    ]


def test_a_sink_hung_at_shutdown_does_not_hang_the_agent(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    sink = Stuck(Store(tmp_path / "store"), spool_dir=tmp_path / "spool")
    proc = ReliableSpanProcessor(sink, chunk_size=10, max_batch_size=10, schedule_delay=0.01, shutdown_timeout=0.5)
    provider = _provider(proc)
    _spans(provider, 10)
    assert sink.entered.wait(10)
    _spans(provider, 25)
    with caplog.at_level(logging.WARNING, logger="tracer.spans.pipeline"):
        provider.shutdown()  # returns after shutdown_timeout
    stats = proc.stats()
    assert stats["received"] == 35 and stats["queued"] == 0
    assert stats["dropped"] == 10  # the batch inside the hung write: counted, and said so
    assert stats["spooled"] == 25  # what was still queued went to the spool
    assert any("may or may not have been written" in r.getMessage() for r in caplog.records)
    sink.release.set()


class StuckSpool(Stuck):
    """Neither the store nor the local spool answers."""

    def spill(self, prepared: list) -> bool:
        self.release.wait(30)
        return super().spill(prepared)


def test_when_the_spool_is_stuck_too_spans_are_dropped_and_counted_not_waited_for(tmp_path: Path) -> None:
    sink = StuckSpool(Store(tmp_path / "store"), spool_dir=tmp_path / "spool")
    proc = ReliableSpanProcessor(sink, max_queue_size=32, chunk_size=8, max_batch_size=8, max_wait=0.02,
                                 overflow_size=32, schedule_delay=0.01, shutdown_timeout=0.5)
    provider = _provider(proc)
    _spans(provider, 16)
    assert sink.entered.wait(10)
    _spans(provider, 3000)  # returns: after two bounded waits everything else is dropped, counted
    stats = proc.stats()
    assert stats["received"] == 3016 and _accounted(stats) == 3016
    assert stats["dropped"] >= 3000 - 4 * 32  # all but what the bounded buffers hold
    provider.shutdown()
    sink.release.set()
    assert _accounted(proc.stats()) == 3016


HOLD_MAIN = textwrap.dedent("""
    import sys, duckdb
    con = duckdb.connect(sys.argv[1])
    print("held", flush=True)
    sys.stdin.readline()
""")


def test_recording_continues_while_another_process_holds_the_database(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    store.write_rows([{"trace_id": "c" * 32, "span_id": "1" * 16, "name": "old", "start_time_ns": 1, "end_time_ns": 2}])
    store.compact()
    holder = subprocess.Popen([sys.executable, "-c", HOLD_MAIN, str(store.layout.main)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        proc = ReliableSpanProcessor(StoreSink(store, spool_dir=tmp_path / "spool", compact_threshold=1))
        provider = _provider(proc)
        _spans(provider, 700)
        provider.shutdown()
        stats = proc.stats()
        assert stats["stored"] == 700 and stats["failed"] == stats["spooled"] == stats["dropped"] == 0
        assert store.compact(timeout=0.2).busy  # the compactor cannot get in, and says so
    finally:
        holder.communicate("\n", timeout=10)
    assert store.compact().busy is None
    assert store.count() == 1 + 700 + 1


AT_EXIT = textwrap.dedent("""
    import sys
    from opentelemetry.sdk.trace import TracerProvider
    from tracer.spans.pipeline import ReliableSpanProcessor
    from tracer.store import Store
    from tracer.store.sink import StoreSink
    proc = ReliableSpanProcessor(StoreSink(Store(sys.argv[1]), spool_dir=sys.argv[2]), schedule_delay=60)
    provider = TracerProvider(shutdown_on_exit=False)      # nobody calls shutdown: atexit must flush
    provider.add_span_processor(proc)
    tracer = provider.get_tracer("exit")
    for i in range(123):
        with tracer.start_as_current_span("late", attributes={"prunegate.seq": i}):
            pass
""")


def test_exit_without_shutdown_still_flushes(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-c", AT_EXIT, str(tmp_path / "store"), str(tmp_path / "spool")],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert Store(tmp_path / "store").query("SELECT count(*) AS n FROM spans WHERE name = 'late'") == [{"n": 123}]


def test_a_span_ended_after_shutdown_is_counted(tmp_path: Path) -> None:
    proc = ReliableSpanProcessor(StoreSink(Store(tmp_path / "store"), spool_dir=tmp_path / "spool"))
    provider = _provider(proc)
    tracer = provider.get_tracer("late")
    span = tracer.start_span("straggler")
    provider.shutdown()
    span.end()  # the SDK still calls on_end on our processor
    stats = proc.stats()
    assert stats["received"] == 1 and stats["dropped"] == 1


def test_a_forked_child_records_with_its_own_threads_and_counters(tmp_path: Path) -> None:
    import os

    store = Store(tmp_path / "store")
    proc = ReliableSpanProcessor(StoreSink(store, spool_dir=tmp_path / "spool"), schedule_delay=0.05)
    provider = _provider(proc)
    _spans(provider, 10, session="parent")
    pid = os.fork()
    if pid == 0:  # the child: the parent's queue and counters are not inherited
        code = 1
        try:
            _spans(provider, 20, session="child")
            provider.shutdown()
            stats = proc.stats()
            code = 0 if stats["received"] == 20 and stats["stored"] == 20 else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    provider.shutdown()
    assert proc.stats()["received"] == 10
    rows = store.query("SELECT session_id, count(*) AS n FROM spans WHERE name = 'step' GROUP BY 1 ORDER BY 1")
    assert rows == [{"session_id": "child", "n": 20}, {"session_id": "parent", "n": 10}]


def test_spans_that_trickle_in_reach_the_store_without_a_flush(tmp_path: Path) -> None:
    import time

    store = Store(tmp_path / "store")
    proc = ReliableSpanProcessor(StoreSink(store, spool_dir=tmp_path / "spool"), schedule_delay=0.1)
    provider = _provider(proc)
    _spans(provider, 5)  # far fewer than a chunk: the writer converts and writes them itself
    deadline = time.monotonic() + 30
    while proc.stats()["stored"] < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.stats()["stored"] == 5 and store.count() == 5
    provider.shutdown()


def test_the_store_sink_is_every_kind_of_sink_the_processor_looks_for(tmp_path: Path) -> None:
    """The processor checks once which protocols its sink meets; the store's sink must meet all of
    them, or a renamed method would quietly turn off the spool, the stats row or the record path."""
    from tracer.spans.pipeline import ExporterSink, RecordSink, SpoolingSink, StatsSink
    from tracer.store.sink import StoreSink

    sink = StoreSink(Store(tmp_path / "store"), spool_dir=tmp_path / "spool")
    assert isinstance(sink, SpoolingSink) and isinstance(sink, StatsSink) and isinstance(sink, RecordSink)
    proc = ReliableSpanProcessor(sink)
    assert proc._spool is sink and proc._stats_sink is sink and proc._records_ok
    proc.shutdown()

    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    plain = ReliableSpanProcessor(ExporterSink(InMemorySpanExporter()))
    assert plain._spool is None and plain._stats_sink is None and not plain._records_ok
    plain.shutdown()


def test_setup_tracing_converts_the_stores_chunks_at_its_chunk_size(tmp_path: Path) -> None:
    """The store's processor from setup_tracing prepares a chunk every STORE_CHUNK_SIZE spans on the
    thread that ended the last one (docs/performance.md round 13); ``chunk_size`` given still wins."""
    from tracer.spans.setup import STORE_CHUNK_SIZE, setup_tracing

    tracing = setup_tracing(tmp_path / "a", otlp_endpoint=False)
    proc = tracing.store_processor
    assert proc is not None and proc.chunk_size == STORE_CHUNK_SIZE == 128
    prepare, on_this_thread = proc.sink.prepare, []

    def noting(chunk: Sequence) -> object:
        if threading.current_thread() is threading.main_thread():
            on_this_thread.append(len(chunk))
        return prepare(chunk)

    proc.sink.prepare = noting  # type: ignore[method-assign]
    _spans(tracing.provider, 3 * STORE_CHUNK_SIZE + 5)
    # the ending thread prepared whole chunks (the writer may take a partial one when idle)
    assert on_this_thread and set(on_this_thread) == {STORE_CHUNK_SIZE}
    assert tracing.force_flush()
    assert tracing.store is not None and tracing.store.count() == 3 * STORE_CHUNK_SIZE + 5
    tracing.shutdown()
    other = setup_tracing(tmp_path / "b", otlp_endpoint=False, chunk_size=64)
    assert other.store_processor is not None and other.store_processor.chunk_size == 64
    other.shutdown()
