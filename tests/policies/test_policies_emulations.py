"""The emulations of provider-side context editing: Anthropic's clear_tool_uses_20250919 and compaction's trigger."""

from __future__ import annotations

import pytest

from policies import Context, Gate, Message, PolicyError, get_policy, validate
from policies.builtin.clear_tool_uses import PLACEHOLDER, ClearToolUsesPolicy
from policies.builtin.compact import CompactPolicy
from policies.builtin.summarize import EXTRACTIVE_LABEL
from policies.decision import DecisionKind
from policies.messages import tool_result, tool_use
from policies.policy import ContextView
from tests.invariants import assert_consistent
from tests.policies.test_policies import agent_context, say, view


def cleared(ctx: Context, message_id: str) -> bool:
    return all(b.content == PLACEHOLDER for b in ctx.message(message_id).blocks if b.answers)


# --------------------------------------------------------------------------- clear_tool_uses
def test_clearing_replaces_all_but_the_last_tool_uses_results_keeping_ids():
    ctx = agent_context()
    p = get_policy("clear_tool_uses", keep=1).propose(view(ctx))
    assert [r.message_id for r in p.rewrites] == ["r1", "r2"]  # call_3 is the last tool use: kept whole
    new = p.rewrites[0].replacement
    assert new.answered_ids == ["call_1"] and new.blocks[0].content == PLACEHOLDER
    assert not p.evictions and not p.summaries
    d = Gate(get_policy("clear_tool_uses", keep=1), budget=int(ctx.tokens * 0.6)).check(ctx)
    assert d.kind == DecisionKind.PRUNED and sorted(d.rewritten_ids) == ["r1", "r2"]
    assert cleared(ctx, "r1") and cleared(ctx, "r2") and not cleared(ctx, "r3")
    assert ctx.message("c1").blocks[0].input == {"user_id": "mia_li_3668"}  # inputs stay by default
    assert_consistent(ctx)
    assert validate(ctx.to_openai(), "openai") == [] and validate(ctx.to_anthropic(), "anthropic") == []


def test_clearing_keeps_the_default_three_and_excluded_tools():
    ctx = agent_context()
    assert get_policy("clear_tool_uses").propose(view(ctx)).empty  # three tool uses, three kept
    p = get_policy("clear_tool_uses", keep=0, exclude_tools=["get_user_details"]).propose(view(ctx))
    assert [r.message_id for r in p.rewrites] == ["r2", "r3"]


def test_clear_tool_inputs_clears_the_calls_too_all_or_by_tool():
    ctx = agent_context()
    p = get_policy("clear_tool_uses", keep=0, clear_tool_inputs=True).propose(view(ctx))
    inputs = {r.message_id: r.replacement.blocks[0].input for r in p.rewrites if r.message_id.startswith("c")}
    assert inputs == {"c1": {}, "c2": {}, "c3": {}}
    p = get_policy("clear_tool_uses", keep=0, clear_tool_inputs=["get_user_details"]).propose(view(ctx))
    assert [r.message_id for r in p.rewrites if r.message_id.startswith("c")] == ["c1"]
    Gate(get_policy("clear_tool_uses", keep=0, clear_tool_inputs=True), budget=int(ctx.tokens * 0.6)).check(ctx)
    body = ctx.to_openai()
    assert validate(body, "openai") == []
    calls = [c for m in body["messages"] for c in m.get("tool_calls") or []]
    assert [c["function"]["arguments"] for c in calls] == ["{}", "{}", "{}"]


def test_clear_at_least_refuses_a_clearing_that_frees_too_little():
    ctx = agent_context()
    freed = sum(ctx.message(m).tokens for m in ("r1", "r2")) - 2 * ctx.counter.count(
        Message(id="", role="tool", blocks=[tool_result("x", PLACEHOLDER)]))
    p = get_policy("clear_tool_uses", keep=1, clear_at_least=freed + 50).propose(view(ctx))
    assert p.empty and "clear_at_least" in p.notes
    assert not get_policy("clear_tool_uses", keep=1, clear_at_least=freed - 50).propose(view(ctx)).empty


def test_the_trigger_in_tokens_or_tool_uses():
    ctx = agent_context()
    v = view(ctx)  # budget 60% of the context: the gate asks
    assert get_policy("clear_tool_uses", keep=1, trigger=ctx.tokens + 1).propose(v).empty
    assert not get_policy("clear_tool_uses", keep=1, trigger=ctx.tokens).propose(v).empty
    assert get_policy("clear_tool_uses", keep=1, trigger_tool_uses=4).propose(v).empty
    assert not get_policy("clear_tool_uses", keep=1, trigger_tool_uses=3).propose(v).empty


def test_an_anthropic_edit_becomes_the_policy():
    edit = {"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 30000},
            "keep": {"type": "tool_uses", "value": 5}, "clear_at_least": {"type": "input_tokens", "value": 5000},
            "exclude_tools": ["web_search"], "clear_tool_inputs": True}
    p = ClearToolUsesPolicy.from_edit(edit)
    assert (p.trigger, p.keep, p.clear_at_least, p.exclude_tools, p.clear_inputs) == \
        (30000, 5, 5000, frozenset({"web_search"}), True)
    assert ClearToolUsesPolicy.from_edit({"type": "clear_tool_uses_20250919",
                                          "trigger": {"type": "tool_uses", "value": 8}}).trigger_tool_uses == 8
    with pytest.raises(PolicyError, match="not a clear_tool_uses_20250919 edit"):
        ClearToolUsesPolicy.from_edit({"type": "clear_thinking_20251015"})


@pytest.mark.parametrize(("params", "message"), [
    ({"keep": -1}, "clear_tool_uses: keep must be >= 0"),
    ({"trigger": 0}, "clear_tool_uses: trigger must be >= 1"),
    ({"trigger": 10, "trigger_tool_uses": 3}, "not both"),
    ({"clear_tool_inputs": 3}, "clear_tool_uses: clear_tool_inputs must be a list of names"),
])
def test_bad_parameters_say_which_and_why(params, message):
    with pytest.raises(PolicyError, match=message):
        get_policy("clear_tool_uses", **params)


def test_a_pinned_unit_is_never_cleared():
    ctx = Context()
    ctx.append(say("sys", "system", "Be brief."))
    ctx.append(Message(id="c", role="assistant", blocks=[tool_use("t", "lookup", {"q": "x"})]))
    ctx.append(Message(id="r", role="user", blocks=[tool_result("t", "data " * 300)]))  # the live turn: pinned
    assert get_policy("clear_tool_uses", keep=0).propose(ContextView(ctx, budget=10)).empty


# --------------------------------------------------------------------------- compact
def test_compaction_summarizes_the_whole_closed_history_once_triggered():
    ctx = agent_context()
    v = view(ctx)
    assert get_policy("compact", trigger=ctx.tokens + 1).propose(v).empty
    p = get_policy("compact").propose(v)  # trigger: the gate's budget
    (summary,) = p.summaries
    units = [ctx.unit_of(m).id for m in ("c1", "r1", "c2", "r2", "c3", "r3", "a1")]
    assert list(summary.unit_ids) == list(dict.fromkeys(units))  # everything closed and unpinned, not just enough
    assert summary.message.plain_text().startswith(EXTRACTIVE_LABEL)
    # summarize, by contrast, stops once the budget's target is met
    assert len(get_policy("summarize").propose(v).summaries[0].unit_ids) < len(summary.unit_ids)
    d = Gate(get_policy("compact"), budget=int(ctx.tokens * 0.6)).check(ctx)
    assert d.kind == DecisionKind.PRUNED and d.summary_id is not None
    assert [m.id for m in ctx.messages if m.id != d.summary_id] == ["sys", "q1", "q2"]
    assert_consistent(ctx)
    assert validate(ctx.to_anthropic(), "anthropic") == []


def test_compaction_edit_and_a_failing_summarizer():
    assert CompactPolicy.from_edit({"type": "compact_20260112", "trigger": {"type": "input_tokens",
                                                                            "value": 150000}}).trigger == 150000

    def broken(messages):
        raise RuntimeError("model unavailable")

    p = get_policy("compact", summarizer=broken).propose(view(agent_context()))
    assert p.empty and "model unavailable" in (p.error or "")
    with pytest.raises(PolicyError, match="compact: trigger must be >= 1"):
        get_policy("compact", trigger=0)


# --------------------------------------------------------------------------- on Responses bodies
@pytest.mark.parametrize("name", ["clear_tool_uses", "compact"])
@pytest.mark.parametrize("share", [0.9, 0.6, 0.3, 0.1])
def test_gated_responses_bodies_stay_valid(name, share):
    from tests.policies.test_responses import body_with_everything

    body = body_with_everything()
    full = Context.from_responses(body)
    ctx = Context.from_responses(body)
    d = Gate(get_policy(name, **({"keep": 0} if name == "clear_tool_uses" else {})),
             budget=max(1, int(full.tokens * share))).check(ctx)
    assert_consistent(ctx)
    assert validate(ctx.to_responses(), "responses") == []
    assert d.kind == DecisionKind.PRUNED and (d.rewritten_ids or d.summary_id)  # it acted, and stayed valid
