"""The store's two fingerprints: every change, and what sessions did (the dashboard's cache keys).

An annotation or a saved comparison is added afterwards: the full fingerprint moves (the
annotations are re-read) and the activity one does not (sessions, violations and metrics stay
cached); spans a session records move both."""

from __future__ import annotations

from pathlib import Path

from tests.dashboard_fixtures import recording
from tracer import queries
from tracer.queries.writes import annotate, save_comparison
from tracer.spans import SessionConfig, TracedSession
from tracer.store import Store
from tracer.store.segments import afterwards_only, list_segments


def _session(path: Path, sid: str) -> None:
    with recording(path) as provider:
        ts = TracedSession(provider, SessionConfig(session_id=sid, source="live", name=sid))
        ts.violation("orphan_tool_result", "no partner", call_ids=["zz"], seq=1)
        ts.end()


def test_an_annotation_moves_the_fingerprint_but_not_the_activity(tmp_path: Path) -> None:
    path = tmp_path / "s"
    _session(path, "one")
    store = Store(path)
    full, act = store.fingerprint(), store.fingerprint(activity=True)
    annotate(store, "one", label="bug", note="looked at it")
    save_comparison(store, "a title", {"kind": "metric"}, {"lines": ["x"]})
    assert store.fingerprint() != full and store.fingerprint(activity=True) == act
    with store.reader() as r:  # both are in the store, read back
        assert list(queries.annotation_list(r, session_id="one")["label"]) == ["bug"]
        assert list(queries.saved_comparisons(r)["title"]) == ["a title"]
    assert [afterwards_only(p) for p in list_segments(store.layout)].count(False) >= 1  # the session's spans
    # a session's spans move both
    before = store.fingerprint()
    _session(path, "two")
    assert store.fingerprint() != before and store.fingerprint(activity=True) != act


def test_compaction_moves_the_activity_too(tmp_path: Path) -> None:
    path = tmp_path / "s"
    _session(path, "one")
    store = Store(path)
    annotate(store, "one", label="bug")
    act = store.fingerprint(activity=True)
    store.compact()
    assert store.fingerprint(activity=True) != act  # the database was rewritten: nothing cached survives
    with store.reader() as r:
        assert list(queries.annotation_list(r, session_id="one")["label"]) == ["bug"]
