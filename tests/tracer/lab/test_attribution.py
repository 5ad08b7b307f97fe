"""Attribution: a lost reference is charged to the prune that evicted its source, in the replay's
results and on the spans in the store (hand-made conversations where both are known)."""

from __future__ import annotations

import json

import pytest

from policies import Eviction, Proposal
from tracer.lab import ReplaySpec, replay_session
from tracer.store import Store
from tracer.traffic import close_provider, conversation_from_body, store_tracer_provider


def call(cid: str, name: str) -> dict:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": cid, "type": "function", "function": {"name": name, "arguments": "{\"user\": \"mia\"}"}}]}


# t2 (lookup_reservation's result) holds ABC123, t6 (get_flight's result) holds HAT069; the last
# assistant message t9 quotes both: two references, sources t2 and t6.
BODY = {"messages": [
    {"role": "user", "content": "Find my booking please."},
    call("c1", "lookup_reservation"),
    {"role": "tool", "tool_call_id": "c1", "content": "reservation ABC123 for mia, two passengers, economy"},
    {"role": "assistant", "content": "I found your reservation."},
    {"role": "user", "content": "Which flight is it on?"},
    call("c2", "get_flight"),
    {"role": "tool", "tool_call_id": "c2", "content": "flight HAT069 departs from JFK in the morning"},
    {"role": "assistant", "content": "I have the flight."},
    {"role": "user", "content": "Tell me both, please."},
    {"role": "assistant", "content": "Reservation ABC123 is on flight HAT069."},
]}


class EvictIds:
    """Evicts the given message ids as soon as they are in the context and closed."""

    name = "test-evict-ids"

    def __init__(self, ids: list[str] = ()) -> None:  # type: ignore[assignment]  # an empty tuple default: never mutated
        self.ids = list(ids)

    def propose(self, view):
        p = Proposal(policy=self.name)
        here = {m.id for m in view.messages()}
        for mid in self.ids:
            if mid in here and view.message(mid).closed:
                p.evictions.append(Eviction((mid,), reason="test"))
        return p


@pytest.fixture(autouse=True)
def registered(monkeypatch):
    from policies import registry

    monkeypatch.setitem(registry._registered, EvictIds.name, EvictIds)


def conv(body=BODY):
    return conversation_from_body(body, "openai", name="hand-made", file="test")


def spec(ids, gated=True):
    return ReplaySpec(EvictIds.name, (("ids", ids),), gated=gated, budget=1)


def test_the_lost_reference_is_charged_to_the_prune_that_evicted_its_source():
    r = replay_session(conv(), spec(["t2", "t4"]))
    assert r.references == 2 and r.retained == 1  # HAT069 stayed, ABC123 went with t2
    [lost] = r.lost_references
    assert (lost.referrer, lost.source, lost.tokens, lost.tool) == ("t9", "t2", ("abc123",), "lookup_reservation")
    assert lost.prune_decision == "pruned" and lost.prune_check is not None
    assert lost.prune_seq is not None and lost.prune_seq < lost.step  # the prune came before the model call
    assert r.first_lost_step == lost.step
    # the row is in the replay's results as printed (prunegate replay --json)
    assert r.to_dict()["lost_references"][0]["source"] == "t2"


def test_two_prunes_each_charged_with_its_own_losses():
    r = replay_session(conv(), spec(["t2", "t6"]))
    assert r.references == 2 and r.retained == 0
    by_source = {x.source: x for x in r.lost_references}
    assert set(by_source) == {"t2", "t6"}
    assert by_source["t2"].tool == "lookup_reservation" and by_source["t6"].tool == "get_flight"
    assert by_source["t2"].prune_check != by_source["t6"].prune_check  # two separate prunes
    assert by_source["t2"].prune_seq < by_source["t6"].prune_seq


def test_nothing_is_lost_when_the_sources_stay():
    r = replay_session(conv(), spec(["t4"]))  # a user question goes; both quoted results stay
    assert r.prunes >= 1 and r.retention == 1.0 and r.lost_references == []


def test_ungated_losses_are_attributed_too():
    r = replay_session(conv(), spec(["t2"], gated=False))
    [lost] = r.lost_references
    assert lost.source == "t2" and lost.prune_decision == "pruned"


def _spans(store: Store, session_id: str) -> list[dict]:
    rows = store.query("SELECT name, span_id, seq, attributes FROM spans WHERE session_id = ? ORDER BY seq",
                       [session_id])
    return [{**row, "a": json.loads(row["attributes"])} for row in rows]


def test_the_prune_span_and_the_chat_span_carry_the_attribution_in_the_store(tmp_path):
    store = Store(tmp_path / "s")
    provider = store_tracer_provider(store)
    try:
        r = replay_session(conv(), spec(["t2", "t4"]), tracer_provider=provider)
    finally:
        close_provider(provider)
    spans = _spans(store, r.replay_id)
    prunes = [s for s in spans if s["name"] == "prunegate.prune"]
    assert len(prunes) == 2  # t2's unit, then t4
    charged = [p for p in prunes if p["a"]["prunegate.lost_references"] == 1]
    [clean] = [p for p in prunes if p["a"]["prunegate.lost_references"] == 0]
    [prune] = charged
    assert prune["a"]["prunegate.lost_references.referrers"] == ["t9"]
    assert prune["a"]["prunegate.lost_references.sources"] == ["t2"]
    assert "t2" in prune["a"]["prunegate.pruned.ids"] and "t4" in clean["a"]["prunegate.pruned.ids"]
    [lost] = r.lost_references
    assert lost.prune_span_id == prune["span_id"] and lost.prune_seq == prune["seq"]
    chats = [s for s in spans if s["a"].get("gen_ai.operation.name") == "chat"]
    last = [c for c in chats if c["a"].get("prunegate.references.lost")]
    [chat] = last
    assert chat["seq"] == lost.step
    assert chat["a"]["prunegate.references"] == 2
    assert chat["a"]["prunegate.references.lost_sources"] == ["t2"]
    assert chat["a"]["prunegate.references.lost_tools"] == ["lookup_reservation"]
    assert chat["a"]["prunegate.references.lost_prune_seqs"] == [str(prune["seq"])]
    assert chat["a"]["prunegate.references.lost_prune_span_ids"] == [prune["span_id"]]
    # the held prune spans end where they would have: inside the session, before the chat span
    [times] = store.query("SELECT (SELECT end_time_ns FROM spans WHERE span_id = $p) AS prune_end, "
                          "(SELECT start_time_ns FROM spans WHERE span_id = $c) AS chat_start",
                          {"p": prune["span_id"], "c": chat["span_id"]})
    assert times["prune_end"] < times["chat_start"]
