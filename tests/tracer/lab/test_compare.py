"""A/B comparison: rows per arm, paired differences with Student-t intervals, parallel workers writing their own segments."""

from __future__ import annotations

import io
import json
import math
import os

import pytest

from tests.traffic import TAU
from tracer.cli import main
from tracer.lab import Interval, ReplaySpec, arms, interval, parse_policies, run_replays
from tracer.lab.compare import ROW_KEYS, aggregate, compare, progress_bar
from tracer.lab.metrics import t95
from tracer.queries import list_sessions
from tracer.store import Store
from tracer.traffic import Conversation, import_paths


@pytest.fixture(scope="module")
def tau(tau_sessions: list[Conversation]) -> list[Conversation]:
    return tau_sessions[:12]


def test_rows_have_the_documented_keys_one_per_policy_and_gating(tau):
    c = compare(tau, "recency,salience", gated="both", budget=3000)
    assert [(r["policy"], r["gated"]) for r in c.rows] == [
        ("recency", True), ("salience", True), ("recency", False), ("salience", False)]
    for row in c.rows:
        assert tuple(row) == ROW_KEYS
        assert row["sessions"] == len(tau)
    gated_salience, ungated_salience = c.rows[1], c.rows[3]
    assert gated_salience["invalid_requests"] == 0 and ungated_salience["invalid_requests"] > 0
    assert 0 < gated_salience["retention"] <= 1


def test_rows_sum_the_sessions(tau):
    specs = arms(parse_policies("recency"), "off", budget=3000)
    results = run_replays(tau, specs)
    [row] = aggregate(specs, results)
    assert row["model_calls"] == sum(r.model_calls for r in results[0])
    assert row["peak_tokens"] == max(r.peak_tokens for r in results[0])
    refs = sum(r.references for r in results[0])
    assert row["retention"] == round(sum(r.retained for r in results[0]) / refs, 4)


def test_paired_differences_against_the_first_policy_of_the_same_gating(tau):
    c = compare(tau, "recency,salience,recency", gated="both", budget=3000)
    pairs = {(d["policy"], d["baseline"], d["gated"]) for d in c.differences}
    assert pairs == {("salience", "recency", True), ("recency", "recency", True),
                     ("salience", "recency", False), ("recency", "recency", False)}
    same = [d for d in c.differences if d["policy"] == d["baseline"] and d["metric"] != "retention"]
    # an ungated arm cannot defer: its deferrals are not applicable, so nothing is paired (n = 0)
    na = [d for d in same if not d["gated"] and d["metric"] == "deferrals"]
    assert len(na) == 1 and na[0]["n"] == 0 and na[0]["mean_diff"] is None
    paired = [d for d in same if d not in na]
    assert paired and all(d["n"] == len(tau) for d in paired)
    assert all(d["mean_diff"] == d["ci_low"] == d["ci_high"] == 0 for d in paired)
    orphans = next(d for d in c.differences
                   if (d["policy"], d["gated"], d["metric"]) == ("salience", False, "invalid_requests"))
    assert orphans["n"] == len(tau) and orphans["ci_low"] <= orphans["mean_diff"] <= orphans["ci_high"]
    assert orphans["mean_diff"] > 0


def test_the_interval_is_student_t_and_does_not_depend_on_order():
    values = [1, 0, 3, 2, 2, 5, 0, 1, 4, 2, 3, 1]
    iv = interval(values)
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    half = 2.201 * sd / math.sqrt(len(values))  # t, 11 degrees of freedom
    assert (iv.n, iv.mean) == (12, mean) and iv.low == pytest.approx(mean - half) and iv.high == pytest.approx(mean + half)
    assert interval(list(reversed(values))) == iv == interval(sorted(values))
    assert interval([2.0] * 10) == Interval(10, 2.0, 2.0, 2.0, 0.0)
    assert interval([7.0]) == Interval(1, 7.0, None, None)
    assert interval([None, float("nan")]) == Interval(0, None, None, None)
    assert t95(30) == 2.042 and 1.96 < t95(200) < t95(31) < 2.042  # beyond the table: the expansion, decreasing


def test_policy_lists_with_parameters():
    assert parse_policies("recency, recency@target=0.5,salience@target=0.6@max_df=0.4") == [
        ("recency", ()), ("recency", (("target", 0.5),)), ("salience", (("target", 0.6), ("max_df", 0.4)))]
    specs = arms(parse_policies("recency,recency@target=0.5"), "on")
    assert [s.name for s in specs] == ["recency", "recency@target=0.5"]
    with pytest.raises(ValueError):
        arms(parse_policies("recency"), "sometimes")


def test_two_workers_give_the_same_metrics_and_each_writes_its_own_segments(tau, tmp_path):
    specs = [ReplaySpec("salience", gated=g, budget=3000) for g in (True, False)]
    seen: list[tuple[int, int]] = []
    serial = run_replays(tau, specs)
    parallel = run_replays(tau, specs, workers=2, store_path=tmp_path / "s", chunk=1,
                           progress=lambda d, t: seen.append((d, t)))
    assert ([[r.comparable_dict() for r in rs] for rs in parallel]
            == [[r.comparable_dict() for r in rs] for rs in serial])
    total = len(tau) * len(specs)
    assert seen[0] == (0, total) and seen[-1] == (total, total)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    rows = list_sessions(tmp_path / "s")
    assert len(rows) == total and {r["source"] for r in rows} == {"replay"}
    assert {r["id"] for r in rows} == {r.replay_id for rs in parallel for r in rs}
    pids = {p.name.split("-")[1] for p in (tmp_path / "s" / "segments").glob("*.parquet")}
    # Workers write their own segments; the parent writes none. (Which worker gets how many tasks
    # is the pool's business: under load one worker can take them all.)
    assert pids and str(os.getpid()) not in pids and len(pids) <= 2


@pytest.mark.slow
def test_compare_command_json(tmp_path, capsys):
    store = tmp_path / "s"
    import_paths([TAU], store)
    names = [r["name"] for r in list_sessions(store)][:6]
    code = main(["compare", "--policies", "recency,salience", "--gated", "off", "--budget", "3000",
                 "--session", *names, "--store", str(store), "--workers", "2", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert [(r["policy"], r["gated"], r["sessions"]) for r in out["rows"]] == [("recency", False, 6), ("salience", False, 6)]
    assert {d["metric"] for d in out["differences"]} >= {"invalid_requests", "orphan_results", "retention"}
    replays = Store(store).query("SELECT count(*) AS n FROM spans WHERE name = 'prunegate.session' "
                                 "AND attributes->>'prunegate.session.source' = 'replay'")
    assert replays[0]["n"] == 12


def test_compare_refuses_bad_policy_lists(tmp_path, capsys):
    assert main(["compare", "--policies", "recency,nope", "--store", str(tmp_path)]) == 2
    assert "unknown policy 'nope'" in capsys.readouterr().err
    assert main(["compare", "--policies", ",", "--store", str(tmp_path)]) == 2


def test_progress_bar_only_on_a_terminal():
    assert progress_bar(io.StringIO()) is None

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Tty()
    show = progress_bar(out)
    show(0, 4)
    show(4, 4)
    assert "4/4 sessions" in out.getvalue() and out.getvalue().endswith("\n")


def test_tasks_end_in_single_sessions_and_cover_each_session_once_in_order():
    from tracer.lab.compare import _tasks

    convs = list(range(23))  # stand-ins: _tasks only batches
    tasks = list(_tasks(iter(convs), 4, count=len(convs), tail=8))
    assert [s for _, batch in tasks for s in batch] == convs
    assert all(first == batch[0] for first, batch in tasks)
    assert [len(b) for _, b in tasks] == [4, 4, 4, 3] + [1] * 8  # whole chunks until the last 8
    assert [len(b) for _, b in _tasks(iter(convs), 4)] == [4, 4, 4, 4, 4, 3]  # no count: no tail
    assert [len(b) for _, b in _tasks(iter(convs[:5]), 4, count=5, tail=8)] == [1] * 5
