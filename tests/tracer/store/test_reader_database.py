"""Readers are connections of one in-memory DuckDB database per process (tracer.store.reader): each
must still see its own snapshot through every view, leave nothing attached when closed (a store's
file held open would keep a compactor waiting), and a forked child must not use its parent's.

Real stores on disk, real scripted sessions written as segments and compacted; every figure read back
through the readers' views."""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.dashboard_fixtures import gated_session, orphan_session
from tracer.store import Store, StoreReader
from tracer.store.rows import spans_to_table


def _write(store: Store, *sessions: Callable[[TracerProvider], object]) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    for record in sessions:
        record(provider)
    provider.force_flush()
    store.write_table(spans_to_table(list(exporter.get_finished_spans())), fsync=False)
    provider.shutdown()


def _seen(r: StoreReader) -> tuple[int, int, int, int]:
    """What one reader sees: spans, sessions (a derived view), violations (another) and budget checks."""
    return (r.count(), r.query("SELECT count(*) AS n FROM sessions")[0]["n"],
            r.query("SELECT count(*) AS n FROM violations")[0]["n"],
            r.query("SELECT count(*) AS n FROM budget_checks")[0]["n"])


def _attached(r: StoreReader) -> set[str]:
    return {row["database_name"] for row in r.query("SELECT database_name FROM duckdb_databases()")
            if row["database_name"].startswith("store_")}


def test_open_readers_each_see_their_own_snapshot_through_the_shared_views(tmp_path: Path) -> None:
    one, two = Store(tmp_path / "one"), Store(tmp_path / "two")
    _write(one, orphan_session)
    one.compact()
    _write(two, gated_session)
    with one.reader() as a, two.reader() as b:
        alone_a, alone_b = _seen(a), _seen(b)
        assert alone_a != alone_b and alone_a[1] == alone_b[1] == 1
        _write(one, gated_session)  # a pending segment beside one's compacted table
        with one.reader() as later:
            both = _seen(later)
            assert both[1] == 2 and both[0] == alone_a[0] + alone_b[0]
            assert _seen(a) == alone_a  # the reader opened before it still reads its snapshot
            assert _seen(b) == alone_b
            assert len({a.db, b.db, later.db}) == 3


def test_readers_in_threads_at_once(tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    _write(store, orphan_session, gated_session)
    with store.reader() as r:
        expected = _seen(r)
    got: list[tuple[int, int, int, int]] = []
    failed: list[BaseException] = []

    def read() -> None:
        try:
            for _ in range(10):
                with store.reader() as r:
                    got.append(_seen(r))
        except BaseException as exc:  # the assertion below names it
            failed.append(exc)

    threads = [threading.Thread(target=read) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failed and got == [expected] * 40


def test_a_closed_reader_leaves_nothing_attached_and_compaction_proceeds(tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    _write(store, orphan_session)
    store.compact()
    names = []
    for _ in range(3):
        with store.reader() as r:
            names.append(r.db)
            assert r.db in _attached(r)
    _write(store, gated_session)
    result = store.compact()  # rewrites spans.duckdb: no reader's attach may still hold it
    assert result.segments_compacted == 1
    with store.reader() as r:
        assert _attached(r) == {r.db} and not set(names) & _attached(r)
        assert _seen(r)[1] == 2


def _child(path: str) -> tuple[int, int, int, int]:
    with Store(Path(path)).reader() as r:
        return _seen(r)


def test_forked_children_open_their_own_reader_database(tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    _write(store, orphan_session)
    with store.reader() as r:  # the parent's database exists before the fork; no reader is open at it
        expected = _seen(r)
    with multiprocessing.get_context("fork").Pool(2) as pool:  # as compare's workers are forked
        seen = pool.map_async(_child, [str(store.path)] * 4).get(timeout=120)
    assert seen == [expected] * 4
