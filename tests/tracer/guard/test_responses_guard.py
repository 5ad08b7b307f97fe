"""PruneGuard.gate on OpenAI Responses API bodies: gated as items, every other key left alone."""

from __future__ import annotations

import copy

from policies import ApproxTokenCounter, validate
from tests.invariants import Scripted
from tests.policies.responses_items import answer, call, compaction, output, reasoning, user, web_search
from tracer.guard import PruneGuard

REST = {"model": "gpt-5", "instructions": "Plan trips.", "tools": [{"type": "function", "name": "lookup"}],
        "previous_response_id": None, "store": False, "include": ["reasoning.encrypted_content"],
        "context_management": [{"type": "compaction", "compact_threshold": 200000}]}


def turn(i: int) -> list[dict]:
    """The response run a question got (reasoning, two parallel calls, their outputs, a second
    reasoning with a server-side search and the answer), then the next question."""
    return [reasoning(f"rs_{i}a", "two lookups"),
            call(f"c{i}a", city="Lisbon"), call(f"c{i}b", city="Porto"),
            output(f"c{i}b", "rain " * 30), output(f"c{i}a", "sun " * 30),
            reasoning(f"rs_{i}b"), web_search(f"ws_{i}"), answer(f"msg_{i}", "Sun in Lisbon. " * 5),
            user(f"question {i + 1} " + "words " * 20)]


def test_within_budget_a_responses_body_comes_back_unchanged(rec):
    pg = PruneGuard(Scripted(), budget=100_000, provider="openai", tracer_provider=rec.provider)
    body = {**copy.deepcopy(REST), "input": [compaction("cmp_0"), user("q"), *turn(0)]}
    original = copy.deepcopy(body)
    assert pg.gate(body) == original
    pg.close()
    a = rec.one("chat gpt-5").attributes
    assert a["prunegate.request.valid"] is True and a["gen_ai.conversation.compacted"] is False
    assert pg.errors == 0


def test_a_small_budget_prunes_whole_responses_and_keeps_the_compaction(tmp_path):
    from tracer.store import Store

    store_dir = tmp_path / "store"
    history: list[dict] = [compaction("cmp_0"), user("question 0")]
    sent: list[dict] = []
    with PruneGuard("salience", budget=700, provider="openai", store=store_dir, token_counter=ApproxTokenCounter(),
                    count_request=False) as pg:
        for i in range(6):
            history += turn(i)
            body = {**copy.deepcopy(REST), "input": copy.deepcopy(history)}
            out = pg.gate(body)
            sent.append(out)
            assert {k: v for k, v in out.items() if k != "input"} == REST  # every other key as it came
            assert validate(out, "responses") == [], i
            assert out["input"][0] == compaction("cmp_0")  # pinned: the only summary of what came before
        assert pg.errors == 0
    assert len(sent[-1]["input"]) < len(history)  # it did prune
    spans = Store(store_dir).spans(pg.session_id)
    chats = [s for s in spans if s["name"] == "chat gpt-5"]
    assert len(chats) == 6 and all(s["attributes"]["prunegate.request.valid"] for s in chats)
    assert any(s["attributes"]["gen_ai.conversation.compacted"] for s in chats)
    assert not [s for s in spans if s["name"] == "prunegate.violation"]


def test_ungated_the_same_traffic_breaks_and_the_validator_says_so(rec):
    history: list[dict] = [user("question 0")]
    found = []
    pg = PruneGuard("salience", budget=700, provider="openai", gated=False, tracer_provider=rec.provider,
                    token_counter=ApproxTokenCounter(), count_request=False)
    for i in range(6):
        history += turn(i)
        out = pg.gate({**copy.deepcopy(REST), "input": copy.deepcopy(history)})
        found += validate(out, "responses")
    pg.close()
    assert found, "the naive runtime split a response and nothing noticed"
    assert {v.code for v in found} & {"reasoning_without_following_item", "orphan_tool_result",
                                      "missing_tool_result"}
    assert rec.named("prunegate.violation")


def test_a_responses_api_response_is_recorded_on_the_chat_span(rec):
    pg = PruneGuard(Scripted(), budget=100_000, provider="openai", tracer_provider=rec.provider)
    pg.gate({**copy.deepcopy(REST), "input": [user("weather?")]})
    pg.record_response({"id": "resp_1", "object": "response", "model": "gpt-5-2026", "status": "completed",
                        "output": [reasoning("rs_9"), call("c9", city="Lisbon"), call("c10", city="Porto")],
                        "usage": {"input_tokens": 812, "output_tokens": 64, "total_tokens": 876}})
    pg.close()
    a = rec.one("chat gpt-5").attributes
    assert (a["gen_ai.response.id"], a["gen_ai.response.model"]) == ("resp_1", "gpt-5-2026")
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (812, 64)
    assert list(a["prunegate.response.call_ids"]) == ["c9", "c10"]
    assert list(a["gen_ai.response.finish_reasons"]) == ["completed"]
