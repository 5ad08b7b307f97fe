"""Replay: the source document's failures reproduced ungated and prevented gated, on real traffic too."""

from __future__ import annotations

import json

import pytest

import policies
from policies import Eviction, Proposal
from tests.scenarios import BATCH
from tracer.cli import main
from tracer.lab import ReplaySpec, replay_session, run_replays
from tracer.store import Store
from tracer.traffic import Conversation, conversation_from_body, import_paths, load_conversations

BUILTINS = ("head_tail", "langchain_trim", "mask", "recency", "salience", "similarity", "summarize", "tiered")


class EvictCalls:
    """A structure-blind policy: evicts every assistant message that issued tool calls."""

    name = "test-evict-calls"

    def propose(self, view):
        p = Proposal(policy=self.name)
        for m in view.messages():
            if m.role == "assistant" and m.call_ids:
                p.evictions.append(Eviction((m.id,), reason="calls are noise"))
        return p


class EvictOpen:
    """Evicts whatever is still streaming: the source document's second failure."""

    name = "test-evict-open"

    def propose(self, view):
        p = Proposal(policy=self.name)
        for u in view.units():
            for mid in u.message_ids:
                if not view.message(mid).closed:
                    p.evictions.append(Eviction((mid,), reason="short and incomplete"))
        return p


@pytest.fixture(autouse=True)
def registered_test_policies(monkeypatch):
    """The two structure-blind policies above, registered for this module's tests only."""
    from policies import registry

    monkeypatch.setitem(registry._registered, EvictCalls.name, EvictCalls)
    monkeypatch.setitem(registry._registered, EvictOpen.name, EvictOpen)


@pytest.fixture(scope="module")
def tau(tau_sessions: list[Conversation]) -> list[Conversation]:
    return tau_sessions[:: max(1, len(tau_sessions) // 25)][:25]  # 25 conversations spread over the tasks (or all)


def batch() -> Conversation:
    return conversation_from_body(BATCH, "anthropic", name="batch", file="test")


# ------------------------------------------------------------------------------ the source document
def test_ungated_eviction_mid_batch_orphans_results_and_the_retry_duplicates_the_booking():
    r = replay_session(batch(), ReplaySpec(EvictCalls.name, gated=False, budget=40))
    assert r.invalid_requests == 1 and r.model_calls == 2
    assert r.orphan_results == 3  # all three results answer a turn that is gone
    assert r.duplicated_side_effects == 1  # the retry re-ran book_flight (get_weather/search_hotels are harmless)
    assert r.failures == 0  # nothing raised at the point of pruning


def test_the_gate_defers_mid_batch_and_prunes_the_whole_unit_later():
    r = replay_session(batch(), ReplaySpec(EvictCalls.name, gated=True, budget=40))
    assert (r.invalid_requests, r.orphan_results, r.dangling_calls, r.duplicated_side_effects) == (0, 0, 0, 0)
    assert r.deferrals >= 3  # every check while a call was pending


def test_an_evicted_stream_loses_its_head_ungated_and_is_protected_gated():
    ungated = replay_session(batch(), ReplaySpec(EvictOpen.name, gated=False, budget=40, stream_results=4))
    assert ungated.lost_stream_heads >= 1 and ungated.failures == 0
    gated = replay_session(batch(), ReplaySpec(EvictOpen.name, gated=True, budget=40, stream_results=4))
    assert gated.lost_stream_heads == 0 and gated.invalid_requests == 0 and gated.failures == 0


def test_a_hard_ceiling_failure_ends_that_session_and_the_next_one_replays():
    big, small = batch(), conversation_from_body({"messages": [{"role": "user", "content": "hi"}]}, "anthropic",
                                                 name="small", file="test")
    [results] = run_replays([big, small], [ReplaySpec("recency", gated=True, budget=20, hard_ceiling=30)])
    assert results[0].failures == 1 and "hard ceiling" in results[0].error
    assert results[0].model_calls < 2  # stopped there
    assert (results[1].failures, results[1].model_calls, results[1].error) == (0, 1, None)


def test_retention_is_complete_without_pruning_and_drops_when_the_quoted_result_is_evicted():
    full = replay_session(batch(), ReplaySpec("recency", budget=100_000))
    assert full.references == 4 and full.retention == 1.0  # t1 uses "Lisbon" from t0; t4 quotes three messages
    cut = replay_session(batch(), ReplaySpec(EvictCalls.name, gated=False, budget=40))
    assert cut.retention == 1.0  # only the calls went; the quoted results stayed (as orphans)
    gated = replay_session(batch(), ReplaySpec("recency", gated=True, budget=60))
    assert gated.prunes == 1 and gated.references == 4 and gated.retention == 0.5  # the batch unit went whole


def test_replay_is_deterministic_for_a_seed(tau_sessions):
    spec = ReplaySpec("salience", gated=False, budget=3000, seed=7, stream_results=2)
    c = tau_sessions[3]
    assert replay_session(c, spec).comparable_dict() == replay_session(c, spec).comparable_dict()


# ------------------------------------------------------------------------------ real traffic
@pytest.mark.parametrize("policy", BUILTINS)
def test_gated_replays_of_real_traffic_never_send_an_invalid_request(tau, policy):
    assert policy in policies.available()
    [results] = run_replays(tau, [ReplaySpec(policy, gated=True, budget=3000, stream_results=2, seed=1)])
    assert sum(r.prunes for r in results) > 0  # the budget forces pruning
    assert [r.error for r in results if r.error] == []
    assert sum(r.invalid_requests + r.orphan_results + r.dangling_calls + r.duplicated_side_effects
               for r in results) == 0


def test_ungated_salience_reproduces_orphaned_results_on_real_traffic(tau):
    [results] = run_replays(tau, [ReplaySpec("salience", gated=False, budget=3000)])
    assert sum(r.orphan_results for r in results) > 0
    assert sum(r.invalid_requests for r in results) > 0
    assert sum(r.duplicated_side_effects for r in results) > 0


# ------------------------------------------------------------------------------ recorded as traces
def test_replay_command_records_each_replay_as_a_new_session(tmp_path, capsys):
    src = tmp_path / "batch.json"
    src.write_text(json.dumps(BATCH))
    store = tmp_path / "s"
    [source_id] = import_paths([src], store).session_ids
    code = main(["replay", "--policy", "recency", "--param", "target=0.5", "--budget", "60", "--hard-ceiling", "400",
                 "--store", str(store), "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["totals"]["sessions"] == 1 and out["totals"]["invalid_requests"] == 0
    replay_id = out["sessions"][0]["replay_id"]
    [root] = Store(store).query("SELECT attributes FROM spans WHERE name = 'prunegate.session' AND session_id = ?",
                                [replay_id])
    attrs = json.loads(root["attributes"])
    assert attrs["prunegate.session.source"] == "replay"
    assert attrs["prunegate.session.source_id"] == source_id
    assert attrs["prunegate.policy"] == "recency"
    assert json.loads(attrs["prunegate.policy.params"]) == {"target": 0.5}
    assert (attrs["prunegate.gated"], attrs["prunegate.budget"], attrs["prunegate.hard_ceiling"]) == (True, 60, 400)
    names = {r["name"] for r in Store(store).query("SELECT DISTINCT name FROM spans WHERE session_id = ?", [replay_id])}
    assert {"prunegate.message", "prunegate.budget_check", "prunegate.prune", "chat", "execute_tool book_flight"} <= names
    # replays are not replayed again by default: the store still offers one source session
    assert [c.session_id for c in load_conversations(store)] == [source_id]


def test_ungated_replay_traces_orphans_as_violations_linked_to_the_prune(tmp_path, capsys):
    src = tmp_path / "batch.json"
    src.write_text(json.dumps(BATCH))
    store = tmp_path / "s"
    import_paths([src], store)
    assert main(["replay", "--policy", EvictCalls.name, "--ungated", "--budget", "40", "--store", str(store),
                 "--json"]) == 0
    replay_id = json.loads(capsys.readouterr().out)["sessions"][0]["replay_id"]
    rows = Store(store).query(
        "SELECT attributes->>'prunegate.violation.code' AS code, links FROM spans "
        "WHERE session_id = ? AND name = 'prunegate.violation' ORDER BY seq", [replay_id])
    codes = [r["code"] for r in rows]
    assert "orphan_tool_result" in codes and "duplicated_side_effect" in codes
    orphan = next(r for r in rows if r["code"] == "orphan_tool_result")
    [link] = json.loads(orphan["links"])
    [prune] = Store(store).query("SELECT span_id FROM spans WHERE session_id = ? AND name = 'prunegate.prune' "
                                 "ORDER BY seq LIMIT 1", [replay_id])
    assert link["span_id"] == prune["span_id"]


def test_replay_refuses_unknown_policies_and_sessions(tmp_path, capsys):
    store = tmp_path / "s"
    src = tmp_path / "batch.json"
    src.write_text(json.dumps(BATCH))
    import_paths([src], store)
    assert main(["replay", "--policy", "nope", "--store", str(store)]) == 2
    assert "unknown policy 'nope'" in capsys.readouterr().err
    assert main(["replay", "--policy", "recency", "--session", "missing", "--store", str(store)]) == 2
    assert "no session 'missing'" in capsys.readouterr().err
    assert main(["replay", "--policy", "recency", "--store", str(tmp_path / "nothing")]) == 2
    assert "no store" in capsys.readouterr().err


# ------------------------------------------------------------------------------ timing and tree
def _replay_rows(tmp_path, capsys, *args: str) -> tuple[str, list[dict]]:
    tmp_path.mkdir(exist_ok=True)
    src = tmp_path / "batch.json"
    src.write_text(json.dumps(BATCH))
    store = tmp_path / "s"
    import_paths([src], store)
    main(["replay", *args, "--store", str(store), "--json"])
    replay_id = json.loads(capsys.readouterr().out)["sessions"][0]["replay_id"]
    rows = Store(store).query(
        "SELECT span_id, parent_span_id, name, seq, start_time_ns, end_time_ns, status_code FROM spans "
        "WHERE session_id = ? ORDER BY seq, start_time_ns", [replay_id])
    return replay_id, rows


def test_replayed_checks_take_the_gates_time_under_the_chat_span_of_the_request_they_gated(tmp_path, capsys):
    _, rows = _replay_rows(tmp_path, capsys, "--policy", "recency", "--param", "target=0.5", "--budget", "60")
    by_id = {r["span_id"]: r for r in rows}
    [root] = [r for r in rows if r["parent_span_id"] is None]
    chats = [r for r in rows if r["name"].startswith("chat")]
    checks = [r for r in rows if r["name"] == "prunegate.budget_check"]
    assert len(chats) == 2 and checks
    for c in chats:
        assert c["parent_span_id"] == root["span_id"] and c["end_time_ns"] > c["start_time_ns"]
    # every check before the last model call hangs under a chat span, inside its time, and lasts
    for chk in checks:
        parent = by_id[chk["parent_span_id"]]
        if parent["span_id"] != root["span_id"]:
            assert parent["name"].startswith("chat")
            assert parent["start_time_ns"] <= chk["start_time_ns"] < chk["end_time_ns"] <= parent["end_time_ns"]
    under_chat = [c for c in checks if by_id[c["parent_span_id"]]["name"].startswith("chat")]
    assert len(under_chat) >= len(checks) - 2
    assert min(c["end_time_ns"] - c["start_time_ns"] for c in under_chat) >= 1_000  # ≥ 1 µs: the gate ran
    prunes = [r for r in rows if r["name"] == "prunegate.prune"]
    assert prunes and all(by_id[p["parent_span_id"]]["name"] == "prunegate.budget_check" for p in prunes)
    assert all(p["end_time_ns"] - p["start_time_ns"] >= 1_000 for p in prunes)
    # each chat span ends when its request is sent: before the next request's checks begin
    first, second = sorted(chats, key=lambda r: r["start_time_ns"])
    assert first["end_time_ns"] <= second["start_time_ns"]


def test_replayed_violations_and_a_hard_ceiling_failure_are_errors_under_the_chat_span(tmp_path, capsys):
    _, rows = _replay_rows(tmp_path, capsys, "--policy", EvictCalls.name, "--ungated", "--budget", "40")
    by_id = {r["span_id"]: r for r in rows}
    orphans = [r for r in rows if r["name"] == "prunegate.violation"]
    assert orphans and all(r["status_code"] == "ERROR" for r in orphans)
    invalid = [by_id[r["parent_span_id"]] for r in orphans if by_id[r["parent_span_id"]]["name"].startswith("chat")]
    assert invalid and all(c["status_code"] == "ERROR" for c in invalid)  # the request the violation broke

    _, rows = _replay_rows(tmp_path / "h", capsys, "--policy", "recency", "--budget", "20", "--hard-ceiling", "30")
    by_id = {r["span_id"]: r for r in rows}
    [root] = [r for r in rows if r["parent_span_id"] is None]
    assert root["status_code"] == "ERROR"
    [fail] = [r for r in rows if r["name"] == "prunegate.fail"]
    assert fail["status_code"] == "ERROR"
    chat = by_id[by_id[fail["parent_span_id"]]["parent_span_id"]]
    # the request it stopped never went out: not a model call, an error
    assert chat["name"] == "prunegate.unsent_request" and chat["status_code"] == "ERROR"
