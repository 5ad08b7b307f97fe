"""tracer.queries against real stores: scripted sessions with known answers, and real replays."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from tests.dashboard_fixtures import HOSTILE, demo_store, recording, scripted_store
from tracer import queries as q
from tracer.store import Store


@pytest.fixture(scope="module")
def scripted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, dict]:
    path = tmp_path_factory.mktemp("scripted") / "store"
    info = scripted_store(path)
    return Store(path), info


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, dict]:
    path = tmp_path_factory.mktemp("demo") / "store"
    info = demo_store(path, per_file=2)
    return Store(path), info


def ids_at(store: Store, sid: str, seq: int) -> list[str]:
    with store.reader() as r:
        return list(q.context_at(r, sid, seq)["message_id"])


# ----------------------------------------------------------------------------- sessions
def test_sessions_summary_counts(scripted: tuple[Store, dict]) -> None:
    store, _ = scripted
    with store.reader() as r:
        df = q.sessions(r).set_index("session_id")
    assert set(df.index) == {"s-orphan", "s-gated", "s-recorded"}
    o = df.loc["s-orphan"]
    assert (o.source, o.policy, bool(o.gated), o.budget) == ("replay", "salience", False, 100)
    assert (o.messages, o.peak_tokens, o.violations, o.prunes, o.deferrals, o.spills) == (6, 120, 2, 1, 0, 0)
    assert (o.retries, o.invalid_requests, o.model_calls, o.tokens_pruned) == (1, 1, 1, 50)
    g = df.loc["s-gated"]
    assert (g.deferrals, g.spills, g.violations, g.hard_ceiling, g.messages) == (1, 1, 0, 150, 6)
    assert g.peak_tokens == 155  # before the spill, over the budget
    assert df.loc["s-recorded"].source == "import"


def test_sessions_filters_run_in_sql(scripted: tuple[Store, dict]) -> None:
    store, _ = scripted
    with store.reader() as r:
        assert set(q.sessions(r, sources=["import"])["session_id"]) == {"s-recorded"}
        assert set(q.sessions(r, gated=False)["session_id"]) == {"s-orphan"}
        assert set(q.sessions(r, policies=["salience"], gated=True)["session_id"]) == {"s-gated"}
        assert set(q.sessions(r, only_with_violations=True)["session_id"]) == {"s-orphan"}
        assert set(q.sessions(r, text="GATED")["session_id"]) == {"s-gated"}
        assert len(q.sessions(r, limit=1)) == 1
        # values are parameters: quotes and SQL in a filter are just text that matches nothing
        assert q.sessions(r, text="' OR 1=1 --").empty
        assert q.sessions(r, sources=["x'); DROP TABLE spans; --"]).empty
        assert q.store_totals(r)["sessions"] == 3
        assert q.session_filter_options(r) == {"sources": ["import", "replay"], "policies": ["salience"]}


def test_session_info_and_list(scripted: tuple[Store, dict]) -> None:
    store, _ = scripted
    with store.reader() as r:
        info = q.session_info(r, "s-orphan")
        assert info is not None and info["label"] == "lisbon-trip.json" and info["max_seq"] == 9
        assert q.session_info(r, "no-such") is None
        assert q.session_bounds(r, "s-orphan") == (0, 9)
        assert q.session_bounds(r, "no-such") is None
        listed = q.sessions(r, summary=False)
        assert set(listed["session_id"]) == {"s-orphan", "s-gated", "s-recorded"}
        assert q.budget_at(r, "s-gated") == {"budget": 100, "hard_ceiling": 150}


# ----------------------------------------------------------------------------- the context at a step
def test_context_follows_appends_and_removes(scripted: tuple[Store, dict]) -> None:
    store, _ = scripted
    expected = {0: [], 1: ["m1"], 2: ["m1", "m2"], 3: ["m1", "m2", "m3"], 4: ["m1", "m2", "m3", "m4"],
                5: ["m1", "m2", "m4"], 6: ["m1", "m2", "m4", "m5"], 7: ["m1", "m2", "m4", "m5", "m6"],
                9: ["m1", "m2", "m4", "m5", "m6"]}
    for seq, ids in expected.items():
        assert ids_at(store, "s-orphan", seq) == ids, seq


def test_context_flags_pending_open_pinned_and_units(scripted: tuple[Store, dict]) -> None:
    store, _ = scripted
    with store.reader() as r:
        at3 = q.context_at(r, "s-orphan", 3).set_index("message_id")
        assert list(at3.loc["m3", "pending_calls"]) == ["c1", "c2", "c3"] and at3.loc["m3", "pending"]
        at4 = q.context_at(r, "s-orphan", 4).set_index("message_id")
        assert list(at4.loc["m3", "pending_calls"]) == ["c2", "c3"]  # c1 answered by m4
        assert at4.loc["m4", "unit_id"] == "u3" and at4.loc["m4", "kind"] == "batch"
        # pins: the system unit, the first and last user messages, the last message (and its unit)
        at7 = q.context_at(r, "s-orphan", 7).set_index("message_id")
        assert at7["pinned"].to_dict() == {"m1": True, "m2": True, "m4": False, "m5": False, "m6": True}
        # a stream: open after `open` and `delta`, closed after `close`; the unit closes as a batch
        g = q.context_at(r, "s-gated", 6).set_index("message_id")
        assert bool(g.loc["m5", "open"]) and g.loc["m5", "tokens"] == 0
        g = q.context_at(r, "s-gated", 7).set_index("message_id")
        assert bool(g.loc["m5", "open"]) and g.loc["m5", "tokens"] == 45
        g = q.context_at(r, "s-gated", 8).set_index("message_id")
        assert not bool(g.loc["m5", "open"]) and g.loc["m3", "kind"] == "batch"
        units = q.units_at(r, "s-gated", 8)
        assert list(units["unit_id"]) == ["u1", "u2", "u3"]
        assert list(units["tokens"]) == [10, 20, 125] and list(units["offset"]) == [0, 10, 30]
        assert list(units.loc[2, "message_ids"]) == ["m3", "m4", "m5"]
        # the spill removes the whole unit; the next user turn arrives after it
        assert ids_at(store, "s-gated", 9) == ["m1", "m2"]
        assert ids_at(store, "s-gated", 10) == ["m1", "m2", "m6"]


def test_content_is_the_latest_recorded_and_optional(scripted: tuple[Store, dict]) -> None:
    store, _ = scripted
    with store.reader() as r:
        with_content = q.context_at(r, "s-orphan", 7, with_content=True).set_index("message_id")
        assert HOSTILE in json.loads(with_content.loc["m6", "content"])[0]["content"]
        assert "content" not in q.context_at(r, "s-orphan", 7).columns
        tables = q.session_tables(r, "s-orphan")
    # stepping over the extracted tables gives the same answer as the store, without the store
    step = q.step_from_tables(tables, 4)
    assert list(step["messages"]["message_id"]) == ["m1", "m2", "m3", "m4"]
    assert list(step["units"]["unit_id"]) == ["u1", "u2", "u3"]


def test_token_series_and_bucketing_keep_the_peak(scripted: tuple[Store, dict]) -> None:
    store, _ = scripted
    with store.reader() as r:
        full = q.token_series(r, "s-orphan")
        assert list(full["seq"]) == [1, 2, 3, 4, 5, 6, 7]
        assert list(full["tokens"]) == [10, 30, 80, 110, 60, 90, 120]
        assert full.loc[full["seq"] == 5, "peak_tokens"].item() == 110  # before the prune
        small = q.token_series(r, "s-orphan", max_points=6)
        assert len(small) < len(full) and small["peak_tokens"].max() == 120 and small["points"].sum() == 9


def test_event_log_check_markers_and_jumps(scripted: tuple[Store, dict]) -> None:
    store, info = scripted
    with store.reader() as r:
        log = q.event_log(r, "s-orphan", 5, before=0, after=0)
        assert list(log["what"]) == ["pruned", "prune", "remove"]
        assert log.loc[2, "detail"] == "pruned by check #1 (salience)"
        check = q.check_at(r, "s-orphan", 5)
        assert list(check["name"]) == ["prunegate.budget_check", "prunegate.prune"]
        assert check.loc[1, "span_id"] == info["orphan"]["prune_span_id"]
        assert q.check_at(r, "s-orphan", 4).empty
        marks = q.markers(r, "s-orphan")
        assert list(zip(marks["seq"], marks["kind"], strict=True)) == [(5, "prune"), (8, "violation"), (9, "violation")]
        thinned = q.markers_from_tables(q.session_tables(r, "s-orphan"), max_markers=1)
        assert list(zip(thinned["seq"], thinned["kind"], thinned["n"], strict=True)) == [
            (5, "prune", 1), (8, "violation", 2)]  # a kind beyond the limit: grouped, counted
        assert q.next_step(r, "s-orphan", 0, "violation") == 8
        assert q.next_step(r, "s-orphan", 8, "violation") == 9
        assert q.next_step(r, "s-orphan", 9, "violation") is None
        assert q.next_step(r, "s-orphan", 9, "prune", backwards=True) == 5
        assert q.next_step(r, "s-gated", 0, "deferral") == 5
        assert q.next_step(r, "s-gated", 0, "spill") == 9
        with pytest.raises(ValueError, match="unknown jump target 'nope'"):
            q.next_step(r, "s-orphan", 0, "nope")
        history = q.message_detail(r, "s-orphan", "m3")
        assert list(history["event"]) == ["append", "remove"]


# ----------------------------------------------------------------------------- violations
def test_violation_links_to_the_prune_that_caused_it(scripted: tuple[Store, dict]) -> None:
    store, info = scripted
    prune_id = info["orphan"]["prune_span_id"]
    with store.reader() as r:
        v = q.violations(r).set_index("code")
        assert set(v.index) == {"orphan_tool_result", "duplicated_side_effect"}
        orphan = v.loc["orphan_tool_result"]
        assert orphan.cause_span_id == prune_id and orphan.prune_seq == 5 and orphan.policy == "salience"
        assert not orphan.prune_gated and list(orphan.pruned_ids) == ["m3"] and orphan.label == "lisbon-trip.json"
        assert v.loc["duplicated_side_effect", "cause_span_id"] == prune_id
        assert q.violations(r, session_id="s-gated").empty
        detail = q.causal_eviction(r, orphan.span_id)
        known = q.causal_eviction(r, orphan.span_id, session_id="s-orphan")  # the session given: the same
        assert q.causal_eviction(r, orphan.span_id, session_id="s-gated") is None  # not a violation of that one
    assert detail is not None and detail["prune_span_id"] == prune_id and detail["prune_seq"] == 5
    assert known is not None and known["prune_span_id"] == prune_id
    pd.testing.assert_frame_equal(known["partners"], detail["partners"])
    assert json.loads(detail["prune"])["prunegate.pruned.units"] == ["u3"]
    assert json.loads(detail["check_attributes"])["prunegate.check"] == 1
    partners = detail["partners"]
    assert list(partners["message_id"]) == ["m3"]
    assert partners.loc[0, "score"] == pytest.approx(0.12) and bool(partners.loc[0, "direct"])
    assert HOSTILE in partners.loc[0, "content"]


def test_violations_come_a_page_at_a_time_and_by_code(scripted: tuple[Store, dict]) -> None:
    store, info = scripted
    with store.reader() as r:
        every = q.violations(r)
        pages = [q.violations(r, limit=1, offset=k) for k in range(len(every) + 1)]
        codes = q.violation_codes(r)
        only = q.violations(r, codes=["duplicated_side_effect"])
        none = q.violations(r, codes=["no_such_code"])
        scoped = q.violation_codes(r, session_id="s-gated")
    assert len(every) == 2 and [len(p) for p in pages] == [1, 1, 0]
    # the pages, in order, are the whole list's rows (newest first), causes and all
    pd.testing.assert_frame_equal(pd.concat(pages[:2], ignore_index=True), every)
    assert dict(zip(codes["code"], codes["n"], strict=True)) == {"orphan_tool_result": 1, "duplicated_side_effect": 1}
    assert list(only["code"]) == ["duplicated_side_effect"]
    assert only.iloc[0].cause_span_id == info["orphan"]["prune_span_id"]
    assert none.empty and scoped.empty


def test_violation_without_link_and_unknown_ids(scripted: tuple[Store, dict], tmp_path: Path) -> None:
    store, _ = scripted
    with store.reader() as r:
        assert q.causal_eviction(r, "0000000000000000") is None
    # a violation recorded with no eviction to blame has no cause and no partners
    from tracer.spans import SessionConfig, TracedSession

    with recording(tmp_path / "s") as provider:
        ts = TracedSession(provider, SessionConfig(session_id="lonely", source="live", name="x"))
        ts.violation("orphan_tool_result", "no partner", call_ids=["zz"], seq=1)
        ts.end()
    with Store(tmp_path / "s").reader() as r:
        row = q.violations(r).iloc[0]
        assert row.cause_span_id is None or pd.isna(row.cause_span_id)
        detail = q.causal_eviction(r, row.span_id)
        assert detail is not None and detail["prune_span_id"] is None and detail["partners"].empty


def test_retries_point_at_the_first_execution(scripted: tuple[Store, dict]) -> None:
    store, _ = scripted
    with store.reader() as r:
        rt = q.retries(r)
        assert list(rt["call_id"]) == ["c3"] and rt.loc[0, "first_seq"] == 3 and rt.loc[0, "executions"] == 2
        assert bool(rt.loc[0, "side_effect"]) and rt.loc[0, "tool"] == "book_flight"
        assert q.retries(r, session_id="s-gated").empty
        newest = q.retries(r, limit=1)
        assert list(newest["call_id"]) == ["c3"] and int(newest.loc[0, "total"]) == len(rt) == 1
        assert q.retries(r, limit=0).empty


# ----------------------------------------------------------------------------- compare and live
def test_metrics_confidence_intervals_and_paired_differences() -> None:
    frame = pd.DataFrame({
        "session_id": ["a1", "a2", "a3", "b1", "b2", "b3"],
        "source_id": ["s1", "s2", "s3", "s1", "s2", "s3"],
        "label": ["one", "two", "three"] * 2,
        "arm": ["x · gated"] * 3 + ["x · ungated"] * 3,
        **{m: [0] * 6 for m in q.METRICS},
    })
    frame["violations"] = [0, 0, 0, 2, 4, 6]
    summary = q.arm_summary(frame, "violations").set_index("arm")
    row = summary.loc["x · ungated"]
    assert (row["n"], row["mean"], row["sd"]) == (3, 4.0, 2.0)
    half = 4.303 * 2.0 / math.sqrt(3)  # Student t, 2 degrees of freedom
    assert row["ci_low"] == pytest.approx(4.0 - half) and row["ci_high"] == pytest.approx(4.0 + half)
    diff = q.session_differences(frame, "violations", "x · gated")
    assert list(diff["difference"]) == [2, 4, 6] and set(diff["arm"]) == {"x · ungated"}
    with pytest.raises(ValueError, match="unknown metric"):
        q.arm_summary(frame, "nope")


def test_session_metrics_pair_replays_with_their_recording(demo: tuple[Store, dict]) -> None:
    store, info = demo
    with store.reader() as r:
        m = q.session_metrics(r)
        replays = m[m["source"] == "replay"]
        assert set(replays["arm"]) == {"salience · ungated", "salience · gated", "recency · gated"}
        assert set(replays["source_id"]) == set(info["imported"])
        # the gate's promise, measured: no violations under the gate, some without it
        assert replays.loc[replays["arm"] != "salience · ungated", "violations"].sum() == 0
        assert replays.loc[replays["arm"] == "salience · ungated", "violations"].sum() > 0
        one = info["imported"][0]
        assert set(q.session_metrics(r, source_ids=[one])["source_id"]) == {one}
        assert set(q.sessions(r, exclude_sources=["replay"], complete=True, summary=False)["session_id"]) == set(
            info["imported"])
        assert {"salience", "recency"} <= set(q.policy_choices(r))


def test_live_sessions_window(scripted: tuple[Store, dict]) -> None:
    store, _ = scripted
    with store.reader() as r:
        assert set(q.live_sessions(r, since_ns=0)["session_id"]) == {"s-orphan", "s-gated", "s-recorded"}
        assert q.live_sessions(r, since_ns=2**62).empty
        every = q.live_sessions(r, since_ns=0)
        newest = q.live_sessions(r, since_ns=0, limit=2)  # the two most recent, with their own figures
        last = r.query("SELECT session_id, max(coalesce(end_time_ns, start_time_ns)) AS t FROM spans "
                       "WHERE session_id IS NOT NULL AND name NOT IN ('prunegate.annotation', 'prunegate.comparison') "
                       "GROUP BY 1 ORDER BY t DESC, session_id LIMIT 2")
    assert list(newest["session_id"]) == [row["session_id"] for row in last]
    pd.testing.assert_frame_equal(newest, every.head(2))


def test_session_tables_read_once_equal_the_queries_over_the_store(demo: tuple[Store, dict]) -> None:
    """The session's rows read once and queried in memory (the store's span_events view over them)
    give the tables the same queries give over the whole store, for replays and imports alike."""
    from tracer.queries import steps

    store, _ = demo
    with store.reader() as r:
        sids = [row["session_id"] for row in r.query("SELECT DISTINCT session_id FROM spans ORDER BY 1")]
        assert len(sids) > 10
        for sid in sids:
            read_once = q.session_tables(r, sid)
            for name, sql in (("msg_events", steps._MSG_EVENTS_SQL), ("unit_closes", steps._CLOSES_SQL),
                              ("events", steps._EVENTS_SQL)):
                whole = r.con.sql(sql, params={"sid": sid}).to_arrow_table()
                assert whole.schema.equals(read_once[name].schema), (sid, name)
                order = [(c, "ascending") for c in whole.column_names if c not in ("call_ids", "answers", "tool_names")]
                assert whole.sort_by(order).to_pylist() == read_once[name].sort_by(order).to_pylist(), (sid, name)


# ----------------------------------------------------------------------------- real replays
@pytest.mark.slow
def test_context_matches_what_real_replays_recorded(demo: tuple[Store, dict]) -> None:
    """On real replays: the tokens in context after a step equal what the tracer recorded there
    (the budget check's tokens.after, else the last message event's context.tokens), and every
    prune's ids leave exactly at its step."""
    store, info = demo
    checked = 0
    with store.reader() as r:
        first = info["results"][0].source_id
        for result in [x for x in info["results"] if x.source_id == first]:  # every arm of one recording
            sid = result.replay_id
            tables = q.session_tables(r, sid)
            events = tables["msg_events"].to_pandas()
            events = events[events["event"] != "remove"].sort_values(["seq", "t"])
            recorded = dict(zip(events["seq"], events["context_tokens"], strict=True))  # last one per step wins
            for row in r.query("SELECT seq, attributes->>'prunegate.tokens.after' AS after FROM spans "
                               "WHERE session_id = ? AND name = 'prunegate.budget_check'", [sid]):
                recorded[row["seq"]] = int(row["after"])
            prunes = r.query("SELECT seq, attributes FROM spans WHERE session_id = ? AND name = 'prunegate.prune'",
                             [sid])
            sample = set(sorted(recorded)[::5]) | {p["seq"] for p in prunes}  # keep the test quick
            for seq, tokens in sorted((k, v) for k, v in recorded.items() if k in sample):
                step = q.step_from_tables(tables, int(seq), with_content=False)
                assert int(step["messages"]["tokens"].sum()) == int(tokens), (sid, seq)
                assert int(step["units"]["tokens"].sum()) == int(tokens), (sid, seq)
                checked += 1
            for p in prunes:
                pruned = set(json.loads(p["attributes"]).get("prunegate.pruned.ids") or [])
                before = set(q.step_from_tables(tables, p["seq"] - 1)["messages"]["message_id"])
                after = set(q.step_from_tables(tables, p["seq"])["messages"]["message_id"])
                assert pruned <= before and not (pruned & after), (sid, p["seq"])
    assert checked > 20


def test_changes_since_counts_new_sessions_by_kind_and_the_ones_that_grew() -> None:
    import pyarrow as pa

    from tracer.queries.catalog import changes_since

    index = pa.table({
        "session_id": ["old", "grew", "new-rec", "new-rep", "new-rep2", "empty"],
        "kind": ["recorded", "replay", "recorded", "replay", "replay", "recorded"],
        "first_ns": [10, 20, 60, 70, 80, None],
        "last_ns": [40, 90, 65, 75, 85, None],
    })
    assert changes_since(index, 50) == {"recorded": 1, "replay": 2, "grown": 1}
    assert changes_since(index, 100) == {"recorded": 0, "replay": 0, "grown": 0}
    assert changes_since(index, 0) == {"recorded": 2, "replay": 3, "grown": 0}
