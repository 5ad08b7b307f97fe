"""Annotations and saved comparisons are spans in the store; the session catalog compaction keeps
answers exactly what computing it from the spans answers.

Everything runs on a real store (imported sessions replayed through the real engine), through the
real command line (a subprocess) and the real dashboard (AppTest); results are read back from the store.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from tests.dashboard.test_dashboard_app import page  # the app at a page, after one run
from tests.dashboard_fixtures import demo_store
from tests.paths import REPO
from tracer import queries
from tracer.contract import names as sn
from tracer.queries import catalog
from tracer.queries.writes import annotate, save_comparison
from tracer.store import ENV_STORE, Store, records
from tracer.store import catalog as store_catalog
from tracer.wire.export import select_rows


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    path = tmp_path_factory.mktemp("notes") / "store"
    demo_store(path, per_file=1)
    with Store(path).reader() as r:
        rows = r.query(f"SELECT session_id, span_id FROM spans WHERE name = '{sn.VIOLATION}' ORDER BY seq, span_id")
    old = os.environ.get(ENV_STORE)
    os.environ[ENV_STORE] = str(path)
    yield {"path": path, "violation": rows[0]}
    if old is None:
        os.environ.pop(ENV_STORE, None)
    else:
        os.environ[ENV_STORE] = old


def prunegate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tracer.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120)


def index_of(path: Path) -> pd.DataFrame:
    with Store(path).reader() as r:
        return catalog.session_index(r).to_pandas().sort_values("session_id").reset_index(drop=True)


def test_annotate_from_the_command_line_stores_lists_filters_searches_and_exports(store: dict) -> None:
    path, v = store["path"], store["violation"]
    before = index_of(path)
    done = prunegate("annotate", "--store", str(path), v["session_id"], "--span", v["span_id"],
                     "--label", "evicted-partner", "--note", "the <b>result</b> lost its call")
    assert done.returncode == 0, done.stderr
    assert v["span_id"] in done.stdout and "violation" in done.stdout
    with Store(path).reader() as r:  # read back from the store: one annotation span, child of the violation
        spans = r.query(f"SELECT * FROM spans WHERE name = '{sn.ANNOTATION}'")
        assert len(spans) == 1 and spans[0]["parent_span_id"] == v["span_id"]
        assert spans[0]["session_id"] == v["session_id"] and spans[0]["seq"] is None
        listed = queries.annotation_list(r, labels=["evicted-partner"])
        assert listed.iloc[0]["target"] == "violation" and listed.iloc[0]["note"] == "the <b>result</b> lost its call"
        everyone = queries.annotation_list(r)  # one session's list is the whole list's rows of it
        mine = queries.annotation_list(r, session_id=v["session_id"])
        pd.testing.assert_frame_equal(mine, everyone[everyone["session_id"] == v["session_id"]].reset_index(drop=True))
        assert mine.iloc[0]["what"] and mine.iloc[0]["step"] is not None  # its target found in the session
        assert queries.annotation_list(r, session_id="no-such-session").empty
        page = catalog.session_page(r, labels=["evicted-partner"])
        assert list(page["rows"]["session_id"]) == [v["session_id"]]
        assert page["rows"].iloc[0]["labels"] == "evicted-partner"
        assert v["session_id"] in set(catalog.search_hits(r, "LOST ITS CALL").column("session_id").to_pylist())
        assert catalog.session_page(r, labels=["no-such-label"])["total"] == 0
    # an annotation is not activity: counts and times of the session stay what they were
    pd.testing.assert_frame_equal(index_of(path), before)
    rows, _ = select_rows(Store(path), [v["session_id"]])  # what `prunegate export --session` sends
    assert any(r["name"] == sn.ANNOTATION for r in rows)
    listed_cli = prunegate("annotate", "--store", str(path), "--list", "--label", "evicted-partner", "--json")
    assert json.loads(listed_cli.stdout)[0]["span_id"] == v["span_id"]


def test_bad_annotations_are_refused_in_one_line(store: dict) -> None:
    path, v = store["path"], store["violation"]
    with Store(path).reader() as r:
        n = r.query(f"SELECT count(*) AS n FROM spans WHERE name = '{sn.ANNOTATION}'")[0]["n"]
        message = r.query(f"SELECT span_id FROM spans WHERE name = '{sn.MESSAGE}' AND session_id = ? LIMIT 1",
                          [v["session_id"]])[0]["span_id"]
    for args, says in ((["no-such-session", "--label", "x"], "no session no-such-session"),
                       ([v["session_id"], "--label", "  "], "needs a label"),
                       ([v["session_id"], "--span", message, "--label", "x"], "annotate a session, a decision")):
        done = prunegate("annotate", "--store", str(path), *args)
        assert done.returncode == 2 and says in done.stderr and len(done.stderr.strip().splitlines()) == 1
    with Store(path).reader() as r:
        assert r.query(f"SELECT count(*) AS n FROM spans WHERE name = '{sn.ANNOTATION}'")[0]["n"] == n


def test_the_catalog_compaction_keeps_answers_what_the_spans_do(tmp_path: Path, store: dict) -> None:
    path = tmp_path / "store"
    demo_store(path, per_file=1, policies=(("recency", False),))
    s = Store(path)
    with s.reader() as r:
        assert not r.catalog
        fly = catalog.session_index(r).to_pandas()
        fly_hits = catalog.search_hits(r, "weather")
        fly = catalog.page_detail(r, fly).drop(columns=["labels"])  # messages and peaks, as a page reads them
    s.compact()
    annotate(s, str(fly["session_id"].iloc[0]), label="after-compaction", note="rainy")  # a pending segment
    with s.reader() as r:
        assert r.catalog and r.pending_segments
        kept = catalog.session_index(r).to_pandas()
        spans_only = r.con.sql(store_catalog.index_sql("spans")).to_arrow_table().to_pandas()
        hits = catalog.search_hits(r, "weather")
        assert set(catalog.search_hits(r, "rainy").column("session_id").to_pylist()) == {fly["session_id"].iloc[0]}
    order = ["session_id"]
    pd.testing.assert_frame_equal(kept.sort_values(order).reset_index(drop=True),
                                  spans_only.sort_values(order).reset_index(drop=True), check_dtype=False)
    pd.testing.assert_frame_equal(kept[fly.columns].sort_values(order).reset_index(drop=True),
                                  fly.sort_values(order).reset_index(drop=True), check_dtype=False)
    assert sorted(hits.column("session_id").to_pylist()) == sorted(fly_hits.column("session_id").to_pylist())
    assert hits.num_rows > 0
    s.compact()  # the annotation is compacted too: its text is in the kept search rows
    with s.reader() as r:
        assert not r.pending_segments
        assert r.query(f"SELECT count(*) AS n FROM {r.db}.search_text WHERE contains(text, 'rainy')")[0]["n"] == 1


def test_the_counts_compaction_keeps_give_the_compare_page_and_session_list_what_the_spans_do(
        tmp_path: Path) -> None:
    """The Compare page's metrics, the session list and the repeated tool calls read the roots and
    span counts compaction keeps (``session_roots``, ``session_counts``), plus those of pending
    segments: the same rows as reading every span."""
    from tracer.lab import ReplaySpec, replay_session
    from tracer.traffic import close_provider, load_conversations, store_tracer_provider

    path = tmp_path / "store"
    demo_store(path, per_file=1, policies=(("recency", True), ("salience", False)))
    s = Store(path)
    with s.reader() as r:
        assert not r.catalog
        fly = queries.session_metrics(r)
    s.compact()
    conv = load_conversations(path)[0]
    provider = store_tracer_provider(path)
    try:  # a replay recorded at "decisions" (message events inside other spans) after the compaction
        added = replay_session(conv, ReplaySpec("salience", gated=True, detail="decisions", label="late"),
                               tracer_provider=provider, capture_content=True)
    finally:
        close_provider(provider)
    annotate(s, str(fly["session_id"].iloc[0]), label="after-compaction")  # a pending segment on a compacted session
    with s.reader() as r:
        assert r.catalog and r.pending_segments

        def defined() -> set[str]:
            return {v["view_name"] for v in r.query("SELECT view_name FROM duckdb_views() WHERE temporary")}

        late_pending = r.query("SELECT count(*) AS n FROM _segment_spans WHERE session_id = ?",
                               [added.replay_id])[0]["n"]
        assert late_pending > 0  # the late replay is read from its segment: the kept rows get a fresh part
        assert "spans" in defined() and "catalog_counts" not in defined()  # bound on first ask only
        assert r.catalog_views and {"catalog_counts", "catalog_roots", "catalog_sessions"} <= defined()
        kept_rows = r.query(f"SELECT count(*) AS n FROM {r.db}.session_counts")[0]["n"]
        kept = queries.session_metrics(r)
        spans_only = queries.session_metrics(r.con)  # a plain connection: every count from the spans
        listed = queries.sessions(r, limit=None).sort_values("session_id").reset_index(drop=True)
        listed_fly = queries.sessions(r.con, limit=None).sort_values("session_id").reset_index(drop=True)
        retried, retried_fly = queries.retries(r), queries.retries(r.con)  # the kept counts say where to look
        newest = {k: (queries.retries(r, limit=k), queries.retries(r.con, limit=k)) for k in (1, 2, 5)}
    assert kept_rows == len(fly)  # every compacted session has its kept row
    assert added.replay_id in set(kept["session_id"]) and len(kept) == len(fly) + 1
    late = kept[kept["session_id"] == added.replay_id].iloc[0]
    assert late["arm"] == "late · gated" and late["prunes"] == added.prunes
    pd.testing.assert_frame_equal(kept, spans_only, check_dtype=False)
    pd.testing.assert_frame_equal(kept[kept["session_id"] != added.replay_id].reset_index(drop=True), fly,
                                  check_dtype=False)
    pd.testing.assert_frame_equal(listed, listed_fly, check_dtype=False)
    assert (listed["messages"] > 0).all()
    assert len(retried) > 0
    pd.testing.assert_frame_equal(retried, retried_fly)
    for k, (some, some_fly) in newest.items():  # the newest k only: the same rows, the same total
        assert len(some) == min(k, len(retried_fly))
        pd.testing.assert_frame_equal(some, some_fly)


def test_an_older_store_gets_its_catalog_at_the_next_compaction(tmp_path: Path) -> None:
    import duckdb

    path = tmp_path / "store"
    demo_store(path, per_file=1, policies=(("recency", True),))
    s = Store(path)
    s.compact()
    con = duckdb.connect(str(s.layout.main))  # what a store compacted by an older prunegate looks like
    con.execute("DROP TABLE session_catalog; DROP TABLE search_text; DELETE FROM store_meta WHERE key = ?",
                [store_catalog.META_KEY])
    con.close()
    with s.reader() as r:
        assert not r.catalog
        fly = catalog.session_index(r).to_pandas()
        fly = catalog.page_detail(r, fly).drop(columns=["labels"]).sort_values("session_id").reset_index(drop=True)
    s.compact()
    with s.reader() as r:
        assert r.catalog
        kept = catalog.session_index(r).to_pandas().sort_values("session_id").reset_index(drop=True)
    pd.testing.assert_frame_equal(kept[fly.columns], fly, check_dtype=False)


# ----------------------------------------------------------------------------- the dashboard
def test_replay_page_adds_and_lists_an_annotation_as_text(store: dict) -> None:
    v = store["violation"]
    with Store(store["path"]).reader() as r:
        step = r.query("SELECT seq FROM spans WHERE span_id = ?", [v["span_id"]])[0]["seq"]
    at = page("replay", session=v["session_id"], step=str(step))
    target = at.selectbox(key="replay_annotate_target")
    assert not [o for o in target.options if v["span_id"] in o]  # targets read as words, never span ids
    pick = next(i for i, o in enumerate(target.options) if f"the violation at step {step}" in o)
    target.set_value(pick)
    at.text_input(key="replay_annotate_label").input("<i>flaky</i>")
    at.text_area(key="replay_annotate_note").input("<script>alert(1)</script> seen twice")
    at.button[[b.label for b in at.button].index("Save annotation")].click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert any(e.value.startswith("Saved the annotation") and "on the violation" in e.value for e in at.success)
    with Store(store["path"]).reader() as r:
        mine = queries.annotation_list(r, labels=["<i>flaky</i>"])
        here = {str(x["span_id"]) for x in r.query(  # the first violation at this step is the one picked
            f"SELECT span_id FROM spans WHERE name = '{sn.VIOLATION}' AND session_id = ? AND seq = ?",
            [v["session_id"], step])}
    assert len(mine) == 1 and mine.iloc[0]["span_id"] in here and mine.iloc[0]["step"] == step
    at.run()
    shown = next(d.value for d in at.dataframe if "label" in d.value.columns and "note" in d.value.columns)
    assert "<i>flaky</i>" in set(shown["label"]) and "<script>alert(1)</script> seen twice" in set(shown["note"])
    listing = page("annotations", label="<i>flaky</i>")
    table = next(d.value for d in listing.dataframe if "label" in d.value.columns)
    assert list(table["label"]) == ["<i>flaky</i>"] and table.iloc[0]["open"].endswith(f"&step={step}")
    sessions = page("sessions", label="<i>flaky</i>")
    rows = next(d.value for d in sessions.dataframe if "session" in d.value.columns)
    assert list(rows["session"]) == [v["session_id"]]


def test_the_targets_the_replay_page_offers_store_what_a_lookup_by_id_stores(store: dict) -> None:
    """The Replay page passes the spans it has read (the root from ``session_root``, the step's
    decisions and violations from its event log), so a save looks nothing up: each is stored on the
    same span, trace and session as the lookup by id stores it."""
    from dashboard.components import notes

    v, s = store["violation"], Store(store["path"])
    sid = str(v["session_id"])
    with s.reader() as r:
        step = int(r.query("SELECT seq FROM spans WHERE span_id = ?", [v["span_id"]])[0]["seq"])
        root = notes.root_target(queries.session_root(r, sid))
        events = queries.step_from_tables(queries.session_tables(r, sid), step)["events"]
    targets = notes.step_targets(events, step, root)
    assert root is not None and len(targets) > 2  # the session, the check and the violation at least
    ids = []
    for text, target in targets:
        assert target is not None
        passed = annotate(s, sid, label="passed", target=target)
        looked = annotate(s, sid, label="looked", span_id=None if text == "this session" else target.span_id)
        ids.append((passed["id"], looked["id"]))
    with s.reader() as r:
        stored = {row["id"]: (row["trace_id"], row["parent_span_id"], row["session_id"], row["target"])
                  for row in r.query(f"""SELECT attributes->>'{sn.ANNOTATION_ID}' AS id, trace_id, parent_span_id,
                                         session_id, attributes->>'{sn.ANNOTATION_TARGET}' AS target
                                         FROM spans WHERE name = '{sn.ANNOTATION}'""")}
    assert [stored[a] for a, _ in ids] == [stored[b] for _, b in ids]
    assert {stored[a][3] for a, _ in ids} >= {"session", "decision", "violation"}


def test_a_saved_comparison_reopens_from_its_url_with_the_same_numbers(store: dict) -> None:
    at = page("compare", metric="prunes")
    diff = next(d.value for d in at.dataframe if "mean diff" in d.value.columns)  # shown at 3 significant digits
    at.text_input(key="compare_results_save_title").input("prunes, kept")
    at.button[[b.label for b in at.button].index("Save this comparison")].click().run()
    assert not at.exception
    with Store(store["path"]).reader() as r:
        listed = queries.saved_comparisons(r)
        ident = listed.loc[listed["title"] == "prunes, kept", "id"].iloc[0]
    assert (Path(store["path"]) / records.COMPARISONS / f"{ident}.json").is_file()  # a record beside the sweeps
    again = page("compare", saved=str(ident))
    assert "prunes, kept" in [s.value for s in again.subheader]
    reopened = next(d.value for d in again.dataframe if "mean diff" in d.value.columns)  # stored unrounded
    assert list(reopened["arm"]) == list(diff["arm"])
    assert [float(f"{x:.3g}") for x in reopened["mean diff"]] == list(diff["mean diff"])
    assert [float(f"{x:.3g}") for x in reopened["95% CI low"]] == list(diff["95% CI low"])
    missing = page("compare", saved="nope")
    assert any("No saved comparison nope" in e.value for e in missing.error)


def test_save_comparison_writes_through_a_store_or_its_location(tmp_path: Path) -> None:
    """A Store object (the dashboard's) or a location (a path here; a bucket URL in test_records)."""
    s = Store(tmp_path / "s")
    ident = save_comparison(s, "kept", {"budget": 100}, {"tables": {"x": [{"v": 1.5}]}})
    other = save_comparison(tmp_path / "s", "again", {"budget": 200}, {})
    with s.reader() as r:
        got = queries.saved_comparison(r, ident)
        assert set(queries.saved_comparisons(r)["id"]) == {ident, other}
    assert got is not None and got["params"] == {"budget": 100} and got["results"]["tables"]["x"] == [{"v": 1.5}]


def test_a_reopened_comparison_says_what_the_store_gained_since(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """Its numbers are the store as it was: the page says what was recorded after the save (new
    sessions by kind, sessions that grew), and an annotation is not a change to the traffic."""
    from tests.traffic import TAU

    dialogues = json.loads(TAU.read_text())
    path = tmp_path / "store"
    for i, part in enumerate((dialogues[:2], dialogues[2:3])):
        (tmp_path / f"part{i}.json").write_text(json.dumps(part))
    assert prunegate("import", str(tmp_path / "part0.json"), "--store", str(path)).returncode == 0
    ident = save_comparison(Store(path), "then", {"budget": 1000}, {"lines": ["as it was"]})
    monkeypatch.setenv(ENV_STORE, str(path))

    def caption() -> str:
        at = page("compare", saved=ident)
        found = [c.value for c in at.caption if c.value.startswith("Since it was saved")]
        assert len(found) == 1, [c.value for c in at.caption]
        return found[0]

    assert caption() == "Since it was saved (by span time): nothing new in the store."
    with Store(path).reader() as r:
        first = r.query(f"SELECT session_id FROM spans WHERE name = '{sn.SESSION}' ORDER BY session_id LIMIT 1")[0]
    annotate(Store(path), first["session_id"], label="later", note="not traffic")
    assert caption() == "Since it was saved (by span time): nothing new in the store."
    assert prunegate("import", str(tmp_path / "part1.json"), "--store", str(path)).returncode == 0
    assert caption() == "Since it was saved (by span time): 1 new recorded session."
    with Store(path).reader() as r:
        assert catalog.changes_since(catalog.session_index(r), 0) == {"recorded": 3, "replay": 0, "grown": 0}
