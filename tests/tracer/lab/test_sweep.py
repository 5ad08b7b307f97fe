"""Sweeps, cost and the recommendation: one command runs every arm; the recommendation's printed
command reproduces it. Runs on the shipped sessions (data/sessions), so no external traffic needed."""

from __future__ import annotations

import json
import shlex

import pytest

from tests.servers import run_prunegate
from tracer.cli import main
from tracer.lab import arms, cost, parse_policies, sweep
from tracer.lab.recommend import recommend
from tracer.queries import list_sessions
from tracer.store import Store
from tracer.traffic import import_paths, shipped_sessions_dir

POLICIES = "recency,salience,mask"
BUDGETS = "1500,3000,6000"
N_SESSIONS = 8


@pytest.fixture(scope="module")
def swept(tmp_path_factory) -> dict:
    """One sweep of 3 policies x 3 budgets (gated) over 8 shipped sessions, traced into a store."""
    store = tmp_path_factory.mktemp("sweep") / "s"
    import_paths([shipped_sessions_dir()], store)
    names = sorted(r["name"] for r in list_sessions(store))[:: max(1, 22 // N_SESSIONS)][:N_SESSIONS]
    return {"store": store, "names": names}


def run_json(capsys, argv: list[str]) -> tuple[int, dict]:
    code = main(argv + ["--json"])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else {}


# ------------------------------------------------------------------------------ parsing
def test_parameter_alternatives_expand_in_order():
    assert parse_policies("recency@target=0.5|0.8,salience") == [
        ("recency", (("target", 0.5),)), ("recency", (("target", 0.8),)), ("salience", ())]
    assert parse_policies("salience@target=0.5|0.6@max_df=0.2|0.4")[1] == (
        "salience", (("target", 0.5), ("max_df", 0.4)))
    with pytest.raises(ValueError, match="empty alternative"):
        parse_policies("recency@target=0.5|")


def test_budget_lists():
    assert sweep.parse_budgets("2000, 4_000,auto") == [2000, 4000, None]
    for bad in ("2000,x", "0", "2000,2000", ","):
        with pytest.raises(ValueError):
            sweep.parse_budgets(bad)
    specs = arms(parse_policies("recency,salience"), "both", [2000, 4000])
    assert [(s.name, s.gated, s.budget) for s in specs][:3] == [
        ("recency budget=2000", True, 2000), ("recency budget=4000", True, 4000), ("salience budget=2000", True, 2000)]
    assert len(specs) == 8


# ------------------------------------------------------------------------------ cost
def test_prices_and_prefix_cache_billing(tmp_path):
    table = cost.PriceTable()
    assert table.lookup("gpt-4o-2024-08-06")[0] == "gpt-4o"
    assert table.lookup("gpt-4o-mini-2024-07-18")[0] == "gpt-4o-mini"
    assert table.lookup("claude-sonnet-4-5-20250929")[0] == "claude-sonnet-4-5"
    assert table.lookup("llama-3") is None and table.as_of == cost.PRICES_AS_OF
    gpt = table.models["gpt-4o"]
    # 3000 input tokens, 2000 of them the previous request's prefix: 1024 + 7*128 = 1920 cached
    assert cost.cached_tokens(gpt, 3000, 2000) == 1920
    assert cost.call_cost(gpt, 3000, 2000, 100) == pytest.approx((1080 * 2.5 + 1920 * 1.25 + 100 * 10) / 1e6)
    assert cost.cached_tokens(gpt, 3000, 1000) == 0  # below the provider's minimum
    claude = table.models["claude-sonnet-4-5"]
    assert cost.cached_tokens(claude, 3000, 2000) == 0  # no cache_control marks in a replay
    f = tmp_path / "prices.toml"
    f.write_text('as_of = "2026-01-15"\n[models."gpt-4o"]\ninput = 5\noutput = 20\nprefix_cache = "none"\n')
    mine = cost.load_prices(f)
    assert mine.as_of == "2026-01-15" and mine.models["gpt-4o"] == cost.Price(5.0, 5.0, 20.0, "none")
    assert mine.models["gpt-4o-mini"] == table.models["gpt-4o-mini"]  # the rest stays
    f.write_text('[models."x"]\ninput = "cheap"\n')
    with pytest.raises(cost.PriceError, match="prices.toml: model 'x'"):
        cost.load_prices(f)


def test_pareto_marks_the_arms_nothing_beats():
    a = [{"retention": 0.9, "cost_per_session": 1.0}, {"retention": 0.95, "cost_per_session": 2.0},
         {"retention": 0.9, "cost_per_session": 1.5}, {"retention": None, "cost_per_session": 0.1},
         {"retention": 0.99, "cost_per_session": 0.5, "invalid_requests": 4}]  # cheap and good, but sends 400s
    assert sweep.pareto(a) == [True, True, False, False, False]


def test_the_lower_bound_decides_and_invalid_arms_never_qualify():
    arm = {"gated": True, "invalid_requests": 0, "failures": 0, "tokens_per_session": 100, "command": "c"}
    rec = {"id": "s", "sessions": [], "arms": [
        {**arm, "arm": "cheap-but-unsure", "retention": 0.97, "retention_low": 0.93, "cost_per_session": 1.0},
        {**arm, "arm": "sure", "retention": 0.98, "retention_low": 0.96, "cost_per_session": 2.0},
        {**arm, "arm": "sure-and-cheaper", "retention": 0.99, "retention_low": 0.97, "cost_per_session": 1.5},
        {**arm, "arm": "ungated", "gated": False, "retention": 0.99, "retention_low": 0.98,
         "cost_per_session": 0.5, "invalid_requests": 3},
    ]}
    out = recommend(rec, 0.95)
    assert out["arm"]["arm"] == "sure-and-cheaper"
    assert {r["arm"]: r["why"] for r in out["rejected"]} == {
        "cheap-but-unsure": "retention interval's lower bound 0.9300 < 0.95", "ungated": "3 invalid requests"}
    assert recommend(rec, 0.999)["arm"] is None


# ------------------------------------------------------------------------------ the sweep, end to end
def test_one_command_sweeps_every_arm_and_stores_the_sweep(swept, capsys):
    store, names = swept["store"], swept["names"]
    code, out = run_json(capsys, ["compare", "--store", str(store), "--policies", POLICIES, "--budget", BUDGETS,
                                  "--gated", "on", "--session", *names])
    assert code == 0
    got = out["arms"]
    assert [(a["policy"], a["budget"]) for a in got] == [
        (p, b) for p in POLICIES.split(",") for b in (1500, 3000, 6000)]
    for a in got:
        assert a["sessions"] == N_SESSIONS and a["invalid_requests"] == 0
        assert a["retention_low"] <= a["retention"] <= a["retention_high"]
        assert a["cost_low"] <= a["cost_per_session"] <= a["cost_high"] and a["cost_per_session"] > 0
        assert len(a["replays"]) == N_SESSIONS
    for p in POLICIES.split(","):  # more budget never keeps less
        series = [a["retention"] for a in got if a["policy"] == p]
        assert series == sorted(series), (p, series)
        assert series[0] < series[-1]
    # every arm but the baseline has its paired interval against the baseline
    paired = {(d["policy"], d["metric"]) for d in out["differences"]}
    assert {(a["arm"], m) for a in got[1:] for m in ("retention", "cost")} <= paired
    # what the command says is in the store: the replays of every arm and the sweep record
    rows = Store(store).query(
        "SELECT attributes->>'prunegate.replay.label' AS arm, count(*) AS n FROM spans "
        "WHERE name = 'prunegate.session' AND attributes->>'prunegate.session.source' = 'replay' GROUP BY 1")
    assert {r["arm"]: r["n"] for r in rows} == {a["arm"]: N_SESSIONS for a in got}
    stored = sweep.last_sweep(store)
    assert stored["id"] == out["sweep"]["id"] and [a["arm"] for a in stored["arms"]] == [a["arm"] for a in got]
    ids = {r["replay_id"] for a in stored["arms"] for r in a["replays"]}
    assert ids == {r["id"] for r in list_sessions(store) if r["source"] == "replay"}


def test_the_recommendation_is_reproduced_by_its_command(swept, capsys):
    store = swept["store"]
    if sweep.last_sweep(store) is None:  # this test also runs alone
        assert main(["compare", "--store", str(store), "--policies", POLICIES, "--budget", BUDGETS, "--gated", "on",
                     "--session", *swept["names"]]) == 0
        capsys.readouterr()
    code, rec = run_json(capsys, ["recommend", "--store", str(store), "--min-retention", "0.95", "--gated", "on"])
    assert code == 0, rec
    arm = rec["arm"]
    assert arm["retention_low"] >= 0.95 and arm["gated"] is True
    assert sorted(s["name"] for s in rec["sessions"]) == sorted(swept["names"])
    cheaper = [a for a in sweep.last_sweep(store)["arms"] if a["cost_per_session"] < arm["cost_per_session"]]
    assert all(a["retention_low"] < 0.95 for a in cheaper)  # nothing cheaper qualified
    # run the printed command as a user would, in a new process
    argv = shlex.split(rec["command"])
    assert argv[:2] == ["prunegate", "compare"]
    proc = run_prunegate(*argv[1:], "--json", timeout=600)
    assert proc.returncode == 0, proc.stderr
    [again] = json.loads(proc.stdout)["arms"]
    for key in ("arm", "policy", "params", "gated", "budget", "sessions", "references", "retained", "retention",
                "retention_low", "retention_high", "cost_per_session", "cost_low", "cost_high", "tokens_sent",
                "invalid_requests", "lost_references"):
        assert again[key] == arm[key] if key != "arm" else again["policy"] == arm["policy"], key
    # and the reproduction is now the store's last sweep: recommending again names the same arm
    code, rec2 = run_json(capsys, ["recommend", "--store", str(store), "--min-retention", "0.95"])
    assert code == 0 and rec2["arm"]["retention"] == arm["retention"] and rec2["command"] == rec["command"]


def test_recommend_says_when_nothing_qualifies_or_no_sweep_exists(tmp_path, capsys):
    assert main(["recommend", "--store", str(tmp_path), "--min-retention", "0.9"]) == 2
    assert "no sweep stored" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["recommend", "--store", str(tmp_path), "--min-retention", "1.5"])
    assert exc.value.code == 2 and "between 0 and 1" in capsys.readouterr().err


def test_recommend_can_run_the_sweep_itself(swept, capsys):
    store, names = swept["store"], swept["names"][:3]
    code, rec = run_json(capsys, ["recommend", "--store", str(store), "--min-retention", "0.9", "--gated", "on",
                                  "--policies", "recency", "--budget", "1500,6000", "--session", *names])
    assert code == 0
    assert rec["arm"]["policy"] == "recency" and rec["arm"]["gated"] is True
    assert sorted(s["name"] for s in rec["sessions"]) == sorted(names)
    stored = sweep.last_sweep(store)  # the sweep it ran is stored, and is the one it chose from
    assert stored["id"] == rec["sweep"] and [a["budget"] for a in stored["arms"]] == [1500, 6000]


def test_a_sweep_builds_each_session_event_stream_once(monkeypatch):
    from tracer.lab import compare as compare_mod
    from tracer.traffic import Conversation, read_paths

    convs = [c for c in read_paths([shipped_sessions_dir()]) if isinstance(c, Conversation)][:5]
    built: list[str] = []
    real = compare_mod.events_for

    def counting(conv, spec):
        built.append(conv.name)
        return real(conv, spec)

    monkeypatch.setattr(compare_mod, "events_for", counting)
    specs = arms(parse_policies("recency,salience,mask"), "both", [1500, 6000])
    results = compare_mod.run_replays(convs, specs)
    assert len(specs) == 12 and all(r is not None for rs in results for r in rs)
    assert sorted(built) == sorted(c.name for c in convs)  # once per session, not once per arm


def test_a_bad_price_file_is_one_line_and_exit_2(tmp_path, capsys):
    bad = tmp_path / "prices.json"
    bad.write_text('{"models": {"gpt-4o": {"input": -1, "output": 10}}}')
    assert main(["compare", "--store", str(tmp_path), "--policies", "recency", "--prices", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"prunegate compare: price file {bad}: model 'gpt-4o': prices cannot be negative"]
