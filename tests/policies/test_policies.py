"""What each built-in policy proposes on small hand-made contexts, and what the gate makes of it."""

from __future__ import annotations

import pytest

from policies import (
    Block,
    Context,
    ContextView,
    DecisionKind,
    Gate,
    Message,
    PolicyError,
    get_policy,
    text_message,
    tool_result,
    tool_use,
    validate,
)
from policies.builtin.head_tail import marker_text
from policies.builtin.mask import MASK_PREFIX, is_masked
from policies.builtin.salience import Features, SaliencePolicy, default_scorer
from policies.builtin.summarize import EXTRACTIVE_LABEL, ExtractiveSummarizer
from policies.naive import NaiveRuntime
from tests.invariants import assert_consistent


# --------------------------------------------------------------------------- contexts
def call(mid: str, call_id: str, name: str, args: dict, text: str = "") -> Message:
    blocks = [Block("text", text=text)] if text else []
    return Message(id=mid, role="assistant", blocks=[*blocks, tool_use(call_id, name, args)])


def res(mid: str, call_id: str, content: str) -> Message:
    return Message(id=mid, role="tool", blocks=[tool_result(call_id, content)])


def say(mid: str, role: str, text: str) -> Message:
    return text_message(mid, role, text)


def agent_context() -> Context:
    """System prompt, a question, three tool round trips with big results, a final answer, a follow-up."""
    ctx = Context()
    ctx.append(say("sys", "system", "You are an airline agent."))
    ctx.append(say("q1", "user", "Please look up my reservations, user mia_li_3668."))
    ctx.append(call("c1", "call_1", "get_user_details", {"user_id": "mia_li_3668"}))
    ctx.append(res("r1", "call_1", "user mia_li_3668 has reservations NO6JO3 and AIXC49. " + "profile data " * 60))
    ctx.append(call("c2", "call_2", "get_reservation_details", {"reservation_id": "NO6JO3"}))
    ctx.append(res("r2", "call_2", "reservation NO6JO3: flight HAT170 to Seattle on 2024-05-20. " + "leg data " * 60))
    ctx.append(call("c3", "call_3", "get_reservation_details", {"reservation_id": "AIXC49"}))
    ctx.append(res("r3", "call_3", "reservation AIXC49: flight HAT045 to Boston on 2024-06-02. " + "leg data " * 60))
    ctx.append(say("a1", "assistant", "You have two reservations: NO6JO3 (Seattle) and AIXC49 (Boston)."))
    ctx.append(say("q2", "user", "Cancel the Boston one."))
    return ctx


def view(ctx: Context, budget_share: float = 0.6) -> ContextView:
    return ContextView(ctx, budget=int(ctx.tokens * budget_share))


def gate_check(ctx: Context, name: str, budget_share: float = 0.6, **params):
    gate = Gate(get_policy(name, **params), budget=int(ctx.tokens * budget_share))
    d = gate.check(ctx)
    assert_consistent(ctx)
    assert validate(ctx.to_openai(), "openai") == []
    return d


# --------------------------------------------------------------------------- recency
def test_recency_evicts_oldest_unpinned_messages_until_the_target():
    ctx = agent_context()
    v = view(ctx)
    p = get_policy("recency", target=0.8).propose(v)
    assert p.evict_ids[0] == "c1"  # system and first question are pinned
    freed = sum(ctx.message(m).tokens for m in p.evict_ids)
    assert freed >= ctx.tokens - int(v.budget * 0.8)
    assert freed - ctx.message(p.evict_ids[-1]).tokens < ctx.tokens - int(v.budget * 0.8)  # stops once enough
    assert "q2" not in p.evict_ids and "sys" not in p.evict_ids


def test_recency_under_the_gate_takes_whole_pairs():
    ctx = agent_context()
    d = gate_check(ctx, "recency")
    assert d.kind == DecisionKind.PRUNED
    assert set(d.pruned_ids) >= {"c1", "r1"}
    assert ("c2" in ctx) == ("r2" in ctx)


# --------------------------------------------------------------------------- salience
def test_salience_default_scorer_prefers_referenced_recent_user_text():
    f = dict(message_id="x", unit_id="u", role="tool", kind="tool_result", tokens=300)
    old_unused = default_scorer(say("x", "tool", ""), Features(**f, age=1.0, references=0))
    old_quoted = default_scorer(say("x", "tool", ""), Features(**f, age=1.0, references=2))
    new_unused = default_scorer(say("x", "tool", ""), Features(**f, age=0.0, references=0))
    assert old_unused < old_quoted and old_unused < new_unused
    user = default_scorer(say("x", "user", ""), Features("x", "u", "user", "text", 300, 1.0, 0))
    assert user > old_unused


def test_salience_features_count_later_references():
    ctx = agent_context()
    feats = {f.message_id: f for _m, f, _p in SaliencePolicy().features(view(ctx))}
    assert feats["r3"].references >= 1  # a1 quotes AIXC49 from it
    assert feats["a1"].references == 0  # nothing after it mentions an id of its own
    assert feats["c1"].kind == "tool_call" and feats["r1"].kind == "tool_result"
    assert feats["sys"].age == 1.0 and feats["q2"].age == 0.0


def test_salience_splits_call_result_pairs_and_ungated_that_is_an_invalid_request():
    ctx = Context(strict=False)
    for m in list(agent_context().messages):
        ctx.append(m.copy())
    budget = int(ctx.tokens * 0.9)
    policy = get_policy("salience")
    p = policy.propose(ContextView(ctx, budget=budget))
    evicted = set(p.evict_ids)
    assert any((c in evicted) != (r in evicted) for c, r in (("c1", "r1"), ("c2", "r2"), ("c3", "r3")))
    assert p.scores and all(isinstance(s, float) for s in p.scores.values())
    assert all(e.score is not None and e.reason.startswith("salience") for e in p.evictions)
    NaiveRuntime(policy, budget).check(ctx)
    codes = {v.code for v in validate(ctx.to_openai(), "openai")}
    assert codes & {"orphan_tool_result", "missing_tool_result"}


def test_salience_under_the_gate_leaves_no_orphan():
    ctx = agent_context()
    d = gate_check(ctx, "salience", budget_share=0.9)
    assert d.kind == DecisionKind.PRUNED and d.grown_units


def test_salience_uses_a_pluggable_scorer():
    seen: list[Features] = []

    def scorer(message: Message, f: Features) -> float:
        seen.append(f)
        return 0.0 if message.id == "a1" else 1.0

    ctx = agent_context()
    p = get_policy("salience", scorer=scorer).propose(view(ctx, 0.95))
    assert p.evict_ids[0] == "a1" and p.evictions[0].score == 0.0
    assert {f.message_id for f in seen} == {m.id for m in ctx.messages} - {"sys", "q1", "q2"}  # pins unscored


# --------------------------------------------------------------------------- similarity
def topics_context() -> Context:
    ctx = Context()
    ctx.append(say("sys", "system", "You are a helpful assistant."))
    ctx.append(say("q1", "user", "Tell me about a few things."))
    ctx.append(say("a1", "assistant", "Baggage allowance: two checked bags of 23 kg in economy, free for gold members."))
    ctx.append(say("a2", "assistant", "Seat selection: window and aisle seats cost extra unless you fly business."))
    ctx.append(say("a3", "assistant", "Meal options: vegetarian, vegan and kosher meals can be ordered 24 hours ahead."))
    ctx.append(say("q2", "user", "How many checked bags are free, and what is the baggage weight limit?"))
    return ctx


def test_similarity_keeps_the_unit_relevant_to_the_query():
    ctx = topics_context()
    v = view(ctx, 0.8)
    p = get_policy("similarity", target=0.8).propose(v)
    assert "a1" not in p.evict_ids and {"a2", "a3"} & set(p.evict_ids)
    assert p.scores[ctx.unit_id_of("a1")] > p.scores[ctx.unit_id_of("a2")]
    d = gate_check(ctx, "similarity", budget_share=0.8)
    assert d.kind == DecisionKind.PRUNED and "a1" in ctx


def test_similarity_with_pluggable_embeddings():
    calls = []

    def embed(texts: list[str]) -> list[list[float]]:  # a real, if tiny, embedding: topic keyword counts
        calls.append(texts)
        return [[t.lower().count(k) for k in ("bag", "seat", "meal")] for t in texts]

    ctx = topics_context()
    p = get_policy("similarity", embed=embed).propose(view(ctx, 0.8))
    assert calls[0][0] == ctx.message("q2").plain_text()  # the query comes first
    assert "a1" not in p.evict_ids


def test_similarity_embed_returning_the_wrong_shape_is_a_reported_policy_error():
    ctx = topics_context()
    policy = get_policy("similarity", embed=lambda texts: [[1.0]])
    with pytest.raises(PolicyError, match="embed returned 1 vectors"):
        policy.propose(view(ctx))
    d = Gate(policy, budget=int(ctx.tokens * 0.6)).check(ctx)
    assert d.kind == DecisionKind.DEFERRED and d.reason == "policy_error" and "embed" in d.error


# --------------------------------------------------------------------------- mask
def test_mask_rewrites_old_results_keeping_ids_and_a_preview():
    ctx = agent_context()
    before = {m.id: m.copy() for m in ctx.messages}
    p = get_policy("mask", keep_last=1, target=0.5).propose(view(ctx))
    assert [r.message_id for r in p.rewrites] == ["r1", "r2"]  # r3 is the newest result: verbatim
    new = p.rewrites[0].replacement
    assert new.answered_ids == ["call_1"] and new.role == "tool"
    text = new.blocks[0].content
    assert text.startswith(f"{MASK_PREFIX}call_1 (get_user_details), ")
    assert f"{len(before['r1'].blocks[0].content):,} chars; preview: user mia_li_3668 has" in text
    assert is_masked(new) and not p.evictions and not p.summaries
    assert all(ctx.message(m.id) == before[m.id] for m in ctx.messages)  # nothing mutated


def test_mask_under_the_gate_and_ungated_keeps_every_pair():
    ctx = agent_context()
    d = gate_check(ctx, "mask", budget_share=0.7, keep_last=1)
    assert d.kind == DecisionKind.PRUNED and d.rewritten_ids
    assert is_masked(ctx.message(d.rewritten_ids[0]))
    naive = Context(strict=False)
    for m in agent_context().messages:
        naive.append(m.copy())
    NaiveRuntime(get_policy("mask", keep_last=1), int(naive.tokens * 0.7)).check(naive)
    assert validate(naive.to_openai(), "openai") == [] and len(naive) == len(agent_context())


def test_mask_tool_allow_and_deny_lists_and_no_double_masking():
    ctx = agent_context()
    p = get_policy("mask", keep_last=0, target=0.1, tools=["get_reservation_details"]).propose(view(ctx))
    assert [r.message_id for r in p.rewrites] == ["r2", "r3"]
    p = get_policy("mask", keep_last=0, target=0.1, exclude_tools=["get_reservation_details"]).propose(view(ctx))
    assert [r.message_id for r in p.rewrites] == ["r1"]
    gate_check(ctx, "mask", budget_share=0.3, keep_last=0, target=0.1)
    assert all(is_masked(ctx.message(m)) for m in ("r1", "r2", "r3"))
    assert get_policy("mask", keep_last=0, target=0.1).propose(view(ctx, 0.3)).empty  # nothing left to mask


def test_mask_counts_results_one_by_one_in_an_anthropic_batch():
    ctx = Context()
    ctx.append(say("q", "user", "Weather and hotels in Lisbon?"))
    ctx.append(Message(id="c", role="assistant", blocks=[tool_use("w", "get_weather", {}), tool_use("h", "hotels", {})]))
    ctx.append(Message(id="r", role="user", blocks=[tool_result("w", "sunny " * 200), tool_result("h", "hotel " * 200)]))
    ctx.append(say("a", "assistant", "Sunny; several hotels."))
    ctx.append(say("q2", "user", "Thanks"))
    p = get_policy("mask", keep_last=1).propose(view(ctx, 0.5))
    (rw,) = p.rewrites
    first, second = rw.replacement.blocks
    assert first.content.startswith(f"{MASK_PREFIX}w (get_weather)") and second.content == "hotel " * 200


# --------------------------------------------------------------------------- head_tail
def test_head_tail_elides_the_middle_with_one_counted_marker():
    ctx = agent_context()
    p = get_policy("head_tail", head=2, tail=3).propose(view(ctx))
    (s,) = p.summaries
    middle = [u for u in ctx.units if u not in s.unit_ids]
    assert len(middle) == 5  # sys, q1 | c3/r3, a1, q2
    assert s.message.role == "user" and s.message.plain_text() == marker_text(4)
    d = gate_check(ctx, "head_tail", head=2, tail=3)
    assert d.kind == DecisionKind.PRUNED
    assert [m.id for m in ctx.messages][:2] == ["sys", "q1"] and ctx.messages[2].plain_text() == marker_text(4)


def test_head_tail_counts_messages_an_earlier_marker_stood_for():
    ctx = agent_context()
    gate_check(ctx, "head_tail", head=2, tail=3)
    for i in range(3):
        ctx.append(say(f"x{i}", "user", "more words " * 40))
    gate_check(ctx, "head_tail", head=2, tail=1, budget_share=0.5)
    assert ctx.messages[2].plain_text() == marker_text(4 + 4 + 2)


def test_head_tail_fits_the_tail_to_the_target_by_default():
    ctx = agent_context()
    v = view(ctx)
    (s,) = get_policy("head_tail").propose(v).summaries
    kept = sum(u.tokens for u in v.units() if u.id not in s.unit_ids)
    assert kept + v.count_tokens(s.message) <= int(v.budget * 0.8)


# --------------------------------------------------------------------------- summarize
def test_summarize_replaces_the_oldest_closed_run_with_a_labelled_summary():
    ctx = agent_context()
    p = get_policy("summarize").propose(view(ctx))
    (s,) = p.summaries
    assert s.unit_ids[0] == ctx.unit_id_of("c1") and p.error is None
    text = s.message.plain_text()
    assert text.startswith(EXTRACTIVE_LABEL) and "get_user_details" in text and "NO6JO3" in text
    assert s.message.role == "user" and s.summarizer == "extractive"
    d = gate_check(ctx, "summarize")
    assert d.kind == DecisionKind.PRUNED and d.summary_id
    assert [m.id for m in ctx.messages][:2] == ["sys", "q1"] and ctx.messages[2].id == d.summary_id


def test_summarizer_failure_keeps_the_context_and_reports_the_error():
    def broken(messages: list[Message]) -> str:
        raise TimeoutError("model did not answer")

    ctx = agent_context()
    p = get_policy("summarize", summarizer=broken).propose(view(ctx))
    assert p.summaries == [] and "TimeoutError: model did not answer" in p.error
    before = [m.copy() for m in ctx.messages]
    d = Gate(get_policy("summarize", summarizer=broken), budget=int(ctx.tokens * 0.6)).check(ctx)
    assert d.kind == DecisionKind.DEFERRED and d.reason == "policy_error" and "model did not answer" in d.error
    assert ctx.messages == before


@pytest.mark.parametrize("bad", ["", "   ", None, 42])
def test_a_summarizer_returning_no_text_is_an_error_not_a_summary(bad):
    p = get_policy("summarize", summarizer=lambda messages: bad).propose(view(agent_context()))
    assert p.summaries == [] and "not a summary text" in p.error


def test_summarize_hands_the_summarizer_copies_and_stops_at_an_open_message():
    got: list[list[Message]] = []

    def summarizer(messages: list[Message]) -> str:
        got.append(messages)
        for m in messages:
            m.blocks.clear()  # a careless summarizer cannot damage the context
        return "short summary"

    ctx = agent_context()
    ctx.open("assistant", id="streaming")  # an answer still streaming, in its own unit
    ctx.append(say("late", "user", "and also..."))
    p = get_policy("summarize", summarizer=summarizer).propose(view(ctx))
    assert all(ctx.message(m.id).blocks for m in got[0])
    (s,) = p.summaries
    assert ctx.unit_id_of("streaming") not in s.unit_ids and s.message.plain_text() == "short summary"


def test_extractive_summarizer_is_bounded():
    msgs = [say(f"m{i}", "assistant", f"step {i} " * 100) for i in range(50)]
    text = ExtractiveSummarizer(max_chars=600)(msgs)
    assert len(text) <= 600 and text.startswith(EXTRACTIVE_LABEL) and "more" in text


# --------------------------------------------------------------------------- tiered
def test_tiered_masks_first_and_only_then_summarizes_and_evicts():
    ctx = agent_context()
    light = get_policy("tiered", keep_last=1).propose(view(ctx, 0.95))
    assert light.rewrites and not light.summaries and not light.evictions
    assert "projected savings: mask" in light.notes
    heavy = get_policy("tiered", keep_last=1).propose(view(ctx, 0.35))
    assert heavy.summaries and "summarize" in heavy.notes
    rewritten = {r.message_id for r in heavy.rewrites}
    assert not rewritten & {m for u in heavy.summaries[0].unit_ids for m in ctx.units[u].message_ids}
    d = gate_check(ctx, "tiered", budget_share=0.35, keep_last=1)
    assert d.kind == DecisionKind.PRUNED


def test_tiered_falls_through_to_eviction_when_the_summarizer_fails():
    def broken(messages: list[Message]) -> str:
        raise RuntimeError("quota")

    ctx = agent_context()
    p = get_policy("tiered", summarizer=broken, keep_last=1).propose(view(ctx, 0.3))
    assert "quota" in p.error and not p.summaries and p.evictions


def test_tiered_stages_can_be_chosen():
    ctx = agent_context()
    p = get_policy("tiered", stages=["evict"]).propose(view(ctx))
    assert p.evictions and not p.rewrites and not p.summaries


# --------------------------------------------------------------------------- the langchain adapter
def test_langchain_messages_keep_an_id_mapping():
    from policies.adapters.langchain import to_langchain

    ctx = agent_context()
    ctx.append(Message(id="batch", role="assistant", blocks=[tool_use("w", "weather", {}), tool_use("h", "hotel", {})]))
    ctx.append(Message(id="both", role="user", blocks=[tool_result("w", "sunny"), tool_result("h", "full")]))
    lc, back = to_langchain(ctx.messages)
    kinds = [type(m).__name__ for m in lc]
    assert kinds[:4] == ["SystemMessage", "HumanMessage", "AIMessage", "ToolMessage"]
    assert lc[2].tool_calls[0]["id"] == "call_1" and lc[3].tool_call_id == "call_1"
    assert [back[m.id] for m in lc[-2:]] == ["both", "both"] and [m.tool_call_id for m in lc[-2:]] == ["w", "h"]


def test_langchain_trim_proposes_what_trim_messages_dropped_and_skips_pins():
    ctx = agent_context()
    p = get_policy("langchain_trim").propose(view(ctx))
    assert p.evict_ids and "sys" not in p.evict_ids and "q1" not in p.evict_ids
    assert p.evict_ids == [m.id for m in ctx.messages if m.id in p.evict_ids]  # oldest first
    assert "trim_messages(strategy='last'" in p.notes
    d = gate_check(ctx, "langchain_trim")
    assert d.kind == DecisionKind.PRUNED
