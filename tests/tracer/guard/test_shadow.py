"""Shadow mode: an agent's own trimmer observed, its violations linked, the gate's alternative recorded."""

from __future__ import annotations

import copy

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage, trim_messages

from policies import validate
from tracer.guard import ShadowGuard


def langchain_history() -> list:
    return [
        SystemMessage("You are a travel agent."),
        HumanMessage("Plan my trip to Lisbon " + "please " * 10),
        AIMessage("", tool_calls=[{"name": "get_weather", "args": {"city": "Lisbon"}, "id": "c1"},
                                  {"name": "search_hotels", "args": {"city": "Lisbon"}, "id": "c2"}]),
        ToolMessage("sunny " * 20, tool_call_id="c1"),
        ToolMessage("hotel " * 20, tool_call_id="c2"),
        AIMessage("Here is the plan " + "step " * 20),
        HumanMessage("book it"),
    ]


def last_five(messages: list) -> list:
    """LangChain's real trimmer, keeping the system prompt and the last messages."""
    return trim_messages(messages, max_tokens=5, strategy="last", token_counter=len, include_system=True)


def test_langchain_trim_messages_orphans_results_and_the_violations_link_to_it(rec):
    sg = ShadowGuard(tracer_provider=rec.provider, trimmer="trim_messages", budget=150)
    before = langchain_history()
    after = sg.wrap(last_five)(before)
    assert [type(m).__name__ for m in after] == ["SystemMessage", "ToolMessage", "ToolMessage", "AIMessage",
                                                 "HumanMessage"], "the trimmer's output is untouched"
    sg.close()
    root = rec.one("prunegate.session").attributes
    assert root["prunegate.session.source"] == "shadow" and root["prunegate.gated"] is False
    check = rec.one("prunegate.budget_check")
    assert check.attributes["prunegate.decision"] == "pruned" and check.attributes["prunegate.gated"] is False
    prune = rec.one("prunegate.prune")
    p = prune.attributes
    assert p["prunegate.gated"] is False and p["prunegate.policy"] == "trim_messages"
    assert list(p["prunegate.pruned.ids"]) == ["m1", "m2"]  # the first question and the call batch
    violations = rec.named("prunegate.violation")
    assert sorted(v.attributes["prunegate.violation.ids"][0] for v in violations) == ["c1", "c2"]
    for v in violations:
        assert v.attributes["prunegate.violation.code"] == "orphan_tool_result"
        assert [link.context.span_id for link in v.links] == [prune.context.span_id]
        assert v.attributes["prunegate.violation.evicted_id"] == "m2"
    # what the gate would have done with the same removal
    assert p["prunegate.shadow.verdict"].startswith("prune set splits unit")
    assert list(p["prunegate.shadow.split.units"]) == ["u2"]
    assert list(p["prunegate.shadow.grow.ids"]) == ["m2", "m3", "m4"] and p["prunegate.shadow.grow.valid"] is True
    assert list(p["prunegate.shadow.shrink.ids"]) == [] and p["prunegate.shadow.shrink.valid"] is True
    assert p["prunegate.shadow.grow.tokens_after"] < p["prunegate.tokens.before"]
    assert len(p["prunegate.shadow.skipped.units"]) == 1, "the first user message is pinned"


def test_the_report_says_the_same(rec):
    sg = ShadowGuard(tracer_provider=rec.provider, trimmer="trim_messages")
    before = langchain_history()
    report = sg.observe(before, last_five(before))
    assert report.error is None
    assert report.removed == ["m1", "m2"] and report.split_units == ["u2"]
    assert [v.code for v in report.violations] == ["orphan_tool_result"] * 2
    assert report.grown == ["m2", "m3", "m4"] and report.grown_valid
    assert report.tokens_after < report.tokens_before


def openai_history(n: int) -> list[dict]:
    out: list[dict] = [{"role": "system", "content": "sys"}]
    for i in range(n):
        out += [{"role": "user", "content": f"q{i}"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": f"c{i}", "content": f"r{i}"},
                {"role": "assistant", "content": f"a{i}"}]
    return out


def keep_system_and_tail(messages: list[dict], n: int = 4) -> list[dict]:
    """A home-made sliding window: the system prompt and the last n messages."""
    return [messages[0], *messages[-n:]]


@pytest.mark.parametrize("agent_keeps_full_history", [True, False])
def test_each_history_message_is_recorded_once_whether_or_not_the_agent_keeps_what_it_trimmed(
        rec, agent_keeps_full_history):
    sg = ShadowGuard(tracer_provider=rec.provider, trimmer="window", detail="full")
    full = openai_history(1)
    state = copy.deepcopy(full)
    for i in range(1, 4):
        new = openai_history(i + 1)[-4:]
        full += new
        state += copy.deepcopy(new)
        after = keep_system_and_tail(state, 2)
        report = sg.observe(state, after)
        assert report.error is None
        if not agent_keeps_full_history:
            state = after  # the agent trims its own history in place
    sg.close()
    appended = [s.attributes["prunegate.message.id"] for s in rec.named("prunegate.message")
                if s.attributes["prunegate.event"] == "append"]
    assert len(appended) == len(set(appended)) == len(full)
    # the window cuts a call from its result: every run leaves an orphan result behind
    assert len(rec.named("prunegate.violation")) == 3
    for v in rec.named("prunegate.violation"):
        cause = rec.by_id(v.links[0].context.span_id)
        assert cause.name == "prunegate.prune" and cause.attributes["prunegate.gated"] is False


def test_a_trimmer_that_keeps_everything_is_a_check_within_budget(rec):
    sg = ShadowGuard(tracer_provider=rec.provider)
    history = openai_history(2)
    report = sg.observe(history, list(history))
    sg.close()
    assert report.removed == [] and report.violations == []
    assert rec.one("prunegate.budget_check").attributes["prunegate.decision"] == "within_budget"
    assert rec.named("prunegate.prune") == [] and rec.named("prunegate.violation") == []


def test_inserted_messages_are_counted(rec):
    sg = ShadowGuard(tracer_provider=rec.provider)
    history = openai_history(2)
    summary = {"role": "system", "content": "summary of the first exchange"}
    after = [history[0], summary, *history[5:]]
    report = sg.observe(history, after)
    sg.close()
    assert report.inserted == 1 and report.removed == ["m1", "m2", "m3", "m4"]
    assert report.violations == [] and validate({"messages": after}, "openai") == []
    assert rec.one("prunegate.prune").attributes["prunegate.shadow.inserted"] == 1


def test_anthropic_bodies_are_validated_as_anthropic(rec):
    sg = ShadowGuard(tracer_provider=rec.provider, provider="anthropic")
    body = {"model": "m", "system": "sys", "messages": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "r"}]},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "next"}]}
    trimmed = {**body, "messages": [body["messages"][0], *body["messages"][2:]]}
    report = sg.observe(body, trimmed)
    assert [v.code for v in report.violations] == ["orphan_tool_result"]
    assert "tool_result" in report.violations[0].message
    assert report.removed == ["m2"]  # m0 is the system prompt


def test_observing_never_breaks_the_agent(rec, caplog):
    sg = ShadowGuard(tracer_provider=rec.provider)
    report = sg.observe({"messages": "not a list"}, [])
    assert report.error is not None and sg.errors == 1
    assert "observation failed" in caplog.text
    trim = sg.wrap(lambda m: m[:1])
    assert trim([{"role": "user", "content": "hi"}, 42]) == [{"role": "user", "content": "hi"}]
    assert sg.errors == 2
