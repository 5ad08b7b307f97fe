"""SpanObserver and TracedSession: the spans of docs/spans.md, their order, and causal links."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.trace import StatusCode

from policies import (
    Context,
    DecisionKind,
    EvictedMessageError,
    Gate,
    HardCeilingExceeded,
    MemorySpillStore,
    Message,
    text_message,
    tool_result,
    tool_use,
)
from policies.naive import NaiveRuntime
from tests.invariants import Scripted
from tests.otel_memory import Recorder, all_attribute_text
from tests.scenarios import history, open_stream, parallel_batch, result
from tracer.spans import SessionConfig, SpanObserver, TracedSession

SECRET = "hunter2-secret-token"


def traced(rec: Recorder, *, gated: bool = True, capture: bool | None = False, **kw) -> tuple[TracedSession, Context]:
    session = TracedSession(rec.provider, SessionConfig(gated=gated, capture_content=capture, **kw))
    ctx = Context(observer=SpanObserver(session), strict=gated, session_id=session.session_id)
    return session, ctx


def decision_child(rec: Recorder, check_span) -> list:
    return rec.children(check_span)


# ---------------------------------------------------------------------------- session shape
def test_every_span_is_in_the_session_trace_with_session_id_and_seq(rec):
    session, ctx = traced(rec, source="synthetic", name="t", provider="anthropic", policy="recency",
                          policy_params={"target": 0.8}, budget=100, hard_ceiling=200)
    history(ctx, turns=2)
    Gate(Scripted(ctx.messages[2].id), budget=100, hard_ceiling=200).check(ctx)
    session.end()
    root = rec.one("prunegate.session")
    assert root.parent is None
    a = root.attributes
    assert a["gen_ai.conversation.id"] == a["prunegate.session.id"] == session.session_id
    assert (a["prunegate.session.source"], a["prunegate.session.name"], a["prunegate.provider"]) == ("synthetic", "t", "anthropic")
    assert a["prunegate.policy.params"] == '{"target":0.8}'
    assert (a["prunegate.gated"], a["prunegate.budget"], a["prunegate.hard_ceiling"]) == (True, 100, 200)
    assert a["prunegate.content_captured"] is False
    checks = {s.context.span_id for s in rec.named("prunegate.budget_check")}
    for s in rec.spans:
        assert s.context.trace_id == root.context.trace_id
        assert s.attributes["prunegate.session.id"] == session.session_id
        assert isinstance(s.attributes["prunegate.seq"], int)
        if s is not root:
            assert s.parent.span_id in checks | {root.context.span_id}


def test_a_session_without_a_ceiling_leaves_the_attribute_out(rec):
    session, _ = traced(rec, budget=50)
    session.end()
    session.end()  # idempotent
    assert "prunegate.hard_ceiling" not in rec.one("prunegate.session").attributes


def test_unknown_source_is_refused(rec):
    with pytest.raises(ValueError, match="session source must be one of"):
        TracedSession(rec.provider, SessionConfig(source="bogus"))


def test_spans_ordered_by_seq_then_start_replay_emission_order(rec):
    session, ctx = traced(rec)
    history(ctx, turns=3)
    parallel_batch(ctx)
    for cid in ("call_weather", "call_hotel", "call_book"):
        ctx.append(result(cid, "ok " * 40))
    Gate(Scripted(ctx.messages[2].id, ctx.messages[3].id), budget=100).check(ctx)
    session.end()
    emitted = [s for s in rec.spans if s.name != "prunegate.session"]
    # spans end in emission order except a check, which ends after its decision child
    ordered = sorted(emitted, key=lambda s: (s.attributes["prunegate.seq"], s.start_time))
    starts = [s.start_time for s in ordered]
    assert starts == sorted(starts) and len(set(starts)) == len(starts)
    appends = [s.attributes["prunegate.seq"] for s in rec.named("prunegate.message")
               if s.attributes["prunegate.event"] == "append"]
    assert appends == sorted(appends) and len(set(appends)) == len(appends)
    # the check starts before the removals it caused
    check = rec.one("prunegate.budget_check")
    removes = [s for s in rec.named("prunegate.message") if s.attributes["prunegate.event"] == "remove"]
    assert removes and all(check.start_time < r.start_time <= check.end_time for r in removes)


# ---------------------------------------------------------------------------- messages and units
def test_message_and_unit_spans_carry_the_structure(rec):
    session, ctx = traced(rec)
    history(ctx, turns=0)
    batch = parallel_batch(ctx)
    r1 = ctx.append(result("call_weather", "sunny"))
    ctx.append(result("call_hotel", "two hotels"))
    ctx.append(result("call_book", "booked"))
    session.end()
    spans = {s.attributes["prunegate.message.id"]: s for s in rec.named("prunegate.message")}
    a = spans[batch.id].attributes
    assert a["prunegate.event"] == "append" and a["prunegate.message.role"] == "assistant"
    assert list(a["prunegate.message.call_ids"]) == ["call_weather", "call_hotel", "call_book"]
    assert list(a["prunegate.message.tool_names"]) == ["get_weather", "search_hotels", "book_flight"]
    assert a["prunegate.message.tokens"] == batch.tokens and a["prunegate.message.closed"] is True
    r = spans[r1.id].attributes
    assert list(r["prunegate.message.answers"]) == ["call_weather"]
    assert r["prunegate.unit.id"] == a["prunegate.unit.id"]  # a result joins its call's unit
    closes = [s for s in rec.named("prunegate.unit.close") if s.attributes["prunegate.unit.id"] == a["prunegate.unit.id"]]
    assert len(closes) == 1, "the batch unit closes once, when its last result arrives"
    c = closes[0].attributes
    assert c["prunegate.unit.kind"] == "batch"
    assert len(c["prunegate.unit.message_ids"]) == 4
    assert sorted(c["prunegate.unit.call_ids"]) == ["call_book", "call_hotel", "call_weather"]
    assert c["prunegate.unit.tokens"] == ctx.units[a["prunegate.unit.id"]].tokens


def test_streaming_events_are_recorded_with_their_size(rec):
    session, ctx = traced(rec, capture=True)
    history(ctx, turns=0)
    ctx.append(Message("", "assistant", [tool_use("c1", "fetch", {})]))
    m = open_stream(ctx, "c1")
    ctx.append_delta(m.id, "hello ")
    ctx.append_delta(m.id, "world")
    ctx.close(m.id)
    session.end()
    events = [(s.attributes["prunegate.event"], s.attributes.get("prunegate.delta.chars"),
               s.attributes.get("prunegate.delta.text"))
              for s in rec.named("prunegate.message") if s.attributes["prunegate.message.id"] == m.id]
    assert events == [("open", None, None), ("delta", 6, "hello "), ("delta", 5, "world"), ("close", None, None)]
    opened = [s for s in rec.named("prunegate.message") if s.attributes["prunegate.message.id"] == m.id][0]
    assert opened.attributes["prunegate.message.closed"] is False


def test_the_event_stream_can_be_rebuilt_from_spans_without_content(rec):
    session, ctx = traced(rec, capture=False)
    history(ctx, turns=2)
    parallel_batch(ctx)
    for cid in ("call_weather", "call_hotel", "call_book"):
        ctx.append(result(cid, "data"))
    session.end()
    rebuilt = sorted((s for s in rec.named("prunegate.message") if s.attributes["prunegate.event"] == "append"),
                     key=lambda s: s.attributes["prunegate.seq"])
    got = [(s.attributes["prunegate.message.id"], s.attributes["prunegate.message.role"],
            list(s.attributes["prunegate.message.call_ids"]), list(s.attributes["prunegate.message.answers"]),
            s.attributes["prunegate.message.tokens"]) for s in rebuilt]
    want = [(m.id, m.role, m.call_ids, m.answered_ids, m.tokens) for m in ctx.messages]
    assert got == want


# ---------------------------------------------------------------------------- every decision kind
def pending_context(rec: Recorder, **kw) -> tuple[TracedSession, Context]:
    session, ctx = traced(rec, **kw)
    history(ctx, turns=3)
    parallel_batch(ctx)
    ctx.append(result("call_weather", "sunny " * 30))
    return session, ctx


def check_and_child(rec: Recorder, kind: str) -> tuple:
    checks = [s for s in rec.named("prunegate.budget_check") if s.attributes["prunegate.decision"] == kind]
    assert len(checks) == 1
    return checks[0], rec.children(checks[0])


def test_within_budget_is_a_check_without_a_child(rec):
    session, ctx = traced(rec)
    history(ctx, turns=1)
    d = Gate(Scripted(), budget=10_000).check(ctx)
    assert d.kind == DecisionKind.WITHIN_BUDGET
    check, children = check_and_child(rec, "within_budget")
    assert children == []
    a = check.attributes
    assert a["prunegate.check"] == 1 and a["prunegate.seq"] == d.seq
    assert a["prunegate.tokens.before"] == a["prunegate.tokens.after"] == ctx.tokens
    assert (a["prunegate.pending_calls"], a["prunegate.open_messages"], a["prunegate.gated"]) == (0, 0, True)


@pytest.mark.parametrize("mode", ["grow", "shrink"])
def test_prune_span_says_what_was_proposed_grown_or_shrunk(rec, mode):
    session, ctx = traced(rec)
    history(ctx, turns=2)
    a, _ = ctx.append(Message("", "assistant", [tool_use("c1", "lookup", {})])), None
    r = ctx.append(Message("", "tool", [tool_result("c1", "data " * 80)]))
    filler = ctx.messages[2]
    ctx.append(text_message("", "user", "next question"))
    before = ctx.tokens
    d = Gate(Scripted(a.id, filler.id), budget=60, mode=mode).check(ctx)
    assert d.kind == DecisionKind.PRUNED
    check, children = check_and_child(rec, "pruned")
    assert [c.name for c in children] == ["prunegate.prune"]
    p = children[0].attributes
    unit = d.grown_units[0] if mode == "grow" else d.shrunk_units[0]
    assert p["prunegate.policy"] == "scripted" and p["prunegate.gated"] is True
    assert list(p["prunegate.proposal.ids"]) == [a.id, filler.id]
    assert '"evictions"' in p["prunegate.proposal"] and p["prunegate.scores"] == "{}"
    assert list(p["prunegate.pruned.ids"]) == d.pruned_ids
    assert list(p["prunegate.pruned.units"]) == d.pruned_units
    if mode == "grow":
        assert list(p["prunegate.grown.units"]) == [unit] and r.id in p["prunegate.pruned.ids"]
    else:
        assert list(p["prunegate.shrunk.units"]) == [unit] and a.id not in p["prunegate.pruned.ids"]
    assert p["prunegate.tokens.before"] == before and p["prunegate.tokens.after"] == ctx.tokens
    assert p["prunegate.budget_met"] is d.budget_met
    assert check.attributes["prunegate.reason"] == "over_budget"


def test_defer_span_names_the_blocking_units(rec):
    session, ctx = pending_context(rec)
    d = Gate(Scripted(ctx.messages[2].id), budget=50).check(ctx)
    assert d.kind == DecisionKind.DEFERRED
    check, children = check_and_child(rec, "deferred")
    assert [c.name for c in children] == ["prunegate.defer"]
    a = children[0].attributes
    assert a["prunegate.reason"] == "pending_calls"
    assert list(a["prunegate.blocking.units"]) == d.blocking_units and d.blocking_units
    assert check.attributes["prunegate.pending_calls"] == 2


def test_spill_then_reinject_spans(rec):
    session, ctx = pending_context(rec)
    store = MemorySpillStore()
    gate = Gate(Scripted(), budget=100, hard_ceiling=200, spill_store=store)
    d = gate.check(ctx)
    assert d.kind == DecisionKind.SPILLED
    _, children = check_and_child(rec, "spilled")
    assert [c.name for c in children] == ["prunegate.spill"]
    assert list(children[0].attributes["prunegate.spilled.units"]) == d.spilled_units and d.spilled_units
    key = d.spilled_units[0]
    back = gate.reinject(ctx, key)
    assert back.kind == DecisionKind.REINJECTED
    _, children = check_and_child(rec, "reinjected")
    assert [c.name for c in children] == ["prunegate.reinject"]
    assert list(children[0].attributes["prunegate.reinjected.units"]) == [key]
    reinjected = [s for s in rec.named("prunegate.message") if s.attributes["prunegate.event"] == "reinject"]
    assert reinjected and all(s.attributes["prunegate.unit.id"] == key for s in reinjected)


def test_fail_span_is_an_error_and_the_exception_still_reaches_the_caller(rec):
    session, ctx = pending_context(rec)
    with pytest.raises(HardCeilingExceeded):
        Gate(Scripted(), budget=100, hard_ceiling=150).check(ctx)
    _, children = check_and_child(rec, "failed")
    assert [c.name for c in children] == ["prunegate.fail"]
    fail = children[0]
    assert fail.status.status_code == StatusCode.ERROR
    assert "over the hard ceiling" in fail.attributes["prunegate.error"]


# ---------------------------------------------------------------------------- violations and their cause
def naive_orphans(rec: Recorder):
    """A naive runtime: check #1 evicts the batch's assistant turn, check #2 evicts filler."""
    session, ctx = traced(rec, gated=False)
    history(ctx, turns=2)
    batch = parallel_batch(ctx)
    for cid in ("call_weather", "call_hotel", "call_book"):
        ctx.append(result(cid, "ok"))
    first = NaiveRuntime(Scripted(batch.id, name="salience"), budget=10)
    first.check(ctx)
    second = NaiveRuntime(Scripted(ctx.messages[2].id, name="recency"), budget=10)
    second.checks = 1
    second.check(ctx)
    return session, ctx, batch


def test_orphaned_results_link_to_the_prune_that_evicted_their_call(rec):
    session, ctx, batch = naive_orphans(rec)
    found = session.check_request(ctx.render("anthropic"), "anthropic", seq=ctx.seq)
    assert [v.code for v in found] == ["orphan_tool_result"]
    session.end()
    prunes = rec.named("prunegate.prune")
    assert len(prunes) == 2 and all(p.attributes["prunegate.gated"] is False for p in prunes)
    cause = next(p for p in prunes if batch.id in p.attributes["prunegate.pruned.ids"])
    violation = rec.one("prunegate.violation")
    v = violation.attributes
    assert v["prunegate.violation.code"] == "orphan_tool_result"
    assert "unexpected `tool_use_id` found in `tool_result` blocks" in v["prunegate.violation.message"]
    assert sorted(v["prunegate.violation.ids"]) == ["call_book", "call_hotel", "call_weather"]
    assert v["prunegate.violation.evicted_id"] == batch.id and v["prunegate.violation.cause_check"] == 1
    assert isinstance(v["prunegate.violation.index"], int)
    assert len(violation.links) == 1
    link = violation.links[0]
    assert link.context.span_id == cause.context.span_id and link.context.trace_id == cause.context.trace_id
    assert dict(link.attributes) == {"prunegate.link": "caused_by"}
    assert rec.one("prunegate.session").attributes["prunegate.violations"] == 1


def test_the_gate_leaves_nothing_to_link(rec):
    session, ctx = traced(rec)
    history(ctx, turns=2)
    batch = parallel_batch(ctx)
    for cid in ("call_weather", "call_hotel", "call_book"):
        ctx.append(result(cid, "ok"))
    ctx.append(text_message("", "user", "thanks"))
    Gate(Scripted(batch.id), budget=10).check(ctx)
    assert batch.id not in ctx
    assert session.check_request(ctx.render("openai"), "openai", seq=ctx.seq) == []
    assert rec.named("prunegate.violation") == []


def test_a_stream_writing_into_an_evicted_message_links_by_message_id(rec):
    session, ctx = traced(rec, gated=False)
    history(ctx, turns=1)
    ctx.append(Message("", "assistant", [tool_use("c1", "fetch", {})]))
    m = open_stream(ctx, "c1")
    ctx.append_delta(m.id, "{\"head\": ")
    NaiveRuntime(Scripted(m.id), budget=10).check(ctx)
    with pytest.raises(EvictedMessageError):
        ctx.append_delta(m.id, "\"tail\"}")
    session.violation("lost_stream_head", f"stream wrote into evicted message '{m.id}'", message_ids=[m.id],
                      seq=ctx.seq)
    link = rec.one("prunegate.violation").links[0]
    assert link.context.span_id == rec.one("prunegate.prune").context.span_id


def test_a_side_effect_repeated_after_a_failed_request_is_a_linked_violation(rec):
    session, ctx, batch = naive_orphans(rec)
    with session.tool("book_flight", "call_book", arguments={"to": "LIS"}, side_effect=True):
        pass
    session.check_request(ctx.render("openai"), "openai", seq=ctx.seq)  # the 400
    with session.tool("book_flight", "call_book_2", arguments={"to": "LIS"}, side_effect=True):
        pass
    with session.tool("get_weather", "call_w2", arguments={"city": "Lisbon"}):
        pass
    tools = {s.attributes["gen_ai.tool.call.id"]: s.attributes for s in rec.spans if s.name.startswith("execute_tool")}
    assert tools["call_book"]["prunegate.tool.retry"] is False
    assert tools["call_book_2"]["prunegate.tool.retry"] is True
    assert tools["call_book_2"]["gen_ai.operation.name"] == "execute_tool"
    assert tools["call_book_2"]["prunegate.tool.side_effect"] is True
    dup = [s for s in rec.named("prunegate.violation")
           if s.attributes["prunegate.violation.code"] == "duplicated_side_effect"]
    assert len(dup) == 1
    cause = next(p for p in rec.named("prunegate.prune") if batch.id in p.attributes["prunegate.pruned.ids"])
    assert dup[0].links[0].context.span_id == cause.context.span_id
    assert list(dup[0].attributes["prunegate.violation.ids"]) == ["call_book", "call_book_2"]


def test_a_repeated_call_without_a_failure_in_between_is_not_a_retry(rec):
    session, _ = traced(rec)
    for cid in ("a", "b"):
        with session.tool("book_flight", cid, arguments={"to": "LIS"}, side_effect=True):
            pass
    assert [s.attributes["prunegate.tool.retry"] for s in rec.spans if s.name == "execute_tool book_flight"] == [False, False]
    assert rec.named("prunegate.violation") == []


# ---------------------------------------------------------------------------- content capture
def secret_context(rec: Recorder, **kw) -> tuple[TracedSession, Context]:
    session, ctx = traced(rec, **kw)
    ctx.append(text_message("", "system", "be brief"))
    ctx.append(text_message("", "user", f"my password is {SECRET}"))
    ctx.append(Message("", "assistant", [tool_use("c1", "login", {"password": SECRET})]))
    m = open_stream(ctx, "c1")
    ctx.append_delta(m.id, f"token={SECRET}")
    ctx.close(m.id)
    chat = session.chat("m", provider="anthropic", seq=ctx.seq)
    chat.set_input(ctx.messages)
    chat.response({"content": [{"type": "text", "text": SECRET}], "usage": {"input_tokens": 3, "output_tokens": 4}})
    with session.tool("login", "c2", arguments={"password": SECRET}) as t:
        t.result(SECRET)
    session.end()
    return session, ctx


def test_content_capture_off_records_no_content(rec, monkeypatch):
    monkeypatch.delenv("PRUNEGATE_CAPTURE_CONTENT", raising=False)
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    secret_context(rec, capture=None)
    assert SECRET not in all_attribute_text(rec.spans)
    keys = {k for s in rec.spans for k in s.attributes}
    assert not keys & {"prunegate.message.content", "prunegate.delta.text", "gen_ai.input.messages",
                       "gen_ai.output.messages", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"}
    chat = rec.one("chat m").attributes
    assert (chat["gen_ai.usage.input_tokens"], chat["gen_ai.usage.output_tokens"]) == (3, 4)


@pytest.mark.parametrize("env", ["PRUNEGATE_CAPTURE_CONTENT", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"])
def test_capture_is_opt_in_through_the_environment(rec, monkeypatch, env):
    monkeypatch.delenv("PRUNEGATE_CAPTURE_CONTENT", raising=False)
    monkeypatch.setenv(env, "1" if env.startswith("PRUNEGATE") else "true")
    session, _ = secret_context(rec, capture=None)
    assert session.capture is True
    assert SECRET in all_attribute_text(rec.spans)
    assert rec.one("prunegate.session").attributes["prunegate.content_captured"] is True


def test_the_redaction_hook_is_applied_to_everything_recorded(rec):
    secret_context(rec, capture=True, redact=lambda s: s.replace(SECRET, "[gone]"))
    text = all_attribute_text(rec.spans)
    assert SECRET not in text
    assert text.count("[gone]") >= 6  # user text, tool input, delta, stream close, chat in/out, tool args/result
    user = next(s for s in rec.named("prunegate.message") if s.attributes["prunegate.message.role"] == "user")
    assert user.attributes["prunegate.message.content"] == '[{"type":"text","text":"my password is [gone]"}]'
    assert '"tool_call"' in rec.one("chat m").attributes["gen_ai.input.messages"]


def test_a_failing_redaction_hook_records_no_content_and_breaks_nothing(rec):
    def broken(_: str) -> str:
        raise RuntimeError("boom")

    session, ctx = secret_context(rec, capture=True, redact=broken)
    assert SECRET not in all_attribute_text(rec.spans)
    assert ctx.observer_errors.count == 0
    assert len(rec.named("prunegate.message")) == 6  # system, user, assistant, open, delta, close
    assert session.redaction_failures > 0


# ---------------------------------------------------------------------------- tracing never breaks the agent
class Exploding(SpanProcessor):
    """A real span processor that fails on every span end (a broken exporter pipeline)."""

    def on_end(self, span) -> None:
        raise OSError("disk on fire")


def test_a_broken_pipeline_never_reaches_the_agent(rec):
    rec.provider.add_span_processor(Exploding())
    session, ctx = traced(rec)
    history(ctx, turns=2)
    victim = ctx.messages[2].id
    d = Gate(Scripted(victim), budget=20).check(ctx)
    assert d.kind == DecisionKind.PRUNED and d.pruned_ids == [victim] and victim not in ctx
    session.violation("orphan_tool_result", "x")
    with session.tool("t", "c"):
        pass
    session.chat("m").response({"usage": {}})
    session.end()
    assert session.tracer_errors > 0


class BuggyObserver(SpanObserver):
    """The real observer with a bug injected after it records each message."""

    def on_message(self, ctx, message, event, **info):
        super().on_message(ctx, message, event, **info)
        raise KeyError("bug")


def test_an_observer_error_is_counted_by_the_context_and_never_reaches_the_agent(rec):
    session = TracedSession(rec.provider)
    ctx = Context(observer=BuggyObserver(session))
    history(ctx, turns=2)
    victim = ctx.messages[2].id
    d = Gate(Scripted(victim), budget=20).check(ctx)
    assert d.pruned_ids == [victim] and victim not in ctx
    assert ctx.observer_errors.count == len(ctx) + 1 + 1  # every append, and the removal
    assert isinstance(ctx.observer_errors.last, KeyError)
    assert rec.one("prunegate.prune")


class Summarizer:
    """Replaces the two oldest unpinned units with one summary and rewrites one message shorter."""

    name = "summarizer"

    def __init__(self, units: tuple[str, ...], rewrite: str) -> None:
        self.units, self.rewrite = units, rewrite

    def propose(self, view):
        from policies import Proposal, Rewrite, Summary

        summary = text_message("", "assistant", "summary of earlier steps")
        return Proposal(self.name, summaries=[Summary(self.units, summary, "old", "test")],
                        rewrites=[Rewrite(self.rewrite, text_message("", "assistant", "short"))])


def test_summaries_and_rewrites_are_recorded_and_their_messages_mapped_to_the_prune(rec):
    session, ctx = traced(rec)
    history(ctx, turns=4)
    units = tuple(ctx.unit_id_of(m.id) for m in ctx.messages[2:4])
    rewritten = ctx.messages[6].id
    gone = [m.id for m in ctx.messages[2:4]]
    d = Gate(Summarizer(units, rewritten), budget=50).check(ctx)
    assert d.kind == DecisionKind.PRUNED and d.summarized_units == list(units)
    p = rec.one("prunegate.prune").attributes
    assert list(p["prunegate.summarized.units"]) == list(units)
    assert p["prunegate.summary.id"] == d.summary_id and list(p["prunegate.rewritten.ids"]) == [rewritten]
    events = {(s.attributes["prunegate.event"], s.attributes["prunegate.message.id"]): s.attributes
              for s in rec.named("prunegate.message")}
    assert list(events[("append", d.summary_id)]["prunegate.message.summary_of"]) == list(units)
    assert events[("rewrite", rewritten)]["prunegate.message.tokens_before"] > ctx.message(rewritten).tokens
    assert all(("remove", m) in events for m in gone)
    cause = session.cause_of(message_ids=[gone[0]])
    assert cause is not None and cause.span_context.span_id == rec.one("prunegate.prune").context.span_id


def test_a_missing_result_links_to_the_prune_that_evicted_the_result(rec):
    session, ctx = traced(rec, gated=False)
    history(ctx, turns=1)
    ctx.append(Message("", "assistant", [tool_use("c1", "fetch", {})]))
    res = ctx.append(Message("", "tool", [tool_result("c1", "data")]))
    ctx.append(text_message("", "user", "next"))
    NaiveRuntime(Scripted(ctx.messages[2].id, name="a"), budget=10).check(ctx)
    NaiveRuntime(Scripted(res.id, name="b"), budget=10).check(ctx)
    found = session.check_request(ctx.render("anthropic"), "anthropic", seq=ctx.seq)
    assert [v.code for v in found] == ["missing_tool_result"]
    cause = next(p for p in rec.named("prunegate.prune") if res.id in p.attributes["prunegate.pruned.ids"])
    violation = rec.one("prunegate.violation")
    assert violation.links[0].context.span_id == cause.context.span_id
    assert violation.attributes["prunegate.violation.evicted_id"] == res.id
