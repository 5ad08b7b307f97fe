"""The span tree of one session, read back from a real store: every span once, each after its
parent, depths and children right, durations and statuses as recorded."""

from __future__ import annotations

from pathlib import Path

from tests.dashboard_fixtures import scripted_store
from tracer import queries
from tracer.store import Store


def test_span_tree_orders_each_span_after_its_parent(tmp_path: Path) -> None:
    path = tmp_path / "store"
    scripted_store(path)
    with Store(path).reader() as r:
        tree = queries.span_tree(r, "s-gated")
        spans = r.con.execute("SELECT span_id, parent_span_id, end_time_ns - start_time_ns, status_code FROM spans "
                              "WHERE session_id = 's-gated'").fetchall()
        assert queries.trace_size(r, "s-gated") == len(spans)
    assert sorted(tree["span_id"]) == sorted(s[0] for s in spans)  # every span, once
    position = {sid: i for i, sid in enumerate(tree["span_id"])}
    depth = dict(zip(tree["span_id"], tree["depth"], strict=True))
    for sid, parent, duration, status in spans:
        row = tree.iloc[position[sid]]
        if parent in position:
            assert position[parent] < position[sid] and depth[sid] == depth[parent] + 1
        else:
            assert depth[sid] == 0
        assert row["duration_ms"] == duration / 1e6
        assert row["status_code"] == (status or "UNSET")
    kids = {sid: sum(1 for s in spans if s[1] == sid) for sid in position}
    assert dict(zip(tree["span_id"], tree["children"], strict=True)) == kids
    root = tree.iloc[0]
    assert root["name"] == queries.SESSION and root["depth"] == 0 and root["start_ms"] == 0
    assert tree["depth"].max() >= 2  # the scripted decisions sit under their budget checks


def test_span_tree_is_cut_at_its_limit(tmp_path: Path) -> None:
    path = tmp_path / "store"
    scripted_store(path)
    with Store(path).reader() as r:
        assert len(queries.span_tree(r, "s-gated", limit=3)) == 3
        assert queries.span_tree(r, "no-such-session").empty
