"""PruneGuard: full-history bodies in, gated bodies out, every request traced."""

from __future__ import annotations

import copy

import anthropic.types as at
import pytest
from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.trace import StatusCode

from policies import ApproxTokenCounter, HardCeilingExceeded, validate
from tests.invariants import Scripted
from tests.metered import FILLER, turn
from tests.metered import body as anthropic_body
from tracer.guard import PruneGuard, assistant_message, tool_calls, tool_results_message


def test_within_budget_the_body_comes_back_unchanged(rec):
    pg = PruneGuard(Scripted(), budget=100_000, tracer_provider=rec.provider)
    history = turn(0, tool=True) + [{"role": "user", "content": "and now?"}]
    body = anthropic_body(copy.deepcopy(history))
    assert pg.gate(body) == body
    pg.close()
    chat = rec.one("chat claude-x")
    a = chat.attributes
    assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.provider.name"] == "anthropic"
    assert a["gen_ai.request.model"] == "claude-x" and a["gen_ai.conversation.id"] == pg.session_id
    assert a["prunegate.request.valid"] is True and len(a["prunegate.request.message_ids"]) == 6
    assert a["prunegate.decision"] == "within_budget"
    assert rec.one("prunegate.session").attributes["prunegate.session.source"] == "live"


def test_only_the_new_suffix_is_appended_and_pruned_messages_stay_pruned(rec):
    pg = PruneGuard("recency", budget=250, tracer_provider=rec.provider, policy_params={"target": 0.6}, detail="full",
                    token_counter=ApproxTokenCounter(), count_request=False)  # the sizes this test was laid out in
    history: list[dict] = []
    sent: list[list[str]] = []  # what each request carried, as strings
    offered: list[list[str]] = []  # what the agent offered for it
    for i in range(8):
        history += [{"role": "user", "content": f"question {i} " + "x" * 40},
                    *([{"role": "assistant", "content": [{"type": "tool_use", "id": f"c{i}", "name": "lookup",
                                                          "input": {"q": i}}]},
                       {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"c{i}",
                                                     "content": "y" * 60}]}] if i % 2 else []),
                    {"role": "assistant", "content": f"answer {i} " + "z" * 40}]
        out = pg.gate(anthropic_body(history + [{"role": "user", "content": f"go on {i}"}]))
        pg.record_response({"content": [{"type": "text", "text": "ok"}], "usage": {}})
        assert validate(out, "anthropic") == []
        sent.append([str(m) for m in out["messages"]])
        offered.append([str(m) for m in history])
        history.append({"role": "user", "content": f"go on {i}"})
    assert pg.stats()["requests"] == 8 and pg.errors == 0
    pg.close()
    assert sent[0] == offered[0] + [str({"role": "user", "content": "go on 0"})]
    assert any(len(s) < len(o) for s, o in zip(sent, offered, strict=True)), "the budget forced prunes"
    assert all(s[0] == offered[0][0] for s in sent), "the first user message is pinned"
    for j in range(len(sent)):
        pruned = set(offered[j]) - set(sent[j])
        for k in range(j + 1, len(sent)):
            assert not pruned & set(sent[k]), f"a message pruned by request {j} came back in request {k}"
    assert len(rec.named("prunegate.session")) == 1
    prunes = rec.named("prunegate.prune")
    assert prunes and all(p.attributes["prunegate.gated"] for p in prunes)
    appended = [s for s in rec.named("prunegate.message") if s.attributes["prunegate.event"] == "append"]
    assert len(appended) == 1 + len(history), "each history message (and the system prompt) appended once"


def test_a_rewritten_history_starts_a_new_session(rec):
    pg = PruneGuard(Scripted(), budget=100_000, tracer_provider=rec.provider)
    pg.gate(anthropic_body(turn(0)))
    first = pg.session_id
    out = pg.gate(anthropic_body(turn(1)))  # not an extension of what the guard has seen
    assert pg.session_id != first
    assert out["messages"] == turn(1)
    pg.close()
    roots = rec.named("prunegate.session")
    assert len(roots) == 2
    old = next(r for r in roots if r.attributes["prunegate.session.id"] == first)
    assert old.attributes["prunegate.session.diverged_at"] == 1  # the system prompt still matched
    new = next(r for r in roots if r.attributes["prunegate.session.id"] != first)
    assert new.attributes["prunegate.session.previous"] == first


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_changed_system_prompt_is_rewritten_in_place(rec, provider):
    pg = PruneGuard(Scripted(), budget=100_000, provider=provider, tracer_provider=rec.provider, detail="full")
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]

    def body(date: str, messages: list[dict]) -> dict:
        if provider == "anthropic":
            return {"model": "m", "max_tokens": 5, "system": f"today is {date}", "messages": messages}
        return {"model": "m", "messages": [{"role": "system", "content": f"today is {date}"}, *messages]}

    pg.gate(body("monday", history))
    first = pg.session_id
    history.append({"role": "user", "content": "and now?"})
    out = pg.gate(body("tuesday", history))
    assert pg.session_id == first and out == body("tuesday", history)
    pg.close()
    rewrites = [s for s in rec.named("prunegate.message") if s.attributes["prunegate.event"] == "rewrite"]
    assert len(rewrites) == 1 and rewrites[0].attributes["prunegate.message.cause"] == "system prompt changed"
    assert rewrites[0].attributes["prunegate.message.role"] == "system"


def test_a_body_the_guard_cannot_read_passes_through_unchanged(rec, caplog):
    pg = PruneGuard(Scripted(), budget=100, tracer_provider=rec.provider)
    bad = {"model": "m", "messages": [{"role": "user", "content": [{"type": "tool_use", "name": "x"}]}]}
    assert pg.gate(bad) is bad
    assert pg.errors == 1 and "missing its 'id'" in pg.last_error
    assert "passing the request through unchanged" in caplog.text
    assert pg.gate({"messages": "nope"}) == {"messages": "nope"}
    assert pg.errors == 2
    assert caplog.text.count("passing the request through unchanged") == 2, "a WARNING for each one"
    pg.close()
    spans = rec.named("prunegate.passthrough")
    assert [s.attributes["prunegate.guard.where"] for s in spans] == ["gate", "gate"]
    assert "missing its 'id'" in spans[0].attributes["prunegate.guard.error"]
    assert all(s.status.status_code == StatusCode.ERROR for s in spans)
    assert {s.attributes["prunegate.session.id"] for s in spans} == {pg.session_id}
    assert rec.one("prunegate.session").attributes["prunegate.guard.errors"] == 2


def test_sdk_objects_in_the_history_are_accepted(rec):
    pg = PruneGuard(Scripted(), budget=100_000, tracer_provider=rec.provider)
    blocks = [at.TextBlock(type="text", text="calling"), at.ToolUseBlock(type="tool_use", id="t1", name="lookup",
                                                                          input={"q": 1})]
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": blocks},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "r"}]}]
    out = pg.gate({"model": "m", "max_tokens": 5, "messages": history})
    assert out["messages"][1]["content"][1] == {"type": "tool_use", "id": "t1", "name": "lookup", "input": {"q": 1}}
    assert pg.errors == 0 and validate(out, "anthropic") == []


def test_openai_bodies_round_trip_and_responses_are_recorded(rec):
    pg = PruneGuard(Scripted(), budget=100_000, provider="openai", tracer_provider=rec.provider,
                    capture_content=True)
    history = [{"role": "system", "content": "sys"}, {"role": "user", "content": "capital of England?"}]
    body = {"model": "gpt-4o-mini", "tools": [], "messages": history}
    assert pg.gate(body) == body
    response = {"id": "chatcmpl-1", "model": "gpt-4o-mini-2024", "usage": {"prompt_tokens": 104, "completion_tokens": 16},
                "choices": [{"finish_reason": "tool_calls", "message": {"role": "assistant", "content": None,
                             "tool_calls": [{"id": "call_1", "type": "function",
                                             "function": {"name": "get_capital", "arguments": "{\"country\":\"England\"}"}}]}}]}
    pg.record_response(response)
    assert tool_calls(response, "openai")[0].arguments == {"country": "England"}
    history.append(assistant_message(response, "openai"))
    with pg.tool("get_capital", "call_1", arguments={"country": "England"}) as t:
        t.result("London")
    history += tool_results_message([("call_1", "London")], "openai")
    out = pg.gate({**body, "messages": history})
    assert out["messages"] == history
    pg.close()
    chats = rec.named("chat gpt-4o-mini")
    a = chats[0].attributes
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (104, 16)
    assert a["gen_ai.response.id"] == "chatcmpl-1" and list(a["gen_ai.response.finish_reasons"]) == ["tool_calls"]
    assert list(a["prunegate.response.call_ids"]) == ["call_1"]
    assert '"get_capital"' in a["gen_ai.output.messages"] and '"capital of England?"' in a["gen_ai.input.messages"]
    tool = rec.one("execute_tool get_capital").attributes
    assert tool["gen_ai.tool.call.id"] == "call_1" and tool["gen_ai.tool.call.result"] == "London"
    assert chats[1].end_time is not None, "close() ends a model call left open"


def test_the_naive_runtime_sends_an_invalid_body_that_is_traced_as_such(rec):
    pg = PruneGuard(Scripted("m4", name="salience"), budget=50, gated=False, tracer_provider=rec.provider)
    history = turn(0) + turn(1, tool=True) + [{"role": "user", "content": "so?"}]
    out = pg.gate(anthropic_body(history))
    assert [v.code for v in pg.last_violations] == ["orphan_tool_result"]
    error = {"type": "error", "error": {"type": "invalid_request_error", "message": pg.last_violations[0].message}}
    pg.record_response(error=error)
    pg.close()
    assert validate(out, "anthropic")
    chat = rec.one("chat claude-x")
    assert chat.status.status_code == StatusCode.ERROR
    assert "unexpected `tool_use_id`" in chat.status.description
    assert chat.attributes["prunegate.request.valid"] is False
    assert chat.attributes["error.type"] == "invalid_request_error"
    prune = rec.one("prunegate.prune")
    assert prune.attributes["prunegate.gated"] is False and "m4" in prune.attributes["prunegate.pruned.ids"]
    violation = rec.one("prunegate.violation")
    assert violation.links[0].context.span_id == prune.context.span_id
    assert list(violation.attributes["prunegate.violation.message_ids"]) == ["m5"]  # the orphaned result
    assert violation.attributes["prunegate.violation.evicted_id"] == "m4"


def test_the_gate_never_sends_that_invalid_body(rec):
    pg = PruneGuard(Scripted("m4", name="salience"), budget=50, tracer_provider=rec.provider)
    out = pg.gate(anthropic_body(turn(0) + turn(1, tool=True) + [{"role": "user", "content": "so?"}]))
    assert validate(out, "anthropic") == [] and pg.last_violations == []
    assert rec.named("prunegate.violation") == []
    assert list(rec.one("prunegate.prune").attributes["prunegate.grown.units"])


def test_a_hard_ceiling_that_cannot_hold_is_loud(rec):
    pg = PruneGuard(Scripted(), budget=50, hard_ceiling=60, tracer_provider=rec.provider)
    with pytest.raises(HardCeilingExceeded):
        pg.gate(anthropic_body([{"role": "user", "content": FILLER}]))
    assert rec.one("prunegate.fail").status.status_code == StatusCode.ERROR


class Exploding(SpanProcessor):
    def on_end(self, span) -> None:
        raise OSError("exporter down")


def test_a_broken_tracing_pipeline_never_reaches_the_agent(rec):
    rec.provider.add_span_processor(Exploding())
    pg = PruneGuard("recency", budget=300, tracer_provider=rec.provider)
    history = turn(0, tool=True) + turn(1, tool=True) + [{"role": "user", "content": "so?"}]
    out = pg.gate(anthropic_body(history))
    pg.record_response({"content": [], "usage": {}})
    with pg.tool("lookup", "x"):
        pass
    assert validate(out, "anthropic") == [] and len(out["messages"]) < len(history)
    assert pg.errors == 0 and pg.session.tracer_errors > 0
    assert pg.stats()["tracer_errors"] == pg.session.tracer_errors


def test_tool_side_effects_can_be_named(rec):
    pg = PruneGuard(Scripted(), budget=1000, tracer_provider=rec.provider, side_effects={"book"})
    with pg.tool("book", "a"):
        pass
    with pg.tool("lookup", "b"):
        pass
    flags = {s.name: s.attributes["prunegate.tool.side_effect"] for s in rec.spans if s.name.startswith("execute_tool")}
    assert flags == {"execute_tool book": True, "execute_tool lookup": False}


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="provider must be one of"):
        PruneGuard(Scripted(), budget=10, provider="gemini")


def test_end_to_end_into_a_real_store(tmp_path):
    from tracer.store import Store

    store_dir = tmp_path / "store"
    with PruneGuard(Scripted("m4", name="salience"), budget=50, gated=False, store=store_dir) as pg:
        pg.gate(anthropic_body(turn(0) + turn(1, tool=True) + [{"role": "user", "content": "so?"}]))
        pg.record_response(error={"type": "error", "error": {"type": "invalid_request_error", "message": "400!"}})
    spans = Store(store_dir).spans(pg.session_id)
    names = [s["name"] for s in spans]
    held = [e for s in spans for e in (s["events"] or []) if e["name"] == "prunegate.message"]
    assert names[0] == "prunegate.session" and "prunegate.message" not in names and len(held) >= 9  # detail=checks
    violation = next(s for s in spans if s["name"] == "prunegate.violation")
    prune = next(s for s in spans if s["name"] == "prunegate.prune")
    assert violation["links"][0]["span_id"] == prune["span_id"]
    chat = next(s for s in spans if s["name"] == "chat claude-x")
    assert chat["status_code"] == "ERROR" and chat["status_message"] == "400!"
    assert [s["seq"] for s in spans] == sorted(s["seq"] for s in spans)
