"""The source document's two failures: reproduced with the naive runtime, prevented by the gate.

(1) A parallel batch of three calls; after the first result the budget check fires, a salience
scorer ranks the batch's assistant turn lowest and evicts it; the other two results arrive as
orphans and the provider would answer 400. (2) A budget check fires mid-stream and evicts the
short, incomplete trailing message; the stream's head is lost, and what reaches the request still
parses as JSON. Neither raises at the point of pruning.
"""

from __future__ import annotations

import json

import pytest

from policies import (
    Context,
    DecisionKind,
    EvictedMessageError,
    Gate,
    Message,
    OrphanResultError,
    text_message,
    tool_use,
    validate,
)
from policies.naive import NaiveRuntime
from policies.validate import ORPHAN_TOOL_RESULT
from tests.invariants import Salience, assert_consistent
from tests.scenarios import history, open_stream, parallel_batch, result

CALLS = ("call_weather", "call_hotel", "call_book")


def codes(ctx: Context, provider: str) -> list[tuple[str, tuple[str, ...]]]:
    body = ctx.to_anthropic() if provider == "anthropic" else ctx.to_openai()
    return [(v.code, v.ids) for v in validate(body, provider)]


# ---------------------------------------------------------------------------- failure 1
def batch_after_first_result(*, strict: bool) -> tuple[Context, Message]:
    ctx = Context(strict=strict)
    history(ctx)
    batch = parallel_batch(ctx)
    ctx.append(result("call_weather", "18C, sunny"))
    return ctx, batch


def test_1_naive_prune_evicts_the_batch_turn_and_the_results_arrive_as_orphans():
    ctx, batch = batch_after_first_result(strict=False)
    runtime = NaiveRuntime(Salience(batch.id), budget=ctx.tokens - 1)

    d = runtime.check(ctx)  # nothing raises here: the damage shows one request later
    assert d.kind == DecisionKind.PRUNED and d.pruned_ids == [batch.id]
    ctx.append(result("call_hotel", "3 hotels"))
    ctx.append(result("call_book", "booked TP123"))

    anthropic = codes(ctx, "anthropic")
    assert (ORPHAN_TOOL_RESULT, CALLS) in anthropic  # all three results answer a tool_use that is gone
    openai = codes(ctx, "openai")
    assert [c for c, _ in openai] == [ORPHAN_TOOL_RESULT] * 3
    assert sorted(i for _, ids in openai for i in ids) == sorted(CALLS)
    unit = ctx.unit_of(ctx.messages[-3].id)
    assert unit.partial and unit.orphan  # the context knows it was split


def test_1_a_strict_context_refuses_the_orphan_where_it_arrives():
    ctx, batch = batch_after_first_result(strict=True)
    NaiveRuntime(Salience(batch.id), budget=ctx.tokens - 1).check(ctx)
    with pytest.raises(OrphanResultError, match=r"result for tool call id 'call_hotel'"):
        ctx.append(result("call_hotel", "3 hotels"))


def test_1_under_the_gate_the_check_defers_and_nothing_is_split():
    ctx, batch = batch_after_first_result(strict=True)
    policy = Salience(batch.id)
    gate = Gate(policy, budget=ctx.tokens - 1)
    uid = ctx.unit_id_of(batch.id)

    d = gate.check(ctx)
    assert d.kind == DecisionKind.DEFERRED and d.reason == "pending_calls" and d.blocking_units == [uid]
    assert d.pruned_ids == [] and not d.budget_met
    for call in ("call_hotel", "call_book"):
        ctx.append(result(call, f"{call} done"))
        d = gate.check(ctx)
        assert batch.id in ctx
        assert_consistent(ctx)
    assert len(ctx.units[uid].message_ids) == 4  # the whole batch, together
    assert codes(ctx, "anthropic") == [] and codes(ctx, "openai") == []
    # now closed, but still the live turn (pinned): the salience pick is skipped, older turns go
    assert uid in d.skipped_units and batch.id in ctx


@pytest.mark.parametrize("mode", ["grow", "shrink"])
def test_1_once_settled_the_same_proposal_takes_the_batch_whole_or_not_at_all(mode):
    ctx, batch = batch_after_first_result(strict=True)
    for call in ("call_hotel", "call_book"):
        ctx.append(result(call, f"{call} done"))
    ctx.append(text_message("", "user", "and the museums?"))  # the next user turn: the batch is history
    uid = ctx.unit_id_of(batch.id)
    members = list(ctx.units[uid].message_ids)
    d = Gate(Salience(batch.id), budget=ctx.tokens - 1, mode=mode).check(ctx)
    if mode == "grow":
        assert d.grown_units == [uid] and set(members) <= set(d.pruned_ids)
        assert not any(m in ctx for m in members)
    else:
        assert d.shrunk_units == [uid] and all(m in ctx for m in members)
    assert codes(ctx, "anthropic") == [] and codes(ctx, "openai") == []
    assert_consistent(ctx)


# ---------------------------------------------------------------------------- failure 2
RECORDS = [json.dumps({"flight": f"TP{i:03d}", "price": 100 + i}) + "\n" for i in range(12)]
HEAD, TAIL = RECORDS[:3], RECORDS[3:]


def stream_in_progress() -> tuple[Context, Message]:
    ctx = Context()
    history(ctx)
    ctx.append(Message("", "assistant", [tool_use("call_search", "search_flights", {"to": "LIS"})]))
    stream = open_stream(ctx, "call_search")
    for chunk in HEAD:
        ctx.append_delta(stream.id, chunk)
    return ctx, stream


def result_text(ctx: Context) -> str:
    (text,) = [m["content"] for m in ctx.to_openai()["messages"] if m["role"] == "tool"]
    return text


def test_2_naive_prune_evicts_the_stream_and_the_next_write_has_nowhere_to_go():
    ctx, stream = stream_in_progress()
    runtime = NaiveRuntime(Salience(stream.id), budget=ctx.tokens - 1)

    d = runtime.check(ctx)  # nothing raises at the point of pruning
    assert d.kind == DecisionKind.PRUNED and d.pruned_ids == [stream.id]
    with pytest.raises(EvictedMessageError, match=rf"message '{stream.id}' left the context .*cannot write into it"):
        ctx.append_delta(stream.id, TAIL[0])
    assert stream.id not in ctx
    assert not any("TP000" in m.plain_text() for m in ctx.messages)  # the head is gone from the context


def test_2_a_runtime_that_streams_on_carries_a_valid_looking_result_without_its_head():
    """What writing into nothing amounts to: the rest of the stream lands in a fresh message."""
    ctx, stream = stream_in_progress()
    NaiveRuntime(Salience(stream.id), budget=ctx.tokens - 1).check(ctx)
    again = open_stream(ctx, "call_search")  # the runtime recovers by reopening the result...
    for chunk in TAIL:
        ctx.append_delta(again.id, chunk)
    ctx.close(again.id)

    text = result_text(ctx)
    rows = [json.loads(line) for line in text.splitlines()]  # every line still parses
    assert [r["flight"] for r in rows] == [f"TP{i:03d}" for i in range(3, 12)]  # ...without its head
    assert text == "".join(TAIL)
    # and the provider would accept it: the loss is silent
    assert codes(ctx, "anthropic") == [] and codes(ctx, "openai") == []


def test_2_under_the_gate_a_streaming_result_defers_and_keeps_its_head():
    ctx, stream = stream_in_progress()
    gate = Gate(Salience(stream.id), budget=ctx.tokens - 1)
    d = gate.check(ctx)
    assert d.kind == DecisionKind.DEFERRED and d.reason == "pending_calls"
    assert d.blocking_units == [ctx.unit_id_of(stream.id)]
    for chunk in TAIL:
        ctx.append_delta(stream.id, chunk)
        gate.check(ctx)  # a check after every write: still deferred, stream untouched
        assert stream.id in ctx
    ctx.close(stream.id)
    assert result_text(ctx) == "".join(RECORDS)
    assert [json.loads(line)["flight"] for line in result_text(ctx).splitlines()][:3] == ["TP000", "TP001", "TP002"]
    assert codes(ctx, "anthropic") == [] and codes(ctx, "openai") == []
    assert_consistent(ctx)


def test_2_under_the_gate_an_open_assistant_stream_is_skipped_and_defers_when_needed():
    ctx = Context()
    history(ctx)
    draft = ctx.open("assistant", text="")
    for chunk in HEAD:
        ctx.append_delta(draft.id, chunk)
    before = [m.id for m in ctx.messages]
    # the scorer wants the short, incomplete trailing message; the budget cannot be met without it
    d = Gate(Salience(draft.id), budget=ctx.tokens - 1).check(ctx)
    assert d.kind == DecisionKind.DEFERRED and d.reason == "open_messages"
    assert d.skipped_units == [ctx.unit_id_of(draft.id)] and d.blocking_units == [ctx.unit_id_of(draft.id)]
    assert [m.id for m in ctx.messages] == before
    for chunk in TAIL:
        ctx.append_delta(draft.id, chunk)
    ctx.close(draft.id)
    assert ctx.message(draft.id).plain_text() == "".join(RECORDS)
