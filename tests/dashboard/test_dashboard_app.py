"""AppTest runs of every dashboard page on real temp stores filled with real spans.

The store holds sessions imported from data/sessions and replayed under three arms through the real
replay engine, observer and store pipeline, plus the scripted failure-1 session whose exact steps
are known (tests/dashboard_fixtures.py).
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from dashboard.components import warm
from dashboard.components.safe import esc, md, short
from dashboard.components.widgets import MISSING, words
from tests.dashboard_fixtures import (
    HOSTILE,
    HOSTILE_NAME,
    demo_store,
    gated_session,
    orphan_session,
    recording,
)
from tests.paths import REPO
from tracer import queries
from tracer.store import ENV_STORE, Store
from tracer.store.reader import StoreReader

APP = str(REPO / "dashboard" / "app.py")
TIMEOUT = 60


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    path = tmp_path_factory.mktemp("app") / "store"
    info = demo_store(path, per_file=2)
    with recording(path) as provider:
        info["orphan"] = orphan_session(provider)
        info["gated"] = gated_session(provider)
    info["path"] = path
    old = os.environ.get(ENV_STORE)
    os.environ[ENV_STORE] = str(path)
    yield info
    if old is None:
        os.environ.pop(ENV_STORE, None)
    else:
        os.environ[ENV_STORE] = old


def page(name: str, **params: str) -> AppTest:
    """The app, switched to ``views/<name>.py`` with these query parameters, after one run."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    assert not at.exception, at.exception
    if name != "home":
        at.switch_page(f"views/{name}.py")
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def frame(at: AppTest, *columns: str):  # noqa: ANN201 - a pandas DataFrame
    """The first table on the page that has all these columns (plain tables carry no key), named as
    the query names them (a page shows them as words: ``message_id`` reads ``message``)."""
    shown = {words(c): c for c in columns}
    for d in at.dataframe:
        if set(shown) <= set(d.value.columns):
            return d.value.rename(columns=shown)
    raise AssertionError(f"no table with columns {columns}; tables: {[list(d.value.columns) for d in at.dataframe]}")


def number(cell: object) -> float:
    """A table cell as a number: drawn as text ("1,234") in a column that also holds "—"."""
    return float(str(cell).replace(",", ""))


def texts(at: AppTest) -> str:
    """Every text-like element's value, joined (what a reader sees, minus tables and charts)."""
    parts = [e.value for kind in ("title", "subheader", "caption", "text", "code", "markdown", "info", "warning",
                                  "success", "error") for e in getattr(at, kind)]
    return "\n".join(str(p) for p in parts)


# ----------------------------------------------------------------------------- Sessions
def test_sessions_page_lists_and_filters_sessions(store: dict) -> None:
    at = page("sessions")
    assert at.title[0].value == "Sessions"
    table = at.dataframe[0].value
    with Store(store["path"]).reader() as r:
        assert len(table) == len(queries.sessions(r))
    assert {"kind", "session", "policy", "replay of", "messages", "peak tokens", "violations", "deferrals", "spills",
            "failures"} <= set(table.columns)
    assert set(table["kind"]) == {"● recorded", "↻ replay"}
    assert table["replay"].str.startswith("replay?session=").all()
    at.multiselect(key="sessions_policies").set_value(["recency"]).run()
    assert set(at.dataframe[0].value["policy"]) == {"recency · gated"}
    assert at.query_params["policy"] == "recency"
    at.multiselect(key="sessions_policies").set_value([]).run()
    at.selectbox(key="sessions_gate").set_value("ungated").run()
    assert at.dataframe[0].value["policy"].str.endswith("· ungated").all()
    at.checkbox(key="sessions_only_v").check().run()
    assert (at.dataframe[0].value["violations"] > 0).all()
    at.selectbox(key="sessions_gate").set_value("any").run()
    at.checkbox(key="sessions_only_v").uncheck().run()
    at.text_input(key="sessions_q").input("bold").run()
    names = set(at.dataframe[0].value["name"])
    assert HOSTILE_NAME in names  # the recorded name, verbatim, as table data
    assert "s-orphan" in set(at.dataframe[0].value["session"])  # found by its message text (a tool result)
    assert names <= {HOSTILE_NAME, "lisbon-trip.json"}
    at.text_input(key="sessions_q").input("no session is called this").run()
    assert not at.exception and at.info and not at.dataframe


@pytest.mark.parametrize(("since", "until"), [("9999-12-31", "9999-12-31"), ("0001-01-01", "9999-12-31"),
                                               ("0001-01-01", "0001-01-01")])
def test_sessions_page_takes_any_date_a_url_can_hold(store: dict, since: str, until: str) -> None:
    """A hand-edited address (the last and first dates there are) filters; it never shows a traceback."""
    at = page("sessions", **{"from": since, "to": until})
    with Store(store["path"]).reader() as r:
        every = len(queries.sessions(r))
    shown = len(at.dataframe[0].value) if at.dataframe else 0
    assert shown == (min(every, 50) if (since, until) == ("0001-01-01", "9999-12-31") else 0)  # 50 a page


def test_start_page_counts_recorded_sessions_and_replays(store: dict) -> None:
    at = page("home")
    metrics = {m.label: m.value for m in at.metric}
    with Store(store["path"]).reader() as r:
        replays = int(r.con.execute("SELECT count(DISTINCT session_id) FROM spans WHERE name = 'prunegate.session' "
                                    "AND attributes->>'prunegate.session.source' = 'replay'").fetchall()[0][0])
        total = int(r.con.execute("SELECT count(DISTINCT session_id) FROM spans").fetchall()[0][0])
    assert metrics["↻ Replays"] == f"{replays:,}" and metrics["● Recorded sessions"] == f"{total - replays:,}"


# ----------------------------------------------------------------------------- Replay
def test_replay_opens_from_the_url_at_a_step(store: dict) -> None:
    at = page("replay", session="s-orphan", step="4", view="Messages table")
    assert at.slider(key="replay_step").value == 4
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Tokens in context"] == "110" and metrics["Budget"] == "100" and metrics["Pending calls"] == "2"
    assert metrics["Units · messages"] == "3 · 4"
    assert len(at.get("plotly_chart")) == 2  # the context bar and the token timeline
    context = frame(at, "position", "message_id", "pending_calls")
    assert list(context["message_id"]) == ["m1", "m2", "m3", "m4"]
    assert at.query_params["session"] == "s-orphan" and at.query_params["step"] == "4"


def test_replay_jumps_to_violations_prunes_and_deferrals(store: dict) -> None:
    at = page("replay", session="s-orphan", step="0")
    at.button(key="replay_jump_prune").click().run()
    assert at.slider(key="replay_step").value == 5
    assert "Jumped to the next prune: step 5." in texts(at)
    # the decision as a sentence; its span attributes behind a toggle
    assert any(re.match(r"salience pruned \d+ units? \(\d+ messages?, [\d,]+ tokens\) to meet 100 \(ungated",
                        i.value.replace("\\", "")) for i in at.info), [i.value for i in at.info]  # Markdown-escaped
    at.toggle(key="replay_decision_attrs").set_value(True).run()
    assert any("prunegate.pruned.ids" in json.dumps(j.value if isinstance(j.value, dict) else json.loads(j.value))
               for j in at.json)
    at.button(key="replay_jump_violation").click().run()
    assert at.slider(key="replay_step").value == 8
    at.button(key="replay_jump_violation").click().run()
    assert at.slider(key="replay_step").value == 9
    at.button(key="replay_jump_violation").click().run()
    assert at.slider(key="replay_step").value == 9 and "No violation after step 9." in texts(at)
    at.button(key="replay_prev").click().run()
    assert at.slider(key="replay_step").value == 8
    at.button(key="replay_next").click().run()
    assert at.slider(key="replay_step").value == 9

    gated = page("replay", session="s-gated", step="0")
    gated.button(key="replay_jump_deferral").click().run()
    assert gated.slider(key="replay_step").value == 5
    assert {m.label: m.value for m in gated.metric}["Hard ceiling"] == "150"


def test_replay_switching_session_starts_at_its_first_step(store: dict) -> None:
    at = page("replay", session="s-orphan", step="7")
    at.selectbox(key="replay_session").set_value("s-gated").run()
    assert not at.exception
    assert at.slider(key="replay_step").value == 1 and at.query_params["session"] == "s-gated"  # its first step


def test_replay_play_advances_the_step(store: dict) -> None:
    at = page("replay", session="s-orphan", step="2")
    at.toggle(key="replay_play").set_value(True).run()
    assert not at.exception
    assert at.slider(key="replay_step").value > 2


def test_replay_shows_recorded_content_as_text(store: dict) -> None:
    at = page("replay", session="s-orphan", step="7")  # the Conversation tab: a chat thread of the context
    shown = [t.value for t in at.text]
    assert any(HOSTILE in c for c in shown)  # verbatim as text, never markup
    at.toggle(key="replay_thread_raw").set_value(True).run()  # as sent to the provider
    assert any(HOSTILE in c.value for c in at.code)
    hostile = next(r.replay_id for r in store["results"] if r.name == HOSTILE_NAME)
    at = page("replay", session=hostile)
    caption = at.caption[0].value
    assert "\\<b\\>bold\\</b\\>" in caption  # Markdown-escaped: shows "<b>bold</b>" literally


def test_replay_of_an_unknown_session_says_so(store: dict) -> None:
    at = page("replay", session="no-such-session")
    assert any("no spans" in w.value for w in at.warning)


def test_replay_of_a_large_real_session_matches_the_store(store: dict) -> None:
    res = next(r for r in store["results"] if not r.gated and r.prunes)
    with Store(store["path"]).reader() as r:
        lo, hi = queries.session_bounds(r, res.replay_id)
        expected = list(queries.context_at(r, res.replay_id, hi)["message_id"])
    at = page("replay", session=res.replay_id, step=str(hi), view="Messages table")
    assert list(frame(at, "position", "message_id", "pending_calls")["message_id"]) == expected
    assert at.slider(key="replay_step").value == hi and lo == 0


# ----------------------------------------------------------------------------- Violations
def test_violations_page_shows_the_causal_eviction(store: dict) -> None:
    with Store(store["path"]).reader() as r:
        v = queries.violations(r, session_id="s-orphan")
    orphan = v.loc[v["code"] == "orphan_tool_result", "span_id"].item()
    at = page("violations", violation=orphan)
    assert "orphan_tool_result at step 8 of session s-orphan" in texts(at)
    facts = dict(zip(frame(at, "", "value")[""],
                     frame(at, "", "value")["value"], strict=True))
    assert facts["decision span"] == "prunegate.prune" and facts["step"] == "5" and facts["policy"] == "salience"
    assert facts["gated"] == "no (naive runtime)" and facts["pruned message ids"] == "m3"
    partners = frame(at, "message_id", "score")
    assert list(partners["message_id"]) == ["m3"] and partners["score"].iloc[0] == pytest.approx(0.12)
    assert any(HOSTILE in c.value for c in at.code)  # the evicted turn's content, as text
    assert len(at.get("plotly_chart")) == 2  # context before and after the prune
    retries = frame(at, "call id", "first run at step")
    assert "c3" in set(retries["call id"])


def test_warming_reads_what_the_violations_page_reads_first(store: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """The background warm-up makes the page's own calls (its list, first violation and repeated
    calls): the page, opened afterwards, opens no reader of the store and shows the same."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()  # the start page (it reads other things)
    warm._warm()
    for thread in threading.enumerate():  # the start page's own warm-up, if it started one
        if thread.name == warm.THREAD:
            thread.join()
    opened: list[object] = []
    real_init = StoreReader.__init__

    def counting(self: StoreReader, *args: object, **kwargs: object) -> None:
        opened.append(self)
        real_init(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(StoreReader, "__init__", counting)
    at.switch_page("views/violations.py")
    at.run()
    assert not at.exception, at.exception
    assert "Causal eviction" in texts(at) and "c3" in set(frame(at, "call id", "first run at step")["call id"])
    assert opened == []


def test_warming_computes_what_the_compare_page_shows_first(store: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """The warm-up computes the Compare page's default view (every arm, the first metric, the default
    baseline): the page, opened afterwards, computes no paired difference and shows them."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    warm._warm()
    for thread in threading.enumerate():
        if thread.name == warm.THREAD:
            thread.join()
    computed: list[str] = []
    real = queries.session_differences

    def counting(frame: Any, metric: str, baseline: str) -> Any:
        computed.append(baseline)
        return real(frame, metric, baseline)

    monkeypatch.setattr(queries, "session_differences", counting)
    at.switch_page("views/compare.py")
    at.run()
    assert not at.exception, at.exception
    assert "Per-session differences" in [h.value for h in at.subheader]
    assert at.selectbox(key="compare_baseline").value == "recency · gated"
    assert not frame(at, "arm", "verdict").empty  # the differences against it, drawn
    assert computed == []
    at.selectbox(key="compare_baseline").set_value("salience · gated").run()  # another baseline: computed now
    assert computed == ["salience · gated"]


def test_a_stopped_server_waits_for_its_warm_up_and_starts_no_other(monkeypatch: pytest.MonkeyPatch) -> None:
    """finish() lets the running query end, skips the steps after it and refuses new warm-ups: a
    daemon thread left inside DuckDB at the interpreter's exit aborts the process."""
    for name, value in (("_stopping", threading.Event()), ("_threads", []), ("_warmed", set())):
        monkeypatch.setattr(warm, name, value)
    entered, release, ran = threading.Event(), threading.Event(), []

    def slow() -> None:
        entered.set()
        release.wait(10)
        ran.append("slow")

    monkeypatch.setattr(warm, "_STEPS", (slow, lambda: ran.append("next")))
    monkeypatch.setattr(warm.data, "activity", lambda path: "a")
    monkeypatch.setattr(warm.data, "key", lambda: "store")
    warm.start()
    assert entered.wait(10)
    assert not warm.finish(timeout=0.2)  # still in its query
    release.set()
    assert warm.finish(timeout=10)
    assert ran == ["slow"]  # the step after it never started
    monkeypatch.setattr(warm.data, "activity", lambda path: "b")  # a new state of the store
    warm.start()
    assert len(warm._threads) == 1  # no second warm-up was started
    assert ran == ["slow"]


def test_violations_page_lists_every_violation_page_by_page_and_scopes_to_a_session(store: dict) -> None:
    at = page("violations")
    with Store(store["path"]).reader() as r:
        every = queries.violations(r)
    assert len(every) > 2 * 50  # the store's violations take three pages of 50
    listed: list[str] = []
    for number in (1, 2, 3):
        if number > 1:
            at.number_input(key="violations_page").set_value(number).run()
            assert not at.exception, at.exception
        rows = frame(at, "session", "code", "caused by")
        assert len(rows) == min(50, len(every) - len(listed))
        assert any(f"of {len(every):,}" in c.value for c in at.caption)
        listed += [f"{s} {c}" for s, c in zip(rows["session"], rows["code"], strict=True)]
    # the pages together are the store's list, newest first, each violation once
    assert listed == [f"{s} {c}" for s, c in zip(every["session_id"], every["code"], strict=True)]
    at.number_input(key="violations_page").set_value(1).run()
    # the default pick is a violation whose cause is known
    assert "Causal eviction" in texts(at) and not any("no link" in w.value for w in at.warning)
    scoped = page("violations", session="s-gated")
    assert any("No violations recorded in this session." in s.value for s in scoped.success)
    at.multiselect(key="violations_codes").set_value(["duplicated_side_effect"]).run()
    assert set(frame(at, "session", "code", "caused by")["code"]) == {"duplicated_side_effect"}


def test_violations_page_opens_a_linked_violation_that_is_not_on_the_first_page(store: dict) -> None:
    with Store(store["path"]).reader() as r:
        every = queries.violations(r)
    last = every.iloc[-1]  # on the last page of 50
    at = page("violations", violation=str(last["span_id"]))
    assert at.selectbox(key="violations_pick").value == str(last["span_id"])
    assert f"{last['code']} at step {last['seq']} of session {last['session_id']}" in texts(at)


# ----------------------------------------------------------------------------- Compare
def test_compare_page_shows_arms_side_by_side(store: dict) -> None:
    at = page("compare")
    side = frame(at, "metric")
    assert {"salience · ungated", "salience · gated", "recency · gated"} <= set(side.columns)
    by_metric = side.set_index("metric")
    violations = by_metric.loc["violations"]
    # an ungated column holds "—" (its deferrals are not applicable), so its cells are drawn as text
    assert number(violations["salience · gated"]) == 0 and number(violations["salience · ungated"]) > 0
    assert by_metric.loc["deferrals", "salience · ungated"] == MISSING
    assert number(by_metric.loc["deferrals", "salience · gated"]) >= 0
    summary = frame(at, "arm", "ci_low", "n").set_index("arm")
    assert summary.loc["salience · ungated", "n"] >= 5 and "ci_low" in summary.columns
    assert len(at.get("plotly_chart")) >= 3
    at.selectbox(key="compare_metric").set_value("prunes").run()
    assert not at.exception
    at.selectbox(key="compare_baseline").set_value("salience · gated").run()
    diff = frame(at, "arm", "difference")
    assert set(diff["arm"]) == {"salience · ungated", "recency · gated"}


def test_compare_page_with_many_recorded_sessions_offers_all_of_them_as_one_checkbox(
        store: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """Beyond SOURCES_LISTED recorded sessions the picker is a checkbox "All N recorded sessions"
    (checked: every one, as the store says), and unchecked a picker that starts empty."""
    from dashboard.components import data

    with Store(store["path"]).reader() as r:
        every = queries.session_metrics(r)
    replays = every[every["source"] == "replay"]
    sources = sorted(set(replays["source_id"]))
    monkeypatch.setattr(data, "SOURCES_LISTED", len(sources) - 1)
    at = page("compare")
    box = at.checkbox(key="compare_all_sources")
    assert box.value and box.label == f"All {len(sources):,} recorded sessions"
    assert not [m for m in at.multiselect if m.key == "compare_sources"]
    per_arm = replays.groupby("arm")["session_id"].count()
    caption = next(c.value for c in at.caption if c.value.startswith("Sessions per arm"))
    assert caption == "Sessions per arm: " + ", ".join(f"{a}: {int(k)}" for a, k in per_arm.items())
    box.uncheck().run()
    assert at.multiselect(key="compare_sources").value == []
    assert any("Pick at least one recorded session" in w.value for w in at.warning)
    at.multiselect(key="compare_sources").set_value([sources[0]]).run()
    one = replays[replays["source_id"] == sources[0]].groupby("arm")["session_id"].count()
    caption = next(c.value for c in at.caption if c.value.startswith("Sessions per arm"))
    assert caption == "Sessions per arm: " + ", ".join(f"{a}: {int(k)}" for a, k in one.items())


def test_compare_page_runs_a_comparison_with_progress(tmp_path: Path, store: dict) -> None:
    path = tmp_path / "store"
    info = demo_store(path, per_file=1, policies=())
    os.environ[ENV_STORE] = str(path)
    try:
        at = page("compare", tab="Run a comparison")
        at.multiselect(key="compare_run_sessions").set_value(info["imported"][:2])
        at.multiselect(key="compare_run_policies").set_value(["recency"])
        at.selectbox(key="compare_run_gated").set_value("both")
        next(b for b in at.button if b.label == "Run comparison").click()  # the form's submit button
        at.run(timeout=120)
        assert not at.exception, [e.value for e in at.exception]
        rows = frame(at, "policy", "gated", "sessions")
        assert len(rows) == 2 and set(rows["gated"]) == {True, False}
        assert any("Replayed 4 sessions" in s.value for s in at.success)
        with Store(path).reader() as r:
            assert (queries.sessions(r)["source"] == "replay").sum() == 4
        from tracer.lab import sweep

        [stored] = sweep.list_sweeps(path)  # stored as a sweep, as `prunegate compare` stores every run
        assert {(a["policy"], a["gated"]) for a in sweep.load(stored)["arms"]} == {("recency", True), ("recency", False)}
        frontier = page("compare", tab="Frontier")
        assert any("Pareto" in c.value for c in frontier.caption), "the Frontier tab does not show the UI's run"
        at = page("compare")  # the results tab (the default one) shows the replays just stored
        assert "salience" not in set(frame(at, "metric").columns)
        assert {"recency · gated", "recency · ungated"} <= set(frame(at, "metric").columns)  # the results tab
    finally:
        os.environ[ENV_STORE] = str(store["path"])


# ----------------------------------------------------------------------------- Live
def test_live_page_picks_up_sessions_recorded_while_it_runs(tmp_path: Path, store: dict) -> None:
    path = tmp_path / "store"
    with recording(path) as provider:
        gated_session(provider, session_id="first")
    os.environ[ENV_STORE] = str(path)
    try:
        at = page("live")
        assert set(frame(at, "session", "last decision")["session"]) == {"first"}
        with recording(path) as provider:  # an agent records another session; no restart
            orphan_session(provider, session_id="second")
        at.run()
        assert set(frame(at, "session", "last decision")["session"]) == {"first", "second"}
        assert len(at.get("plotly_chart")) == 1
    finally:
        os.environ[ENV_STORE] = str(store["path"])


def test_every_page_on_an_empty_store(tmp_path: Path, store: dict) -> None:
    os.environ[ENV_STORE] = str(tmp_path / "nothing-here")
    try:
        for name in ("sessions", "replay", "violations", "compare", "live"):
            at = page(name)
            assert not at.exception, name
    finally:
        os.environ[ENV_STORE] = str(store["path"])


# ----------------------------------------------------------------------------- text, never markup
def test_dashboard_never_renders_html() -> None:
    root = REPO / "dashboard"
    for path in root.rglob("*.py"):
        source = path.read_text()
        for forbidden in ("unsafe_allow_html", "st.html(", "components.v1", "st.components"):
            assert forbidden not in source, f"{path}: {forbidden}"


def test_safe_helpers() -> None:
    assert esc(HOSTILE) == "&lt;script&gt;alert(1)&lt;/script&gt; and &lt;b&gt;bold&lt;/b&gt;"
    assert esc(None) == ""
    assert md("<b>*x*</b> [a](b)") == "\\<b\\>\\*x\\*\\</b\\> \\[a\\]\\(b\\)"
    assert short("a  b\nc", 80) == "a b c" and short("x" * 100, 10) == "x" * 9 + "…"
