"""The gate's observer, implemented with OpenTelemetry spans (the contract is docs/spans.md).

:class:`SpanObserver` turns what a :class:`~policies.Context` and a :class:`~policies.Gate` (or
the ungated :class:`~policies.naive.NaiveRuntime`) report into spans of a
:class:`~tracer.spans.session.TracedSession`: ``prunegate.message`` per message event,
``prunegate.unit.close``, and ``prunegate.budget_check`` with one child span for its decision.
It records each message's own data only (never the whole context), so an event costs the same
whatever the size of the context. Message content is recorded only when the session captures it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from policies.context import Context, Unit
from policies.decision import Decision, DecisionKind
from policies.messages import Message
from policies.observer import DELTA, REINJECT, REMOVE, REWRITE, Observer
from tracer.contract import names as sn
from tracer.spans import openinference as _oi
from tracer.spans import redact as _redact
from tracer.spans.direct import put_clean
from tracer.spans.session import TracedSession

DECISION_SPANS: dict[DecisionKind, str] = {
    DecisionKind.PRUNED: sn.PRUNE,
    DecisionKind.DEFERRED: sn.DEFER,
    DecisionKind.SPILLED: sn.SPILL,
    DecisionKind.REINJECTED: sn.REINJECT,
    DecisionKind.FAILED: sn.FAIL,
}
_HOLDABLE = (DecisionKind.PRUNED, DecisionKind.SPILLED, DecisionKind.FAILED)
_IN_CHECK = (REMOVE, REWRITE, REINJECT)  # events that only happen inside a budget check (or a trimmer)
_NO_CONTENT = (REMOVE,)
# a message event's keys, bound once (on_message runs for every message event)
_EVENT, _MESSAGE_ID, _ROLE, _TOKENS, _CONTEXT_TOKENS, _CLOSED = (
    sn.EVENT, sn.MESSAGE_ID, sn.MESSAGE_ROLE, sn.MESSAGE_TOKENS, sn.CONTEXT_TOKENS, sn.MESSAGE_CLOSED)
_CALL_IDS, _ANSWERS, _TOOL_NAMES, _UNIT_ID, _CAUSE = (
    sn.MESSAGE_CALL_IDS, sn.MESSAGE_ANSWERS, sn.MESSAGE_TOOL_NAMES, sn.UNIT_ID, sn.MESSAGE_CAUSE)
# a budget check's keys, likewise (record_decision runs for every check)
_CHECK, _DECISION, _REASON, _POLICY, _TOKENS_BEFORE, _TOKENS_AFTER, _BUDGET, _HARD_CEILING = (
    sn.CHECK, sn.DECISION, sn.REASON, sn.POLICY, sn.TOKENS_BEFORE, sn.TOKENS_AFTER, sn.BUDGET, sn.HARD_CEILING)
_TOKENS_OVERHEAD, _PENDING_CALLS, _OPEN_MESSAGES, _GATED = (
    sn.TOKENS_OVERHEAD, sn.PENDING_CALLS, sn.OPEN_MESSAGES, sn.GATED)
_SESSION_ID, _SEQ, _OI_KIND = sn.SESSION_ID, sn.SEQ, _oi.SPAN_KIND


class SpanObserver(Observer):
    """A :class:`policies.Observer` that writes spans into ``session``.

    ``gated`` says whether a gate (True) or a naive runtime (False) makes the decisions; it
    defaults to the session's flag and lands on every budget check and prune span.

    ``hold_decisions`` (replays): decision spans that can remove messages (prune, spill, fail) are
    not ended at once but kept in :attr:`held` with the time they would have ended, so attributes
    known only later (the references a prune cost) can still be set; :meth:`end_held` ends them
    with that time.
    """

    def __init__(self, session: TracedSession, *, gated: bool | None = None, hold_decisions: bool = False) -> None:
        self.session = session
        self.hold_decisions = hold_decisions
        self.held: list[tuple[trace.Span, int]] = []
        self.gated = session.gated if gated is None else gated
        self._unit_of: dict[str, str] = {}  # message id -> last known unit (removed messages have none)
        self._removed: dict[str, tuple[str, ...]] = {}  # removed since the last decision: id -> its call ids
        self._reserved: tuple[int, int] | None = None  # start times for the check in progress
        self.checks = 0
        self.last_decision_span: trace.Span | None = None
        self.parent: trace.Span | None = None  # the open ``chat`` span whose request the checks gate, if any
        self._full = session.detail == "full"  # else message events and unit closures ride on check spans
        self._every_check = session.detail != "decisions"  # else within-budget checks are no span
        # the OpenInference kind of a check and of each decision span: written into their attributes with
        # the session id and seq (``ready``), so the session skips its pass over them (round 12)
        self._kinds = {n: session.oi_kind(n) for n in (sn.BUDGET_CHECK, *DECISION_SPANS.values())}
        self._ready = None not in self._kinds.values()

    # ------------------------------------------------------------------ messages and units
    def on_message(self, ctx: Context, message: Message, event: str, **info: Any) -> None:
        s = self.session
        if event in _IN_CHECK or "summary_of" in info:
            self._reserve()
        mid = message.id
        uid = ctx.unit_id_of(mid)
        if uid is None:
            uid = self._unit_of.get(mid)
        else:
            self._unit_of[mid] = uid
        call_ids, answers, tool_names = message.tool_links()
        # built as the SDK stores them (no None, sequences as tuples of str: what put_clean would
        # make of them), so a held event needs no cleaning pass (docs/performance.md, round 8)
        attrs: dict[str, Any] = {
            _EVENT: event,
            _MESSAGE_ID: mid,
            _ROLE: message.role,
            _TOKENS: message.tokens,
            _CONTEXT_TOKENS: ctx.tokens,
            _CLOSED: message.closed,
            _CALL_IDS: call_ids,
            _ANSWERS: answers,
            _TOOL_NAMES: tool_names,
        }
        if uid is not None:
            attrs[_UNIT_ID] = uid
        if info or s.capture:
            cause = info.get("cause")
            if type(cause) is str and len(info) == 1 and not s.capture:  # a removal: its cause, a str, is clean
                attrs[_CAUSE] = cause
            else:
                self._rare_attributes(s, message, event, info, attrs)
        if event == REMOVE:
            self._removed[mid] = call_ids + answers
        if self._full:
            s.emit(sn.MESSAGE, attrs, seq=ctx.seq)
        else:
            s.hold_clean(sn.MESSAGE, attrs, ctx.seq)

    @staticmethod
    def _rare_attributes(s: TracedSession, message: Message, event: str, info: dict[str, Any],
                         attrs: dict[str, Any]) -> None:
        """What only some message events record (a cause, a delta, content, a summary), cleaned."""
        extra: dict[str, Any] = {}
        if "cause" in info:
            extra[sn.MESSAGE_CAUSE] = info["cause"]
        if event == DELTA:
            chars = int(info.get("delta_chars", 0))
            extra[sn.DELTA_CHARS] = chars
            if s.capture:
                text = s.content(_redact.safe_redact, _tail_text(message, chars))
                if text is not None:
                    extra[sn.DELTA_TEXT] = text
        elif s.capture and event not in _NO_CONTENT:
            content = s.content(_redact.message_content_json, message)
            if content is not None:
                extra[sn.MESSAGE_CONTENT] = content
        if "summary_of" in info:
            extra[sn.MESSAGE_SUMMARY_OF] = list(info["summary_of"])
        if "tokens_before" in info:
            extra[sn.MESSAGE_TOKENS_BEFORE] = info["tokens_before"]
        if s.capture and event in ("append", "open") and "summary_of" not in info:
            s.note_arrival(message.role, " ".join(b.text or "" for b in message.blocks if b.type == "text").strip())
        if extra:
            put_clean(attrs, extra)

    def on_unit_closed(self, ctx: Context, unit: Unit) -> None:
        for mid in unit.message_ids:
            self._unit_of[mid] = unit.id
        attrs = {  # as the SDK stores them (see on_message)
            sn.UNIT_ID: unit.id,
            sn.UNIT_KIND: unit.kind,
            sn.UNIT_TOKENS: unit.tokens,
            sn.UNIT_MESSAGE_IDS: tuple(unit.message_ids),
            sn.UNIT_CALL_IDS: tuple(sorted(unit.call_ids)),
        }
        if self._full:
            self.session.emit(sn.UNIT_CLOSE, attrs, seq=ctx.seq)
        else:
            self.session.hold_clean(sn.UNIT_CLOSE, attrs, ctx.seq)

    # ------------------------------------------------------------------ decisions
    def record_decision(self, ctx: Context, d: Decision, *, gated: bool | None = None,
                        extra: Mapping[str, Any] | None = None,
                        removed: Iterable[tuple[str, Sequence[str]]] | None = None) -> trace.Span | None:
        """Write the budget check and its decision span; remember what the decision evicted.

        ``extra`` adds attributes to the decision span; ``removed`` gives (message id, call ids)
        pairs the decision evicted when they were not reported through ``on_message``.
        Returns the decision span (None for ``within_budget``).
        """
        s = self.session
        gated = self.gated if gated is None else gated
        self.checks += 1
        reserved, self._reserved = self._reserved, None
        name = DECISION_SPANS.get(d.kind)
        if name is None and not self._every_check:  # within budget at decisions: no span, nothing to build
            if s.metrics is not None:
                s.metrics.decision(d, gated, s.source)
            self._removed.clear()
            return None
        check_attrs = {
            _CHECK: d.check,
            _DECISION: str(d.kind),
            _REASON: d.reason,
            _POLICY: d.policy,
            _TOKENS_BEFORE: d.tokens_before,
            _TOKENS_AFTER: d.tokens_after,
            _BUDGET: d.budget,
            _HARD_CEILING: d.hard_ceiling,
            _TOKENS_OVERHEAD: d.overhead_tokens,
            _PENDING_CALLS: len(ctx.pending),
            _OPEN_MESSAGES: len(ctx.open_ids),
            _GATED: gated,
            _SESSION_ID: s.session_id,  # what the session would add (ready), in its order
            _SEQ: d.seq,
            _OI_KIND: self._kinds[sn.BUDGET_CHECK],
        }
        if d.hard_ceiling is None:  # left out when stored anyway; leaving it out here is cheaper
            del check_attrs[_HARD_CEILING]
        # ready: the check (and its decision) written as they are; not for a held decision (a span object)
        # or ``extra`` attributes (they may name anything): the session's pass adds what it adds then
        ready = self._ready and not extra and type(d.seq) is int and not (self.hold_decisions and d.kind in _HOLDABLE)
        if not ready:
            del check_attrs[_SESSION_ID], check_attrs[_SEQ], check_attrs[_OI_KIND]
        if s.metrics is not None:
            s.metrics.decision(d, gated, s.source)
        parent = self.parent
        if name is None:  # within budget (most checks): no child, so one instant span (one record)
            start, end = s.clock_pair(reserved[0]) if reserved else s.clock_back(d.duration_ns)
            s.emit_at(sn.BUDGET_CHECK, check_attrs, d.seq, start, end, parent, () if self._full else s.take_held(),
                      owned=True, ready=ready)
            self._removed.clear()
            return None
        if reserved is None:
            t_check = s.clock_back(d.duration_ns)[0]
            t_decision = t_check + 1  # the decision took the gate's time too
        else:
            t_check, t_decision = reserved
        events = () if self._full else s.take_held()  # (after the clock: as when the check span started)
        attrs = decision_attributes(d, gated)
        if extra:
            attrs.update(extra)
        elif ready:
            attrs[_SESSION_ID] = s.session_id
            attrs[_SEQ] = d.seq
            attrs[_OI_KIND] = self._kinds[name]
        failed = d.kind == DecisionKind.FAILED
        if self.hold_decisions and d.kind in _HOLDABLE:  # ended later (end_held): a span that stays open
            check = s.start_span(sn.BUDGET_CHECK, check_attrs, seq=d.seq, parent=parent, start_time=t_check)
            if events:
                s.add_events(check, events)
            span = s.start_span(name, attrs, seq=d.seq, parent=check, start_time=t_decision)
            if failed:
                span.set_status(Status(StatusCode.ERROR, d.error or "failed"))
            self.held.append((span, s.clock()))
            s.end_span(check)
        else:  # both end now: two records, no span objects (docs/performance.md, round 10)
            span = s.emit_pair(sn.BUDGET_CHECK, check_attrs, name, attrs, seq=d.seq, start=t_check,
                               child_start=t_decision, parent=parent, events=events,
                               child_error=(d.error or "failed") if failed else None, owned=True, ready=ready)
        gone = self._evicted(ctx, d)
        pairs: list[tuple[str, Sequence[str]]] = [(mid, self._removed.get(mid, ())) for mid in gone]
        if removed is not None:
            pairs.extend(removed)
        if pairs:
            s.note_eviction(span, pairs, check=d.check, decision=name)
        self.last_decision_span = span
        self._removed.clear()
        return span

    # the gate's report, written as it is (one call frame less per check); the span it returns is unused
    on_decision = record_decision  # type: ignore[assignment]  # returns the decision span besides

    def end_held(self, attributes_of: Any = None) -> None:
        """End the held decision spans at the times they would have ended; ``attributes_of(span)``
        gives attributes to set first (a mapping, or None)."""
        held, self.held = self.held, []
        for span, end_time in held:
            attrs = attributes_of(span) if attributes_of is not None else None
            self.session.end_span(span, attrs, end_time=end_time)

    def _evicted(self, ctx: Context, d: Decision) -> list[str]:
        out = list(d.pruned_ids)
        for uid in d.spilled_units:
            record = ctx.spilled.get(uid)
            if record is not None:
                out.extend(record.message_ids)
        if d.summarized_units:
            units = set(d.summarized_units)
            out.extend(m for m in self._removed if self._unit_of.get(m) in units)
        return out

    def begin_check(self) -> None:
        """The gate is about to check: the check span starts now, so it lasts as long as the gate took
        (without this, it starts ``Decision.duration_ns`` before it is reported)."""
        self._reserved = self.session.clock_pair()

    def _reserve(self) -> None:
        """Start times for the budget check in progress, taken before its first removal is recorded."""
        if self._reserved is None:
            self._reserved = self.session.clock_pair()


def decision_attributes(d: Decision, gated: bool | None) -> dict[str, Any]:
    """The attributes of a decision span (docs/spans.md), by decision kind."""
    if d.kind == DecisionKind.PRUNED:  # one dict (a prune is the costliest decision to record)
        proposal = d.proposal
        return {
            _CHECK: d.check,
            _REASON: d.reason,
            _TOKENS_BEFORE: d.tokens_before,
            _TOKENS_AFTER: d.tokens_after,
            _GATED: gated,
            _POLICY: d.policy,
            sn.PROPOSAL: _redact.proposal_json(proposal) if proposal is not None else None,
            sn.PROPOSAL_IDS: list(d.proposed_ids),
            sn.SCORES: (_redact.dumps(proposal.scores) if proposal.scores else "{}") if proposal is not None else "{}",
            sn.PRUNED_UNITS: list(d.pruned_units),
            sn.PRUNED_IDS: list(d.pruned_ids),
            sn.GROWN_UNITS: list(d.grown_units),
            sn.SHRUNK_UNITS: list(d.shrunk_units),
            sn.SKIPPED_UNITS: list(d.skipped_units),
            sn.REWRITTEN_IDS: list(d.rewritten_ids),
            sn.SUMMARIZED_UNITS: list(d.summarized_units),
            sn.SUMMARY_ID: d.summary_id,
            sn.BUDGET_MET: d.budget_met,
            sn.ERROR: d.error,
        }
    attrs: dict[str, Any] = {
        _CHECK: d.check,
        _REASON: d.reason,
        _TOKENS_BEFORE: d.tokens_before,
        _TOKENS_AFTER: d.tokens_after,
        _GATED: gated,
        _POLICY: d.policy,
    }
    if d.kind == DecisionKind.DEFERRED:
        attrs[sn.BLOCKING_UNITS] = list(d.blocking_units)
    elif d.kind == DecisionKind.SPILLED:
        attrs[sn.SPILLED_UNITS] = list(d.spilled_units)
    elif d.kind == DecisionKind.REINJECTED:
        attrs[sn.REINJECTED_UNITS] = list(d.reinjected_units)
    elif d.kind == DecisionKind.FAILED:
        attrs[sn.ERROR] = d.error or ""
        attrs[sn.SPILLED_UNITS] = list(d.spilled_units)
        attrs[sn.BLOCKING_UNITS] = list(d.blocking_units)
    # what the same check also did or considered, when anything (a spill may follow a prune)
    for key, value in (
        (sn.PROPOSAL_IDS, d.proposed_ids),
        (sn.PRUNED_UNITS, d.pruned_units),
        (sn.PRUNED_IDS, d.pruned_ids),
        (sn.GROWN_UNITS, d.grown_units),
        (sn.SHRUNK_UNITS, d.shrunk_units),
        (sn.SKIPPED_UNITS, d.skipped_units),
    ):
        if value:
            attrs[key] = list(value)
    if d.error and sn.ERROR not in attrs:
        attrs[sn.ERROR] = d.error
    return attrs


def _tail_text(message: Message, chars: int) -> str:
    """The last ``chars`` characters streamed into the message's last block."""
    if not message.blocks or chars <= 0:
        return ""
    b = message.blocks[-1]
    text = b.text if b.text is not None else (b.content if isinstance(b.content, str) else "")
    return text[-chars:] if text else ""
