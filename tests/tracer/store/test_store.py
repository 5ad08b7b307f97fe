"""The trace store: spans in through the real SDK and the pipeline, the same rows out; compaction,
its crash windows, readers' snapshots, the views and the query API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from tracer.spans import ReliableSpanProcessor
from tracer.store import Store, StoreError, resolve_store
from tracer.store.compact import _absorb, ensure_schema, open_main_rw
from tracer.store.rows import rows_to_table, spans_to_table
from tracer.store.segments import list_segments, segment_rows
from tracer.store.sink import StoreSink


def _provider(store: Store, tmp_path: Path) -> tuple[TracerProvider, ReliableSpanProcessor, InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    proc = ReliableSpanProcessor(StoreSink(store, spool_dir=tmp_path / "spool"), schedule_delay=0.05)
    provider = TracerProvider(resource=Resource.create({"service.name": "store-test"}), shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    provider.add_span_processor(proc)
    return provider, proc, memory


def _record_session(provider: TracerProvider, session: str = "s1") -> None:
    """A small session shaped like the span contract (docs/spans.md)."""
    tracer = provider.get_tracer("prunegate.test", "1.2")
    common = {"prunegate.session.id": session}
    with tracer.start_as_current_span(
        "prunegate.session",
        attributes={"gen_ai.conversation.id": session, "prunegate.seq": 0, "prunegate.session.source": "live",
                    "prunegate.policy": "salience", "prunegate.gated": True},
    ):
        with tracer.start_as_current_span(
            "prunegate.budget_check",
            attributes={**common, "prunegate.seq": 1, "prunegate.check": 1, "prunegate.decision": "pruned",
                        "prunegate.tokens.before": 900, "prunegate.tokens.after": 400, "prunegate.budget": 500},
        ):
            with tracer.start_as_current_span(
                "prunegate.prune",
                kind=SpanKind.INTERNAL,
                attributes={**common, "prunegate.seq": 1, "prunegate.policy": "salience",
                            "prunegate.pruned.ids": ["m1", "m2"], "prunegate.budget_met": True,
                            "prunegate.scores": '{"u1": 0.25}', "ratio": 0.5},
            ) as prune:
                prune.add_event("prunegate.grow", {"prunegate.unit.id": "u1", "n": 2})
        with tracer.start_as_current_span(
            "prunegate.violation",
            links=[Link(prune.get_span_context(), {"prunegate.link": "caused_by"})],
            attributes={**common, "prunegate.seq": 2, "prunegate.violation.code": "orphan_tool_result",
                        "prunegate.violation.message": "tool_result without tool_use"},
        ) as violation:
            violation.set_status(Status(StatusCode.ERROR, "orphan"))
        with tracer.start_as_current_span("chat gpt-4o", kind=SpanKind.CLIENT,
                                          attributes={**common, "prunegate.seq": 3}):
            pass


def _expected(span) -> dict:
    """What the store must return for an SDK span."""
    return {
        "trace_id": f"{span.context.trace_id:032x}",
        "span_id": f"{span.context.span_id:016x}",
        "parent_span_id": f"{span.parent.span_id:016x}" if span.parent else None,
        "name": span.name,
        "kind": span.kind.name,
        "start_time_ns": span.start_time,
        "end_time_ns": span.end_time,
        "status_code": span.status.status_code.name,
        "status_message": span.status.description,
        "attributes": {k: list(v) if isinstance(v, tuple) else v for k, v in span.attributes.items()},
        "events": [{"name": e.name, "time_ns": e.timestamp, "attributes": dict(e.attributes)} for e in span.events],
        "links": [
            {"trace_id": f"{lk.context.trace_id:032x}", "span_id": f"{lk.context.span_id:016x}",
             "trace_state": None, "attributes": dict(lk.attributes)}
            for lk in span.links
        ],
        "resource": dict(span.resource.attributes),
        "scope_name": span.instrumentation_scope.name,
        "scope_version": span.instrumentation_scope.version,
    }


def _stored(rows: list[dict]) -> list[dict]:
    keys = ("trace_id", "span_id", "parent_span_id", "name", "kind", "start_time_ns", "end_time_ns", "status_code",
            "status_message", "attributes", "events", "links", "resource", "scope_name", "scope_version")
    return sorted(({k: r[k] for k in keys} for r in rows), key=lambda r: r["span_id"])


def test_spans_in_same_rows_out_before_and_after_compaction(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    provider, proc, memory = _provider(store, tmp_path)
    _record_session(provider)
    provider.shutdown()
    expected = sorted((_expected(s) for s in memory.get_finished_spans()), key=lambda r: r["span_id"])
    assert len(expected) == 5

    before = store.spans("s1")
    assert _stored(before) == expected
    assert [r["seq"] for r in before] == [0, 1, 1, 2, 3]
    assert all(r["session_id"] == "s1" for r in before)
    assert before[0]["duration_ns"] == before[0]["end_time_ns"] - before[0]["start_time_ns"]

    result = store.compact()
    assert result.busy is None and result.rows_inserted == 6  # 5 spans + the pipeline's stats row
    assert list_segments(store.layout) == []
    assert _stored(store.spans("s1")) == expected
    assert store.trace(expected[0]["trace_id"])[0]["trace_id"] == expected[0]["trace_id"]


def test_views_follow_the_span_contract(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    provider, proc, _ = _provider(store, tmp_path)
    _record_session(provider, "s1")
    _record_session(provider, "s2")
    provider.shutdown()
    with store.reader() as r:
        sessions = {s["session_id"]: s for s in r.query("SELECT * FROM sessions")}
        assert set(sessions) == {"s1", "s2"}
        s1 = sessions["s1"]
        assert (s1["span_count"], s1["budget_checks"], s1["decisions"], s1["violations"], s1["errors"]) == (5, 1, 1, 1, 1)
        assert (s1["source"], s1["policy"], s1["gated"], s1["service_name"]) == ("live", "salience", True, "store-test")
        check = r.query("SELECT * FROM budget_checks WHERE session_id = ?", ["s1"])[0]
        assert (check["decision"], check["tokens_before"], check["tokens_after"], check["budget"]) == ("pruned", 900, 400, 500)
        decision = r.query("SELECT * FROM decisions WHERE session_id = $s", {"s": "s1"})[0]
        assert (decision["decision"], decision["policy"], decision["budget_met"]) == ("prune", "salience", True)
        assert decision["budget_check_span_id"] == check["span_id"]
        violation = r.query("SELECT * FROM violations WHERE session_id = ?", ["s1"])[0]
        assert violation["code"] == "orphan_tool_result"
        assert violation["cause_span_id"] == decision["span_id"]
        events = r.query("SELECT * FROM span_events WHERE session_id = ?", ["s1"])
        assert [(e["event_name"], e["span_id"]) for e in events] == [("prunegate.grow", decision["span_id"])]
        stats = r.query("SELECT * FROM tracer_stats")
        assert len(stats) == 1 and stats[0]["received"] == 10 and stats[0]["stored"] == 10 and stats[0]["dropped"] == 0
    assert [s["session_id"] for s in store.sessions()] == ["s2", "s1"]  # newest first


def test_query_api_parameters_arrow_and_errors(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    store.write_rows([{"trace_id": "a" * 32, "span_id": f"{i:016x}", "name": "x'; DROP TABLE spans; --",
                       "start_time_ns": i, "end_time_ns": i + 1, "attributes": {"prunegate.session.id": "q"}}
                      for i in range(1, 4)])
    rows = store.query("SELECT span_id FROM spans WHERE name = ? ORDER BY span_id", ["x'; DROP TABLE spans; --"])
    assert [r["span_id"] for r in rows] == [f"{i:016x}" for i in range(1, 4)]
    table = store.query_arrow("SELECT count(*) AS n FROM spans WHERE session_id = $sid", {"sid": "q"})
    assert isinstance(table, pa.Table) and table.column("n").to_pylist() == [3]
    with pytest.raises(StoreError) as err:
        store.query("SELECT no_such_column FROM spans")
    assert str(store.path) in str(err.value) and "no_such_column" in str(err.value)


def test_the_default_store_follows_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PRUNEGATE_STORE", str(tmp_path / "elsewhere"))
    assert resolve_store(None) == tmp_path / "elsewhere"
    assert Store().path == tmp_path / "elsewhere"
    monkeypatch.delenv("PRUNEGATE_STORE")
    monkeypatch.chdir(tmp_path)
    assert resolve_store(None) == tmp_path / "prunegate-store"
    assert Store().path == tmp_path / "prunegate-store"


def test_missing_store_reads_as_empty_with_a_warning(tmp_path: Path) -> None:
    with Store(tmp_path / "nothing-here").reader() as r:
        assert r.count() == 0
        assert r.query("SELECT * FROM sessions") == []
        assert any("does not exist" in w for w in r.warnings)


def _rows(n: int, start: int = 0, session: str = "c") -> list[dict]:
    return [{"trace_id": "b" * 32, "span_id": f"{i:016x}", "name": "span", "start_time_ns": i, "end_time_ns": i + 1,
             "attributes": {"prunegate.session.id": session, "prunegate.seq": i}} for i in range(start, start + n)]


def test_crash_between_commit_and_unlink_neither_duplicates_nor_loses(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    store.write_rows(_rows(10))
    store.write_rows(_rows(5, start=10))
    segments = list_segments(store.layout)
    # Do the compactor's transaction, then "crash": the files stay in segments/.
    con = open_main_rw(store.layout.main, time.monotonic() + 5)
    ensure_schema(con)
    _absorb(con, segments, [segment_rows(p) for p in segments], [p.name for p in segments])
    con.close()
    assert list_segments(store.layout) == segments
    with store.reader() as r:
        assert r.pending_segments == []  # the ledger says they are in the table
        assert r.count() == 15
        assert r.query("SELECT count(DISTINCT span_id) AS n FROM spans")[0]["n"] == 15
    result = store.compact()
    assert (result.segments_compacted, result.rows_inserted, result.segments_deleted) == (0, 0, 2)
    assert list_segments(store.layout) == [] and store.count() == 15


def test_compaction_dedupes_by_trace_and_span_id(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    store.write_rows(_rows(10))
    store.compact()
    store.write_rows(_rows(10, start=5))  # 5..9 are already in the table
    store.write_rows(_rows(3, start=14))  # 14 repeats inside the pending segments
    result = store.compact()
    assert (result.rows_inserted, result.duplicates_skipped) == (7, 6)
    assert store.count() == 17
    assert store.query("SELECT count(DISTINCT span_id) AS n FROM spans")[0]["n"] == 17


@pytest.mark.parametrize("sessionless", [False, True])
def test_a_reader_shows_a_span_stored_twice_once_before_compaction(tmp_path: Path, sessionless: bool) -> None:
    """The check against the database's rows is limited to the pending spans' sessions when each has
    one (the database's rows of other sessions cannot hold them), and reads every row when one has
    none: both ways, each span once."""
    store = Store(tmp_path / "store")
    store.write_rows(_rows(10) + _rows(20, start=100, session="other"))
    store.compact()
    store.write_rows(_rows(10, start=5))  # 5..9 are already in the table
    store.write_rows(_rows(3, start=14))
    if sessionless:
        store.write_rows([{**_rows(1, start=8)[0], "attributes": {}}])  # span 8 again, without its session
    with store.reader() as r:
        assert r.count() == 37
        assert r.query("SELECT count(DISTINCT span_id) AS n FROM spans WHERE session_id = 'c'")[0]["n"] == 17
        assert r.query("SELECT count(*) AS n FROM spans WHERE session_id = 'c'")[0]["n"] == 17
        assert r.query("SELECT count(*) AS n FROM spans WHERE session_id = 'other'")[0]["n"] == 20


def test_compaction_of_more_content_than_its_memory_limit_keeps_every_span_once_and_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    import tracer.store.compact as compact_module

    monkeypatch.setattr(compact_module, "MEMORY_LIMIT", "24MB")
    store = Store(tmp_path / "store")
    store.write_rows(_rows(50))
    store.compact()
    big = [{**r, "attributes": {**r["attributes"], "text": f"{i:06d}" + "x" * 100_000}}
           for i, r in enumerate(_rows(400, start=40), start=40)]  # 40 MB; spans 40..49 are stored already
    for chunk in range(0, 400, 50):
        store.write_rows(big[chunk:chunk + 50])
    store.write_rows(big[100:150])  # a request retried whole
    result = store.compact()
    assert (result.rows_inserted, result.duplicates_skipped) == (390, 60)
    rows = store.query("SELECT span_id, length(attributes->>'text') AS n, substr(attributes->>'text', 1, 6) AS head "
                       "FROM spans WHERE attributes->>'text' IS NOT NULL ORDER BY span_id")
    assert [r["span_id"] for r in rows] == [f"{i:016x}" for i in range(50, 440)]
    assert all(r["n"] == 100_006 and r["head"] == f"{int(r['span_id'], 16):06d}" for r in rows)
    assert store.count() == 440 and list(store.layout.tmp.iterdir()) == []  # its swap directory went with it
    # 100 kB rows cannot be appended within 24 MB: done again without the limit, and said
    assert "compacting again without a memory limit" in caplog.text


def test_a_dead_compactors_swap_directory_is_cleaned(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    store.write_rows(_rows(3))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    swap = store.layout.tmp / f"swap-0badf00d.duckdb.{int(dead.stdout)}.tmp"
    swap.mkdir(parents=True)
    (swap / "duckdb_temp_storage-0.tmp").write_bytes(b"x" * 1000)
    old = time.time() - 3600
    os.utime(swap, (old, old))
    result = store.compact()
    assert result.tmp_cleaned == 1 and not swap.exists() and store.count() == 3


def test_temp_files_of_dead_writers_are_invisible_and_cleaned(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    store.write_rows(_rows(3))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    half = store.layout.tmp / f"00000000000000000001-{pid}-000000-deadbeef.parquet.{pid}.tmp"
    half.write_bytes(b"PAR1 half a file")
    old = time.time() - 3600
    os.utime(half, (old, old))
    assert store.count() == 3  # readers never look at tmp/
    result = store.compact()
    assert result.tmp_cleaned == 1 and not half.exists() and store.count() == 3


def test_a_damaged_segment_is_quarantined_not_fatal(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    store.write_rows(_rows(4))
    bad = store.layout.segments / "00000000000000000002-1-000000-badbadba.parquet"
    bad.write_bytes(b"not parquet at all")
    result = store.compact()
    assert result.quarantined == [bad.name] and result.rows_inserted == 4
    assert (store.layout.quarantine / bad.name).exists() and not bad.exists()
    assert store.count() == 4


HOLD_MAIN = textwrap.dedent("""
    import sys, time, duckdb
    con = duckdb.connect(sys.argv[1])          # read-write: what a compactor holds
    print("held", flush=True)
    sys.stdin.readline()
""")


def test_reader_while_the_main_file_is_locked_reads_segments_and_says_so(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    store.write_rows(_rows(6))
    store.compact()
    store.write_rows(_rows(2, start=6))
    holder = subprocess.Popen([sys.executable, "-c", HOLD_MAIN, str(store.layout.main)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with store.reader(attach_timeout=0.3) as r:
            assert not r.complete and not r.main_attached
            assert any("locked" in w for w in r.warnings)
            assert r.count() == 2  # only what is not compacted yet
        busy = store.compact(timeout=0.3)
        assert busy.busy and busy.rows_inserted == 0
        assert len(list_segments(store.layout)) == 1  # nothing lost
    finally:
        holder.communicate("\n", timeout=10)
    assert store.count() == 8 and store.compact().rows_inserted == 2 and store.count() == 8


def test_an_open_reader_keeps_its_snapshot_while_compaction_swaps_in_a_new_database(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    store.write_rows(_rows(3))
    store.compact()
    store.write_rows(_rows(3, start=3))
    with store.reader() as r:
        # the compactor writes a new spans.duckdb beside the one the reader has open and swaps it in;
        # only moving the absorbed file waits for the reader (its file list)
        result = store.compact(timeout=0.3)
        assert (result.busy, result.rows_inserted, result.deletes_deferred) == (None, 3, 1)
        assert r.count() == 6
        assert store.count() == 6  # a new reader: the new database, the file hidden by the ledger
    result = store.compact()
    assert (result.rows_inserted, result.segments_deleted) == (0, 1) and store.count() == 6


def test_writes_table_in_store_schema_and_rejects_nothing_silently(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    assert store.write_table(rows_to_table(_rows(2))).exists()
    assert spans_to_table([]).num_rows == 0
    assert store.count() == 2


def test_compact_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tracer.cli import main

    assert main(["compact", "--store", str(tmp_path / "none")]) == 2
    assert "no store at" in capsys.readouterr().err
    store = Store(tmp_path / "store")
    store.write_rows(_rows(5))
    assert main(["compact", "--store", str(store.path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows_inserted"] == 5
    store.write_rows(_rows(2, start=5))
    from tracer.store.locks import FileLock

    other = FileLock(store.layout.compact_lock)  # another compactor at work
    assert other.acquire(1)
    try:
        assert main(["compact", "--store", str(store.path), "--timeout", "0.2"]) == 3
    finally:
        other.release()
    assert "busy" in capsys.readouterr().err
    assert main(["compact", "--store", str(store.path)]) == 0
    assert "2 spans moved" in capsys.readouterr().out


def test_arrow_buffers_match_pyarrow_conversion() -> None:
    from tracer.store.arrow import int64_array, same_string, string_array, utf8_array

    cases = [["a", "", None, "héllo ✓", "x" * 300], [None, None], ["only"], [], ["", ""]]
    for values in cases:
        assert string_array(values).equals(pa.array(values, type=pa.string())), values
    assert string_array(["a\ud800b"]).to_pylist() == ["a?b"]  # a lone surrogate cannot be UTF-8
    assert utf8_array(b'{"k":"\xc3\xa9"}{}', [10, 12]).to_pylist() == ['{"k":"é"}', "{}"]
    assert same_string("[]", 3).to_pylist() == ["[]"] * 3 and same_string(None, 2).null_count == 2
    assert same_string("", 2).to_pylist() == ["", ""]
    for values in ([1, None, -(2**63), 2**63 - 1], [None], [5]):
        assert int64_array(values).equals(pa.array(values, type=pa.int64())), values
    with pytest.raises(OverflowError):
        int64_array([2**64])


WRITER_IMPORTS = textwrap.dedent("""
    import sys, tempfile
    from opentelemetry.sdk.trace import TracerProvider
    from tracer.spans.setup import setup_tracing
    tracing = setup_tracing(sys.argv[1], otlp_endpoint=False, spool_dir=sys.argv[2])
    with tracing.tracer().start_as_current_span("one", attributes={"prunegate.seq": 1}):
        pass
    tracing.shutdown()
    print(sorted(m for m in ("pandas", "duckdb") if m in sys.modules))
""")


def test_a_recording_process_imports_neither_duckdb_nor_pandas(tmp_path: Path) -> None:
    """Writers never open DuckDB, and pa.array's pandas probe would cost the agent an import with the GIL
    held plus a bigger heap for every garbage collection."""
    run = subprocess.run([sys.executable, "-c", WRITER_IMPORTS, str(tmp_path / "store"), str(tmp_path / "spool")],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"
    assert Store(tmp_path / "store").count() == 2  # the span and the stats row
