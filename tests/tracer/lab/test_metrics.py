"""Same replays, same numbers: ``prunegate compare --json`` and both Compare views of the dashboard.

One real store: recorded sessions imported (τ-bench dialogues: ../shared/traffic when present,
else the sample in tests/data; see tests/traffic.py), then ``prunegate compare`` replays them into it. The dashboard's Compare
page reads the stored replays back (tracer.queries) and must show the very intervals the command
printed; its "Run a comparison" form must print them too. The store's span counts must agree with
what each replay counted and recorded, and ``prunegate sessions`` must list what the Sessions page
lists.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from dashboard.components.widgets import MISSING, words
from tests.paths import REPO, SESSIONS
from tests.traffic import TAU
from tracer import queries
from tracer.cli import main
from tracer.lab import metrics
from tracer.store import ENV_STORE, Store
from tracer.traffic import import_paths

APP = str(REPO / "dashboard" / "app.py")
POLICIES = ("recency", "salience")
# budget, hard ceiling, results streamed in N deltas: settings under which the gate also spills
TAU_RUN, SHIPPED_RUN = (3000, 3400, 3), (1500, 1800, 3)


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A store with imported sessions and one ``prunegate compare --json`` run over 8 of them."""
    path = tmp_path_factory.mktemp("metrics") / "store"
    report = import_paths([TAU if TAU.exists() else SESSIONS], path)
    assert report.sessions >= 8 and not report.refused
    names = [r["name"] for r in queries.list_sessions(path)][:8]
    run = TAU_RUN if TAU.exists() else SHIPPED_RUN
    out = _compare_json(path, names, run)
    old = os.environ.get(ENV_STORE)
    os.environ[ENV_STORE] = str(path)
    yield {"path": path, "names": names, "out": out, "run": run}
    if old is None:
        os.environ.pop(ENV_STORE, None)
    else:
        os.environ[ENV_STORE] = old


def _compare_json(path: Path, names: list[str], run: tuple[int, int, int]) -> dict[str, Any]:
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["compare", "--policies", ",".join(POLICIES), "--gated", "both", "--budget", str(run[0]),
                     "--hard-ceiling", str(run[1]), "--stream-results", str(run[2]), "--session", *names,
                     "--store", str(path), "--json"])
    assert code == 0
    return json.loads(buf.getvalue())


def _cli(out: dict[str, Any], gated: bool, metric: str) -> dict[str, Any]:
    [d] = [d for d in out["differences"] if (d["policy"], d["gated"], d["metric"]) == ("salience", gated, metric)]
    return {k: d[k] for k in ("n", "mean_diff", "ci_low", "ci_high", "level")}


def _as_shown(value: Any) -> float | None:
    """A number as the page's tables show it (words for columns, "—" for none, 3 significant digits at
    most), so the page and the command are held to the same figures at the precision a reader sees."""
    if value is None or value == MISSING or (isinstance(value, float) and value != value):
        return None
    return float(f"{float(str(value).replace(',', '')):.3g}")


def test_the_compare_views_functions_give_the_commands_intervals(compared: dict[str, Any]) -> None:
    with Store(compared["path"]).reader() as r:
        frame = queries.session_metrics(r)
    replays = frame[frame["source"] == "replay"]  # what the Compare page keeps
    assert len(replays) == 4 * len(compared["names"])
    checked = 0
    for gated in (True, False):
        base = metrics.arm_label("recency", gated)
        for metric in metrics.NAMES:
            summary = queries.difference_summary(replays, metric, base).set_index("arm")
            want = _cli(compared["out"], gated, metric)
            if want["n"] == 0:  # nothing to pair (an ungated arm's deferrals): no row, as no interval
                assert metrics.arm_label("salience", gated) not in summary.index, (gated, metric)
                continue
            dash = summary.loc[metrics.arm_label("salience", gated)].to_dict()
            got = {k: (None if isinstance(v, float) and v != v else v) for k, v in dash.items() if k in want}
            assert got == want, (gated, metric)
            checked += want["ci_low"] is not None and want["ci_low"] != want["ci_high"]
    assert checked >= 4  # real intervals, not only all-zero differences


def test_the_compare_page_shows_the_commands_intervals(compared: dict[str, Any]) -> None:
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/compare.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    for metric in ("invalid_requests", "tokens_sent", "retention"):
        at.selectbox(key="compare_metric").set_value(metric).run()
        at.selectbox(key="compare_baseline").set_value("recency · ungated").run()
        assert not at.exception, [e.value for e in at.exception]
        [table] = [d.value for d in at.dataframe if words("mean_diff") in d.value.columns]
        row = table.set_index("arm").loc["salience · ungated"].to_dict()
        want = _cli(compared["out"], False, metric)
        assert {k: _as_shown(row[words(k)]) for k in want if k != "level"} == \
            {k: _as_shown(v) for k, v in want.items() if k != "level"}, metric


def test_the_run_form_prints_the_commands_intervals(compared: dict[str, Any]) -> None:
    with Store(compared["path"]).reader() as r:
        listed = queries.sessions(r, exclude_sources=["replay"], complete=True, summary=False)
    ids = [s for s, name in zip(listed["session_id"], listed["label"], strict=True) if name in compared["names"]]
    assert len(ids) == len(compared["names"])
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/compare.py")
    at.query_params["tab"] = "Run a comparison"  # only the open tab runs
    at.run()
    at.multiselect(key="compare_run_sessions").set_value(ids)
    at.multiselect(key="compare_run_policies").set_value(list(POLICIES))
    at.selectbox(key="compare_run_gated").set_value("both")
    budget, ceiling, stream = compared["run"]
    at.number_input(key="compare_run_budget").set_value(budget)
    at.number_input(key="compare_run_ceiling").set_value(ceiling)
    at.number_input(key="compare_run_stream").set_value(stream)
    next(b for b in at.button if b.label == "Run comparison").click()
    at.run(timeout=180)
    assert not at.exception, [e.value for e in at.exception]
    [table] = [d.value for d in at.dataframe if words("mean_diff") in d.value.columns and "policy" in d.value.columns]
    shown = {(d["policy"], bool(d["gated"]), d["metric"]): d for d in table.to_dict("records")}
    for d in compared["out"]["differences"]:
        row = shown[(d["policy"], d["gated"], d["metric"])]
        for k in ("n", "mean_diff", "ci_low", "ci_high"):
            assert _as_shown(row[words(k)]) == _as_shown(d[k]), (d["policy"], d["gated"], d["metric"], k)


def test_the_stores_span_counts_agree_with_what_each_replay_recorded(compared: dict[str, Any]) -> None:
    with Store(compared["path"]).reader() as r:
        counted = queries.sessions(r, sources=["replay"]).set_index("session_id")
        recorded = {row["session_id"]: json.loads(row["a"]) for row in r.query(
            "SELECT session_id, attributes AS a FROM spans WHERE name = 'prunegate.session' "
            "AND attributes->>'prunegate.session.source' = 'replay'")}
    assert len(recorded) >= 4 * len(compared["names"])
    spilled = 0
    for sid, attrs in recorded.items():
        for name in ("invalid_requests", "prunes", "deferrals", "spills", "failures", "peak_tokens", "model_calls"):
            assert int(counted.loc[sid, name]) == attrs[metrics.attribute(name)], (sid, name)
        spilled += attrs[metrics.attribute("spills")]
    assert spilled > 0  # the hard ceiling made the gate spill: the spill count was compared for real


def test_prunegate_sessions_lists_what_the_sessions_page_lists(compared: dict[str, Any], capsys) -> None:
    assert main(["sessions", "--store", str(compared["path"]), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    with Store(compared["path"]).reader() as r:
        page = queries.sessions(r).set_index("session_id")
    assert {r["id"] for r in rows} == set(page.index)
    for row in rows:
        p = page.loc[row["id"]]
        assert (row["name"], row["source"], row["messages"], row["tool_calls"], row["violations"]) == (
            p["label"], p["source"], p["messages"], p["tool_calls"], p["violations"])
    assert main(["sessions", "--store", str(compared["path"]), "--source", "import", "--json"]) == 0
    imported = json.loads(capsys.readouterr().out)
    assert {r["source"] for r in imported} == {"import"} and len(imported) < len(rows)


def test_pairs_match_sessions_and_skip_undefined_values() -> None:
    rows: list[dict[str, Any]] = [
        {"source_id": "s1", "arm": "a", "retention": 0.5}, {"source_id": "s1", "arm": "b", "retention": 0.75},
        {"source_id": "s2", "arm": "a", "retention": None}, {"source_id": "s2", "arm": "b", "retention": 1.0},
        {"source_id": "s3", "arm": "b", "retention": 0.0},  # no baseline run: not paired
        {"source_id": "s4", "arm": "a", "retention": 0.2}, {"source_id": "s4", "arm": "b", "retention": 0.4},
        {"source_id": "s4", "arm": "b", "retention": 0.6},  # replayed twice under b: averaged
    ]
    pairs = metrics.pairs(rows, "retention", "a")
    assert [(p.source_id, p.arm, p.difference) for p in pairs] == [
        ("s1", "b", 0.25), ("s4", "b", pytest.approx(0.3))]
    [summary] = metrics.difference_summary(rows, "retention", "a")
    iv = metrics.interval([0.25, 0.5 - 0.2])
    assert summary == {"arm": "b", "baseline": "a", "metric": "retention", "n": 2, "mean_diff": metrics.rounded(iv.mean),
                       "ci_low": metrics.rounded(iv.low), "ci_high": metrics.rounded(iv.high), "level": 0.95}
    assert metrics.difference_summary(rows, "retention", "c") == []  # no session ran the baseline


def test_ungated_arms_report_no_deferrals_anywhere(compared: dict[str, Any]) -> None:
    """An ungated arm cannot defer: the command's rows, the per-session metrics read from the store
    and the Compare page say "not applicable" (None / "—"), never 0; gated arms keep their counts."""
    rows = {(r["policy"], r["gated"]): r for r in compared["out"]["rows"]}
    for policy in POLICIES:
        assert rows[(policy, False)]["deferrals"] is None
        assert isinstance(rows[(policy, True)]["deferrals"], int)
    assert sum(rows[(p, True)]["deferrals"] for p in POLICIES) > 0  # the gated arms did defer here
    diffs = [d for d in compared["out"]["differences"] if d["metric"] == "deferrals"]
    assert {d["gated"]: d["n"] for d in diffs}[False] == 0 and {d["gated"]: d["n"] for d in diffs}[True] > 0
    with Store(compared["path"]).reader() as r:
        frame = queries.session_metrics(r)
    replays = frame[frame["source"] == "replay"]
    ungated = replays[replays["gated"].eq(False)]
    gated = replays[replays["gated"].eq(True)]
    assert len(ungated) >= 2 * len(compared["names"]) and ungated["deferrals"].isna().all()
    assert gated["deferrals"].notna().all() and gated["deferrals"].sum() > 0
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/compare.py")
    at.run()
    at.selectbox(key="compare_metric").set_value("deferrals").run()
    assert not at.exception, [e.value for e in at.exception]
    [side] = [d.value for d in at.dataframe if "metric" in d.value.columns and "recency · ungated" in d.value.columns]
    shown = side.set_index("metric").loc["deferrals"].to_dict()
    assert shown["recency · ungated"] == MISSING and shown["salience · ungated"] == MISSING
    assert _as_shown(shown["recency · gated"]) is not None
    [summary] = [d.value for d in at.dataframe if words("sd") in d.value.columns]  # mean per arm, 95% CI
    by_arm = summary.set_index(words("arm"))
    assert by_arm.loc["recency · ungated", words("n")] == 0
    assert by_arm.loc["recency · ungated", words("mean")] == MISSING
    assert _as_shown(by_arm.loc["recency · gated", words("mean")]) is not None
