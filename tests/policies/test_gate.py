"""The gate's decision procedure: within budget, defer, grow/shrink, pins, rewrites, summaries, ceiling."""

from __future__ import annotations

import pytest

from policies import (
    Context,
    DecisionKind,
    Gate,
    HardCeilingExceeded,
    MemorySpillStore,
    Message,
    Observer,
    PolicyError,
    Proposal,
    Rewrite,
    Summary,
    text_message,
    tool_result,
    tool_use,
    validate,
)
from tests.invariants import Scripted, assert_consistent
from tests.scenarios import history, open_stream, parallel_batch, result


class Recorder(Observer):
    def __init__(self) -> None:
        self.decisions = []
        self.events = []

    def on_decision(self, ctx, decision):
        self.decisions.append(decision)

    def on_message(self, ctx, message, event, **info):
        self.events.append((event, message.id, info.get("cause")))


def closed_pair(ctx: Context, call_id: str, size: int = 30) -> tuple[Message, Message]:
    a = ctx.append(Message("", "assistant", [tool_use(call_id, "lookup", {"q": call_id})]))
    r = ctx.append(Message("", "tool", [tool_result(call_id, "data " * size)]))
    return a, r


@pytest.fixture
def ctx() -> Context:
    c = Context()
    history(c, turns=2)
    return c


def valid_both(ctx: Context) -> None:
    assert validate(ctx.to_anthropic(), "anthropic") == []
    assert validate(ctx.to_openai(), "openai") == []


# ---------------------------------------------------------------------------- construction
@pytest.mark.parametrize(
    "kwargs,msg",
    [
        (dict(budget=0), "budget must be a positive token count"),
        (dict(budget=100, hard_ceiling=50), r"hard_ceiling \(50\) must be at least the budget \(100\)"),
        (dict(budget=100, mode="cut"), "mode must be 'grow' or 'shrink'"),
    ],
)
def test_bad_gate_settings_are_refused(kwargs, msg):
    with pytest.raises(PolicyError, match=msg):
        Gate(Scripted(), **kwargs)


def test_a_non_policy_is_refused():
    with pytest.raises(PolicyError, match="is not a policy"):
        Gate(object(), budget=10)  # type: ignore[arg-type]  # not a policy: the error is the point


# ---------------------------------------------------------------------------- within budget
def test_within_budget_does_nothing_and_does_not_ask_the_policy(ctx):
    policy = Scripted(ctx.messages[2].id)
    before = [m.id for m in ctx.messages]
    d = Gate(policy, budget=ctx.tokens).check(ctx)
    assert d.kind == DecisionKind.WITHIN_BUDGET and d.tokens_before == d.tokens_after == ctx.tokens
    assert policy.calls == 0 and [m.id for m in ctx.messages] == before


# ---------------------------------------------------------------------------- pending calls
def test_any_pending_call_defers_even_a_prune_of_other_closed_units(ctx):
    old = ctx.messages[2]
    batch = parallel_batch(ctx)
    ctx.append(result("call_weather", "sunny"))
    policy = Scripted(old.id, batch.id)
    d = Gate(policy, budget=10).check(ctx)
    assert d.kind == DecisionKind.DEFERRED and d.reason == "pending_calls"
    assert d.blocking_units == [ctx.unit_id_of(batch.id)]
    assert d.pruned_ids == [] and old.id in ctx and batch.id in ctx
    assert policy.calls == 0  # nothing is proposed while a call is in flight
    assert not d.budget_met and d.tokens_after == d.tokens_before


# ---------------------------------------------------------------------------- grow / shrink
def test_grow_takes_the_whole_unit(ctx):
    a, r = closed_pair(ctx, "c1")
    ctx.append(text_message("", "user", "and now?"))
    d = Gate(Scripted(a.id), budget=ctx.tokens - 1, mode="grow").check(ctx)
    uid = d.pruned_units[0]
    assert d.kind == DecisionKind.PRUNED and d.grown_units == [uid] and d.proposed_ids == [a.id]
    assert sorted(d.pruned_ids) == sorted([a.id, r.id]) and a.id not in ctx and r.id not in ctx
    assert d.tokens_after == ctx.tokens and d.budget_met
    assert_consistent(ctx)
    valid_both(ctx)


def test_shrink_leaves_the_unit_whole(ctx):
    a, r = closed_pair(ctx, "c1")
    ctx.append(text_message("", "user", "and now?"))
    before = ctx.tokens
    d = Gate(Scripted(a.id), budget=ctx.tokens - 1, mode="shrink").check(ctx)
    assert d.kind == DecisionKind.DEFERRED and d.reason == "no_safe_prune"
    assert d.shrunk_units == [ctx.unit_id_of(a.id)] and d.pruned_ids == []
    assert a.id in ctx and r.id in ctx and ctx.tokens == before


def test_shrink_still_prunes_whole_units_it_was_given(ctx):
    a, r = closed_pair(ctx, "c1")
    step = ctx.messages[2]
    ctx.append(text_message("", "user", "and now?"))
    d = Gate(Scripted(a.id, step.id), budget=ctx.tokens - 1, mode="shrink").check(ctx)
    assert d.kind == DecisionKind.PRUNED and d.pruned_ids == [step.id]
    assert d.shrunk_units == [ctx.unit_id_of(a.id)]


# ---------------------------------------------------------------------------- pins
def test_pinned_units_are_never_pruned(ctx):
    extra = ctx.append(text_message("", "assistant", "keep me " * 20))
    ctx.pin(extra.id)
    ctx.append(text_message("", "user", "latest question"))
    everything = [m.id for m in ctx.messages]
    pins = ctx.pinned_unit_ids()
    d = Gate(Scripted(*everything), budget=1).check(ctx)
    assert set(d.skipped_units) == pins
    survivors = {ctx.unit_id_of(m.id) for m in ctx.messages}
    assert survivors == pins and extra.id in ctx
    assert d.kind == DecisionKind.PRUNED and not d.budget_met
    valid_both(ctx)


# ---------------------------------------------------------------------------- rewrites and summaries
def test_rewrites_keep_structure_or_are_refused(ctx):
    a, r = closed_pair(ctx, "c1", size=200)
    ctx.append(text_message("", "user", "next"))
    renamed = r.copy()
    renamed.blocks[0].tool_use_id = "c2"
    shorter = r.copy()
    shorter.blocks[0].content = "[elided]"

    class Rewriter:
        name = "rewriter"

        def __init__(self, replacement):
            self.replacement = replacement

        def propose(self, view):
            return Proposal(self.name, rewrites=[Rewrite(r.id, self.replacement)])

    d = Gate(Rewriter(renamed), budget=ctx.tokens - 1).check(ctx)
    assert d.kind == DecisionKind.DEFERRED and d.skipped_units == [ctx.unit_id_of(r.id)]
    assert ctx.message(r.id).blocks[0].tool_use_id == "c1" and ctx.message(r.id).blocks[0].content.startswith("data")
    d = Gate(Rewriter(shorter), budget=ctx.tokens - 1).check(ctx)
    assert d.kind == DecisionKind.PRUNED and d.rewritten_ids == [r.id] and d.pruned_ids == []
    assert ctx.message(r.id).blocks[0].content == "[elided]" and d.tokens_after < d.tokens_before
    assert_consistent(ctx)
    valid_both(ctx)


def test_summaries_replace_whole_closed_unpinned_units(ctx):
    a, r = closed_pair(ctx, "c1")
    step0 = ctx.messages[2]
    ctx.append(text_message("", "user", "next"))
    first_user = ctx.messages[1]
    summary = text_message("sum1", "assistant", "Earlier: step 0 and a lookup.")
    rejected = text_message("sum2", "assistant", "would swallow the first question")

    class Summarizer:
        name = "summarizer"

        def propose(self, view):
            return Proposal(self.name, summaries=[
                Summary((view.unit_of(step0.id).id, view.unit_of(a.id).id), summary),
                Summary((view.unit_of(first_user.id).id,), rejected),  # pinned: skipped
            ])

    d = Gate(Summarizer(), budget=ctx.tokens - 1).check(ctx)
    assert d.kind == DecisionKind.PRUNED and d.summary_id == "sum1"
    assert d.skipped_units == [ctx.unit_id_of(first_user.id)]
    assert a.id not in ctx and r.id not in ctx and step0.id not in ctx and "sum2" not in ctx
    assert [m.id for m in ctx.messages].index("sum1") == 2 and ctx.unit_of("sum1").kind == "summary"
    assert_consistent(ctx)
    valid_both(ctx)


def test_a_failing_policy_defers_and_leaves_the_context_alone(ctx):
    class Broken:
        name = "broken"

        def propose(self, view):
            raise ZeroDivisionError("scorer divided by zero")

    before = [m.id for m in ctx.messages]
    d = Gate(Broken(), budget=1).check(ctx)
    assert d.kind == DecisionKind.DEFERRED and d.reason == "policy_error"
    assert d.error == "ZeroDivisionError: scorer divided by zero"
    assert [m.id for m in ctx.messages] == before


def test_ids_matching_no_message_are_ignored(ctx):
    d = Gate(Scripted("ghost", "m999"), budget=1).check(ctx)
    assert d.kind == DecisionKind.DEFERRED and d.reason == "no_safe_prune" and d.pruned_ids == []


# ---------------------------------------------------------------------------- open messages
def test_an_open_message_is_skipped_and_the_rest_is_pruned_when_that_suffices(ctx):
    step0 = ctx.messages[2]
    draft = ctx.open("assistant", text='{"plan": ')
    ctx.append(text_message("", "user", "(typed while the model was still streaming)"))
    d = Gate(Scripted(draft.id, step0.id), budget=ctx.tokens - 1).check(ctx)
    assert d.kind == DecisionKind.PRUNED and d.pruned_ids == [step0.id]
    assert d.skipped_units == [ctx.unit_id_of(draft.id)]
    assert ctx.message(draft.id).blocks[0].text == '{"plan": ' and not ctx.message(draft.id).closed


def test_an_open_message_defers_when_the_budget_needs_it(ctx):
    step0 = ctx.messages[2]
    draft = ctx.open("assistant", text='{"plan": ' + '"x", ' * 100)
    ctx.append(text_message("", "user", "(typed while the model was still streaming)"))
    before = [m.id for m in ctx.messages]
    d = Gate(Scripted(draft.id, step0.id), budget=ctx.tokens - step0.tokens - 5).check(ctx)
    assert d.kind == DecisionKind.DEFERRED and d.reason == "open_messages"
    assert d.blocking_units == [ctx.unit_id_of(draft.id)]
    assert [m.id for m in ctx.messages] == before  # not even the safe part: the decision waits for the stream
    ctx.append_delta(draft.id, '"done"}')
    ctx.close(draft.id)
    d = Gate(Scripted(draft.id, step0.id), budget=ctx.tokens - step0.tokens - 5).check(ctx)
    assert d.kind == DecisionKind.PRUNED and set(d.pruned_ids) == {draft.id, step0.id}


# ---------------------------------------------------------------------------- hard ceiling
def test_hard_ceiling_failure_is_reported_before_it_is_raised(ctx):
    rec = Recorder()
    parallel_batch(ctx)
    for call in ("call_weather", "call_hotel"):
        ctx.append(result(call, "big " * 200))
    gate = Gate(Scripted(), budget=50, hard_ceiling=60, observer=rec)
    with pytest.raises(HardCeilingExceeded, match=r"tokens over the hard ceiling of 60 \(no spill store") as info:
        gate.check(ctx)
    assert rec.decisions and rec.decisions[-1] is info.value.decision
    assert info.value.decision.kind == DecisionKind.FAILED and info.value.decision.error == str(info.value)
    assert_consistent(ctx)


def test_over_the_ceiling_the_oldest_closed_unpinned_units_spill(ctx):
    batch = parallel_batch(ctx)
    ctx.append(result("call_weather", "sunny " * 30))
    pins = ctx.pinned_unit_ids()
    candidates = [u for u in ctx.units.values() if u.closed and u.id not in pins]
    ceiling = ctx.tokens - candidates[0].tokens - 1  # needs the oldest two candidates
    expected = [candidates[0].id, candidates[1].id]
    store = MemorySpillStore()
    d = Gate(Scripted(), budget=ceiling - 50, hard_ceiling=ceiling, spill_store=store).check(ctx)
    assert d.kind == DecisionKind.SPILLED and d.reason == "pending_calls; spilled to hold the hard ceiling"
    assert d.spilled_units == expected and sorted(ctx.spilled) == sorted(expected) and len(store) == 2
    assert d.tokens_after == ctx.tokens <= ceiling and not d.budget_met
    assert batch.id in ctx and all(u in ctx.units for u in pins)
    assert_consistent(ctx)


def test_a_spill_that_cannot_hold_the_ceiling_fails_after_spilling_what_it_can(ctx):
    rec = Recorder()
    parallel_batch(ctx)
    ctx.append(result("call_weather", "huge " * 500))
    store = MemorySpillStore()
    gate = Gate(Scripted(), budget=50, hard_ceiling=100, spill_store=store, observer=rec)
    with pytest.raises(HardCeilingExceeded, match="nothing closed left to spill") as info:
        gate.check(ctx)
    d = info.value.decision
    assert rec.decisions[-1] is d and d.kind == DecisionKind.FAILED and d.spilled_units
    assert {u for u in ctx.units.values() if u.closed and u.id not in ctx.pinned_unit_ids()} == set()


# ---------------------------------------------------------------------------- observers
def test_a_broken_observer_is_counted_not_raised(ctx):
    class Boom(Observer):
        def on_decision(self, c, decision):
            raise RuntimeError("tracer down")

    d = Gate(Scripted(ctx.messages[2].id), budget=1, observer=Boom()).check(ctx)
    assert d.kind == DecisionKind.PRUNED and ctx.observer_errors.count == 1


def test_decisions_serialise_with_their_proposal(ctx):
    step0 = ctx.messages[2].id
    d = Gate(Scripted(step0), budget=1).check(ctx)
    data = d.to_dict()
    assert data["kind"] == "pruned" and data["pruned_ids"] == [step0]
    assert data["proposal"]["evictions"][0]["message_ids"] == [step0]
    assert ctx.gone_reason(step0) == "pruned by check #1 (scripted)"


def test_a_streaming_result_defers_and_keeps_its_head(ctx):
    ctx.append(Message("", "assistant", [tool_use("s1", "search", {})]))
    stream = open_stream(ctx, "s1")
    ctx.append_delta(stream.id, "HEAD ")
    d = Gate(Scripted(stream.id), budget=1).check(ctx)
    assert d.kind == DecisionKind.DEFERRED and d.reason == "pending_calls"
    ctx.append_delta(stream.id, "tail")
    ctx.close(stream.id)
    assert ctx.message(stream.id).blocks[0].content == "HEAD tail"
