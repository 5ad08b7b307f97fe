"""The context model: units, pending calls, open messages, structure errors and token accounting."""

from __future__ import annotations

import pytest

from policies import (
    Block,
    Context,
    DuplicateToolIdError,
    EvictedMessageError,
    Message,
    Observer,
    OrphanResultError,
    StructureError,
    text_message,
    tool_result,
    tool_use,
)
from policies.messages import TOOL_RESULT
from tests.invariants import assert_consistent
from tests.scenarios import history, open_stream, parallel_batch, result


def batch_of(n: int, prefix: str = "c") -> Message:
    return Message("", "assistant", [tool_use(f"{prefix}{i}", "lookup", {"i": i}) for i in range(n)])


@pytest.fixture
def ctx() -> Context:
    c = Context()
    history(c, turns=1)
    return c


# ---------------------------------------------------------------------------- units
def test_parallel_batch_is_one_unit_that_closes_with_its_last_result(ctx):
    batch = parallel_batch(ctx)
    unit = ctx.unit_of(batch.id)
    assert unit.pending == {"call_weather", "call_hotel", "call_book"}
    assert set(ctx.pending) == unit.pending and not ctx.at_commit_boundary
    for call_id in ("call_hotel", "call_weather", "call_book"):  # results in another order than the calls
        r = ctx.append(result(call_id, f"{call_id} done"))
        assert ctx.unit_id_of(r.id) == unit.id
        assert_consistent(ctx)
    unit = ctx.unit_of(batch.id)
    assert unit.kind == "batch" and unit.closed and ctx.at_commit_boundary
    assert len(unit.message_ids) == 4 and unit.message_ids[0] == batch.id
    assert unit.call_ids == {"call_weather", "call_hotel", "call_book"}


def test_anthropic_results_in_one_user_message_join_the_batch_unit():
    body = {
        "messages": [
            {"role": "user", "content": "weather and hotels?"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "a", "name": "w", "input": {}},
                {"type": "tool_use", "id": "b", "name": "h", "input": {}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": "sunny"},
                {"type": "tool_result", "tool_use_id": "b", "content": "3 hotels"},
            ]},
        ]
    }
    ctx = Context.from_anthropic(body)
    unit = ctx.unit_of_call("a")
    assert unit is ctx.unit_of_call("b") and len(unit.message_ids) == 2 and unit.closed
    assert [u.kind for u in ctx.units.values()] == ["user", "batch"]


def test_plain_turns_are_units_of_one_message(ctx):
    assert all(len(u.message_ids) == 1 for u in ctx.units.values())
    assert [u.kind for u in ctx.units.values()] == ["system", "user", "assistant", "user"]


# ---------------------------------------------------------------------------- streaming
def test_a_streaming_result_keeps_its_call_pending_until_closed(ctx):
    closed_units = []

    class Rec(Observer):
        def on_unit_closed(self, c, unit):
            closed_units.append(unit.id)

    ctx.observer = Rec()
    ctx.append(Message("", "assistant", [tool_use("s1", "search", {})]))
    uid = ctx.unit_of_call("s1").id
    stream = open_stream(ctx, "s1")
    assert ctx.unit_id_of(stream.id) == uid
    for chunk in ('{"a": 1}\n', '{"b": 2}\n'):
        ctx.append_delta(stream.id, chunk)
        assert ctx.pending == {"s1": uid} and ctx.open_ids == {stream.id}
        assert_consistent(ctx)
    assert closed_units == []
    ctx.close(stream.id)
    assert not ctx.pending and not ctx.open_ids and ctx.at_commit_boundary
    assert closed_units == [uid]
    assert ctx.message(stream.id).blocks[0].content == '{"a": 1}\n{"b": 2}\n'
    assert_consistent(ctx)


def test_streaming_text_grows_its_token_count(ctx):
    m = ctx.open("assistant", text="")
    before = ctx.tokens
    ctx.append_delta(m.id, "word " * 50)
    assert ctx.tokens > before
    assert_consistent(ctx)
    ctx.close(m.id)
    ctx.close(m.id)  # closing twice is harmless
    with pytest.raises(StructureError, match=f"message '{m.id}' is closed"):
        ctx.append_delta(m.id, "more")


def test_appending_to_an_evicted_message_raises_and_names_it(ctx):
    ctx.append(Message("", "assistant", [tool_use("s1", "search", {})]))
    stream = open_stream(ctx, "s1")
    ctx.append_delta(stream.id, "head")
    ctx.remove_messages([stream.id], cause="evicted by a test")  # what an ungated runtime does
    with pytest.raises(EvictedMessageError, match=rf"message '{stream.id}' left the context \(evicted by a test\)"):
        ctx.append_delta(stream.id, "tail")
    with pytest.raises(EvictedMessageError, match="cannot write into it"):
        ctx.close(stream.id)
    with pytest.raises(StructureError, match="no message 'nope'"):
        ctx.append_delta("nope", "x")


# ---------------------------------------------------------------------------- structure errors
def test_a_call_id_issued_while_in_flight_is_refused_naming_the_message(ctx):
    ctx.append(batch_of(2))
    with pytest.raises(DuplicateToolIdError, match=r"message 'dup': tool call id 'c1' is already in flight"):
        ctx.append(Message("dup", "assistant", [tool_use("c1", "lookup", {})]))
    assert "dup" not in ctx
    assert_consistent(ctx)


def test_the_same_call_id_twice_in_one_message_is_refused(ctx):
    with pytest.raises(DuplicateToolIdError, match=r"message 'twice': the same tool call id appears twice"):
        ctx.append(Message("twice", "assistant", [tool_use("x", "f", {}), tool_use("x", "f", {})]))
    assert_consistent(ctx)


def test_a_second_answer_is_refused_naming_the_message(ctx):
    ctx.append(batch_of(1))
    ctx.append(result("c0", "ok"))
    with pytest.raises(DuplicateToolIdError, match=r"message 'again': tool call id 'c0' is answered twice"):
        ctx.append(Message("again", "tool", [tool_result("c0", "ok again")]))


def test_a_result_for_an_unknown_call_is_an_orphan_error_naming_both(ctx):
    with pytest.raises(OrphanResultError, match=r"message 'r9': result for tool call id 'ghost'"):
        ctx.append(Message("r9", "tool", [tool_result("ghost", "?")]))
    assert "r9" not in ctx
    lax = Context(strict=False)  # ungated replays observe orphans instead of refusing them
    lax.append(text_message("", "user", "hi"))
    lax.append(Message("r9", "tool", [tool_result("ghost", "?")]))
    assert lax.unit_of("r9").orphan


@pytest.mark.parametrize(
    "block,what",
    [
        (Block("tool_use", name="f", input={}), r"block 1 \(tool_use\) has no tool call id"),
        (Block(TOOL_RESULT, content="x"), r"block 1 \(tool_result\) does not say which tool call it answers"),
    ],
)
def test_tool_blocks_without_ids_are_refused_naming_message_and_block(ctx, block, what):
    with pytest.raises(StructureError, match=rf"message 'bad': {what}"):
        ctx.append(Message("bad", "assistant", [Block("text", text="hm"), block]))
    assert "bad" not in ctx


def test_a_message_id_already_in_the_context_is_refused(ctx):
    first = ctx.messages[1].id
    with pytest.raises(StructureError, match=f"message id '{first}' is already in the context"):
        ctx.append(text_message(first, "user", "again"))


# ---------------------------------------------------------------------------- id reuse
def test_a_call_id_reused_after_its_pair_completed_is_a_new_pending_call(ctx):
    ctx.append(Message("a1", "assistant", [tool_use("call_1", "f", {})]))
    ctx.append(Message("r1", "tool", [tool_result("call_1", "first")]))
    ctx.append(Message("a2", "assistant", [tool_use("call_1", "f", {})]))  # real OpenAI traffic does this
    assert ctx.pending == {"call_1": ctx.unit_id_of("a2")}
    ctx.append(Message("r2", "tool", [tool_result("call_1", "second")]))
    assert not ctx.pending
    assert ctx.unit_id_of("r2") == ctx.unit_id_of("a2") != ctx.unit_id_of("r1") == ctx.unit_id_of("a1")
    assert_consistent(ctx)


def test_a_call_id_reused_after_its_pair_left_the_context_is_pending_again(ctx):
    ctx.append(Message("a1", "assistant", [tool_use("call_1", "f", {})]))
    ctx.append(Message("r1", "tool", [tool_result("call_1", "first")]))
    ctx.append(text_message("", "user", "next"))
    ctx.remove_units([ctx.unit_id_of("a1")], cause="pruned")
    ctx.append(Message("a2", "assistant", [tool_use("call_1", "f", {})]))
    assert ctx.pending == {"call_1": ctx.unit_id_of("a2")}, "the old answer must not answer the new call"
    ctx.append(Message("r2", "tool", [tool_result("call_1", "second")]))
    assert not ctx.pending
    assert_consistent(ctx)


# ---------------------------------------------------------------------------- token accounting
def test_tokens_stay_consistent_through_every_operation(ctx):
    assert_consistent(ctx)
    batch = ctx.append(batch_of(3))
    assert_consistent(ctx)
    ctx.append(result("c0", "zero " * 20))
    assert_consistent(ctx)
    s = open_stream(ctx, "c1")
    assert_consistent(ctx)
    ctx.append_delta(s.id, "one " * 30)
    assert_consistent(ctx)
    ctx.close(s.id)
    assert_consistent(ctx)
    ctx.append(result("c2", "two"))
    assert_consistent(ctx)
    ctx.append(text_message("", "user", "thanks"))
    step = ctx.messages[2]
    shorter = step.copy()
    shorter.blocks[0].text = "Step 0 (shortened)"
    ctx.replace_message(step.id, shorter)
    assert_consistent(ctx)
    summary = text_message("", "assistant", "summary of the batch")
    ctx.replace_units([ctx.unit_id_of(batch.id)], summary, cause="summarized")
    assert_consistent(ctx)
    assert ctx.unit_of(summary.id).kind == "summary"
    ctx.remove_units([ctx.unit_id_of(summary.id)], cause="pruned")
    assert_consistent(ctx)
    record = ctx.spill_unit(ctx.unit_id_of(step.id), "k1")
    assert_consistent(ctx)
    ctx.restore_unit(record.unit_id, [shorter.copy()])
    assert_consistent(ctx)
    ctx.remove_messages([ctx.messages[-1].id], cause="ungated")
    assert_consistent(ctx, gated=False)


# ---------------------------------------------------------------------------- rewrites and summaries
def test_a_rewrite_that_changes_tool_ids_or_role_is_refused(ctx):
    a = ctx.append(Message("", "assistant", [Block("text", text="calling"), tool_use("c1", "f", {"q": 1})]))
    r = ctx.append(result("c1", "long result " * 20))
    renamed = a.copy()
    renamed.blocks[1].id = "c2"
    with pytest.raises(StructureError, match=f"rewrite of '{a.id}' changes its tool ids"):
        ctx.replace_message(a.id, renamed)
    answers_other = r.copy()
    answers_other.blocks[0].tool_use_id = "zzz"
    with pytest.raises(StructureError, match=f"rewrite of '{r.id}' changes its tool ids"):
        ctx.replace_message(r.id, answers_other)
    as_user = r.copy()
    as_user.role = "user"
    with pytest.raises(StructureError, match="changes its role from 'tool' to 'user'"):
        ctx.replace_message(r.id, as_user)
    kept = r.copy()
    kept.blocks[0].content = "short"
    ctx.replace_message(r.id, kept)
    assert ctx.message(r.id).blocks[0].content == "short"
    assert_consistent(ctx)


def test_a_message_with_work_in_flight_cannot_be_rewritten(ctx):
    ctx.append(batch_of(2))
    r = ctx.append(result("c0", "partial"))
    with pytest.raises(StructureError, match="with work in flight"):
        ctx.replace_message(r.id, r.copy())


def test_bad_summaries_are_refused_before_anything_is_removed(ctx):
    uid = ctx.unit_id_of(ctx.messages[2].id)
    n, tokens = len(ctx), ctx.tokens
    with_call = Message("", "assistant", [tool_use("sx", "f", {})])
    with pytest.raises(StructureError, match="must not carry tool calls"):
        ctx.replace_units([uid], with_call, cause="s")
    with pytest.raises(StructureError, match="not in the context"):
        ctx.replace_units([uid, "u999"], text_message("", "user", "s"), cause="s")
    with pytest.raises(StructureError, match="already used"):
        ctx.replace_units([uid], text_message(ctx.messages[0].id, "user", "s"), cause="s")
    assert (len(ctx), ctx.tokens) == (n, tokens)
    ctx.replace_units([uid, uid], text_message("", "user", "summary"), cause="s")  # duplicates are one unit
    assert_consistent(ctx)


def test_a_summary_lands_where_its_first_unit_was_and_is_not_the_live_turn(ctx):
    last_user = ctx.messages[-1]
    uid = ctx.unit_id_of(ctx.messages[2].id)
    summary = text_message("", "user", "earlier: we planned step 0")
    ctx.replace_units([uid], summary, cause="s")
    assert [m.id for m in ctx.messages].index(summary.id) == 2
    pins = ctx.pinned_unit_ids()
    assert ctx.unit_id_of(last_user.id) in pins  # the real last user turn stays pinned
    assert ctx.unit_id_of(summary.id) not in pins


def test_pins_cover_system_first_user_live_turn_and_explicit_pins(ctx):
    m = ctx.messages
    ctx.pin(m[2].id)
    pins = ctx.pinned_unit_ids()
    assert pins == {ctx.unit_id_of(m[0].id), ctx.unit_id_of(m[1].id), ctx.unit_id_of(m[2].id), ctx.unit_id_of(m[3].id)}
    with pytest.raises(StructureError):
        ctx.pin("nope")


def test_units_cannot_be_removed_with_work_in_flight(ctx):
    b = ctx.append(batch_of(2))
    with pytest.raises(StructureError, match="has work in flight"):
        ctx.remove_units([ctx.unit_id_of(b.id)], cause="x")
    with pytest.raises(StructureError, match="not in the context"):
        ctx.remove_units(["u404"], cause="x")
    assert b.id in ctx


def test_an_ungated_rewrite_of_a_call_message_keeps_its_call_answered(ctx):
    from policies import Proposal, Rewrite
    from policies.naive import NaiveRuntime

    a = ctx.append(Message("", "assistant", [Block("text", text="long " * 50), tool_use("c1", "f", {})]))
    ctx.append(result("c1", "r"))
    ctx.append(text_message("", "user", "next"))

    class Shorten:
        name = "shorten"

        def propose(self, view):
            new = view.message(a.id).copy()
            new.blocks[0].text = "short"
            return Proposal(self.name, rewrites=[Rewrite(a.id, new)])

    d = NaiveRuntime(Shorten(), budget=1).check(ctx)
    assert d.rewritten_ids == [a.id] and ctx.message(a.id).blocks[0].text == "short"
    assert not ctx.pending and [m.id for m in ctx.messages].index(a.id) == len(ctx) - 3


def test_remove_events_report_the_context_tokens_after_each_removal():
    """Observers (and so the spans' prunegate.context.tokens) see the total after the event."""
    from policies import Observer

    seen: list[tuple[str, int]] = []

    class Recorder(Observer):
        def on_message(self, ctx, message, event, **info):
            if event == "remove":
                seen.append((message.id, ctx.tokens))

    ctx = Context(observer=Recorder())
    a = ctx.append(role="user", text="first " * 20)
    b = ctx.append(role="assistant", text="second " * 30)
    ctx.append(role="user", text="third")
    total = ctx.tokens
    ctx.remove_units([ctx.unit_id_of(a.id), ctx.unit_id_of(b.id)], cause="test")
    assert seen == [(a.id, total - a.tokens), (b.id, total - a.tokens - b.tokens)]
    assert ctx.tokens == total - a.tokens - b.tokens


def test_a_shallow_copy_has_its_own_message_blocks_and_extras_and_shares_payloads():
    payload = {"rows": [{"deep": list(range(3))}]}
    m = Message("m1", "assistant", [Block("tool_use", id="c1", name="search", input=payload, extra={"k": 1}),
                                    Block("text", text="hi")], extra={"x": [1]}, seq=4, tokens=9)
    c = m.shallow_copy()
    assert c == m and type(c) is Message and all(type(b) is Block for b in c.blocks)
    assert c is not m and c.blocks is not m.blocks and all(a is not b for a, b in zip(c.blocks, m.blocks, strict=True))
    assert c.extra is not m.extra and c.blocks[0].extra is not m.blocks[0].extra
    assert c.blocks[0].input is payload  # payloads shared, not copied
    c.id, c.blocks[0].id, c.extra["y"], c.blocks[0].extra["k"] = "t0", "c9", 2, 5  # what appending sets
    assert (m.id, m.blocks[0].id, m.extra, m.blocks[0].extra) == ("m1", "c1", {"x": [1]}, {"k": 1})
