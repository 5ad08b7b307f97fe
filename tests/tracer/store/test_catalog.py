"""The per-session rows compaction keeps (tracer.store.catalog: ``session_catalog``,
``session_counts``, ``session_roots``) and the reader's views over them (``catalog_sessions``,
``catalog_counts``, ``catalog_roots``) are the rows a full scan of the spans computes: after a
compaction, with a session's later spans in a pending segment, after the compaction that takes
them in, and with an annotation pending (which changes no kept row).

Real spans (the scripted sessions: prunes, deferrals, a spill, violations, a retried tool call, an
invalid request) written through the store as segments; every row read back from the store."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.dashboard_fixtures import gated_session, orphan_session, recorded_session
from tracer.queries.writes import annotate
from tracer.store import Store, StoreReader
from tracer.store import catalog as store_catalog
from tracer.store.rows import spans_to_table

# (kept table, the reader's view, the full scan computing the same rows from every span)
KEPT = (
    ("session_catalog", "catalog_sessions", store_catalog.index_sql("spans")),
    ("session_counts", "catalog_counts", store_catalog.counts_sql("spans")),
    ("session_roots", "catalog_roots", store_catalog.roots_sql("spans")),
)


def _rows(r: StoreReader, sql: str) -> pd.DataFrame:
    frame = r.con.sql(sql).to_arrow_table().to_pandas()
    return frame.sort_values(list(frame.columns[:1]) + (["attributes"] if "attributes" in frame else [])) \
        .reset_index(drop=True)


def _spans(path: Path) -> list:
    """The three scripted sessions' finished spans, in the order they ended (not written)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    orphan_session(provider)
    gated_session(provider)
    recorded_session(provider)
    provider.force_flush()
    spans = list(exporter.get_finished_spans())
    provider.shutdown()
    return spans


def _same_as_a_full_scan(store: Store, *, kept_tables: bool) -> int:
    """Each view (and with ``kept_tables``, each kept table) holds the full scan's rows; the rows' count."""
    with store.reader() as r:
        assert r.catalog and r.catalog_views
        n = 0
        for table, view, scan in KEPT:
            full = _rows(r, scan)
            pd.testing.assert_frame_equal(_rows(r, f"SELECT * FROM {view}")[full.columns], full, check_dtype=False)
            if kept_tables:
                pd.testing.assert_frame_equal(_rows(r, f"SELECT * FROM {r.db}.{table}")[full.columns], full,
                                              check_dtype=False)
            n = max(n, len(full))
        return n


def test_kept_rows_equal_a_full_scan_after_compaction_new_segments_and_annotations(tmp_path: Path) -> None:
    path = tmp_path / "store"
    store = Store(path)
    spans = _spans(path)
    # the orphan session's first half, compacted; its second half (root included) arrives later
    orphan = [s for s in spans if s.attributes.get("prunegate.session.id") == "s-orphan"]
    first, later = orphan[: len(orphan) // 2], [s for s in spans if s not in orphan[: len(orphan) // 2]]
    assert first and later
    store.write_table(spans_to_table(first), fsync=False)
    store.compact()
    assert _same_as_a_full_scan(store, kept_tables=True) == 1
    with store.reader() as r:
        assert r.query(f"SELECT count(*) AS n FROM {r.db}.session_roots")[0]["n"] == 0  # the root is in `later`
        partial = r.query(f"SELECT checks, prunes FROM {r.db}.session_counts")[0]

    store.write_table(spans_to_table(later), fsync=False)  # pending: three sessions, one half-kept
    with store.reader() as r:
        assert r.pending_segments
    assert _same_as_a_full_scan(store, kept_tables=False) == 3
    store.compact()  # the touched session's rows recomputed, the new ones added
    assert _same_as_a_full_scan(store, kept_tables=True) == 3
    with store.reader() as r:
        whole = r.query(f"SELECT checks, prunes, violations, retries, invalid_requests FROM {r.db}.session_counts "
                        "WHERE session_id = 's-orphan'")[0]
        assert whole["checks"] > partial["checks"] or whole["prunes"] > partial["prunes"]
        assert whole["violations"] > 0 and whole["retries"] > 0 and whole["invalid_requests"] > 0
        gated = r.query(f"SELECT deferrals, spills FROM {r.db}.session_counts WHERE session_id = 's-gated'")[0]
        assert gated["deferrals"] > 0 and gated["spills"] > 0

    annotate(store, "s-orphan", label="bug", note="looked at it")  # pending: an annotation only
    with store.reader() as r:
        assert r.pending_segments and r.catalog_views
        # the kept rows are served as they are (no fresh part computed for an annotation)
        view = r.query("SELECT sql FROM duckdb_views() WHERE view_name = 'catalog_counts'")[0]["sql"]
        assert "UNION" not in view.upper()
    assert _same_as_a_full_scan(store, kept_tables=True) == 3
    store.compact()
    assert _same_as_a_full_scan(store, kept_tables=True) == 3


def test_the_newest_retries_read_through_the_kept_counts_are_the_newest_of_all(tmp_path: Path) -> None:
    """Two sessions at once: "a" ends last but ran its retry first; "b" holds the two newest. The
    newest retry is b's, though the kept counts put "a" first (its last span is the newest)."""
    from tests.dashboard_fixtures import recording
    from tracer import queries
    from tracer.spans import SessionConfig, TracedSession

    path = tmp_path / "store"
    with recording(path) as provider:
        a = TracedSession(provider, SessionConfig(session_id="a", source="live", name="a"))
        b = TracedSession(provider, SessionConfig(session_id="b", source="live", name="b"))
        for seq, (ts, cid) in enumerate([(a, "c1"), (a, "c1"), (b, "c1"), (b, "c1"), (b, "c2"), (b, "c2")], 1):
            with ts.tool("book", cid, arguments={"n": cid}, seq=seq):
                pass
        b.end()
        with a.tool("look", "c9", seq=9):
            pass
        a.end()
    store = Store(path)
    store.compact()
    with store.reader() as r:
        assert [row["session_id"] for row in r.query(
            f"SELECT session_id FROM {r.db}.session_counts WHERE retries > 0 ORDER BY last_ns DESC")] == ["a", "b"]
        for k in (1, 2, 3, 4):
            kept, scan = queries.retries(r, limit=k), queries.retries(r.con, limit=k)
            pd.testing.assert_frame_equal(kept, scan)
            assert list(kept["total"]) == [3] * min(k, 3)
        assert list(queries.retries(r, limit=1)["session_id"]) == ["b"]
