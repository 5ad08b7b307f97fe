"""Which decision lost which reference: a lost reference is charged to the prune that evicted its source.

A replay measures retention at every model call (docs/replay.md, "References"): a reference is
*lost* when none of its holders is in the context (with the value still in its text) at the model
call that produced the referring message. Retention says how much was lost; attribution says why:
the decision (prune, spill, summary or rewrite) that last took the reference's *source* out of the
context or rewrote it. That is what the Replay page jumps to from a lost reference, and what the
Compare page counts per tool ("the tools whose results are lost most").

:class:`RemovalTracker` is a :class:`policies.Observer` riding along the replay's context: it
notes every ``remove``/``rewrite`` message event and, at the decision that follows, which decision
(check, step, kind, span) it was. :class:`LostReference` is one row of a replay's results.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from policies.context import Context
from policies.decision import Decision, DecisionKind
from policies.messages import Message
from policies.observer import REMOVE, REWRITE, Observer
from tracer.contract import names as sn

# Attribute keys (docs/spans.md). On a decision span (prune, spill) of a replay: how many references
# were lost because this decision evicted or rewrote their source, and which.
LOST_REFERENCES = sn.LOST_REFERENCES
LOST_REFERRERS = sn.LOST_REFERRERS
LOST_SOURCES = sn.LOST_SOURCES
# On a replay's chat span: the references its request needed and the ones it had lost.
REFERENCES = sn.REFERENCES
REFERENCES_LOST = sn.REFERENCES_LOST
REFERENCES_LOST_SOURCES = sn.REFERENCES_LOST_SOURCES
REFERENCES_LOST_TOOLS = sn.REFERENCES_LOST_TOOLS
REFERENCES_LOST_PRUNE_SEQS = sn.REFERENCES_LOST_PRUNE_SEQS
REFERENCES_LOST_PRUNE_SPANS = sn.REFERENCES_LOST_PRUNE_SPANS

_REMOVING = (DecisionKind.PRUNED, DecisionKind.SPILLED, DecisionKind.FAILED)


@dataclass(frozen=True)
class Removal:
    """The decision that last removed (or rewrote) a message."""

    check: int
    seq: int
    decision: str  # pruned, spilled, failed (a failed check may have spilled first)
    span: Any = None  # the decision span when the replay is traced


@dataclass
class LostReference:
    """One lost reference and the decision it is charged to (None: nothing removed its source, e.g.
    the head of a stream a naive runtime lost)."""

    step: int  # the model call's step (prunegate.seq): where the loss shows
    referrer: str  # the assistant message that needed the value
    source: str  # the most recent earlier message holding it
    tokens: tuple[str, ...]
    tool: str | None  # the tool whose result the source is, if it is one
    prune_check: int | None = None
    prune_seq: int | None = None
    prune_decision: str | None = None
    prune_span_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["tokens"] = list(self.tokens)
        return d


class RemovalTracker(Observer):
    """Remembers, per message id, the decision that last removed or rewrote it.

    ``span_observer`` (a :class:`tracer.spans.observer.SpanObserver`, when the replay is traced) is
    asked for the decision's span; it must be called before this tracker for each decision.
    """

    def __init__(self, span_observer: Any = None) -> None:
        self.span_observer = span_observer
        self.by_message: dict[str, Removal] = {}
        self._pending: list[str] = []

    def on_message(self, ctx: Context, message: Message, event: str, **info: Any) -> None:
        if event == REMOVE or event == REWRITE:
            self._pending.append(message.id)

    def on_decision(self, ctx: Context, decision: Decision) -> None:
        if not self._pending:
            return
        span = None
        if self.span_observer is not None and decision.kind in _REMOVING:
            span = self.span_observer.last_decision_span
        removal = Removal(decision.check, decision.seq, str(decision.kind), span)
        for mid in self._pending:
            self.by_message[mid] = removal
        self._pending.clear()


def tool_names(messages: Iterable[Message]) -> dict[str, str]:
    """message id -> the tool whose result it carries (the first answered call's tool name)."""
    by_call: dict[str, str] = {}
    answers: list[tuple[str, list[str]]] = []
    for m in messages:
        for b in m.blocks:
            if b.call_id is not None and b.name:
                by_call[b.call_id] = b.name
        if m.answered_ids:
            answers.append((m.id, list(m.answered_ids)))
    out = {}
    for mid, ids in answers:
        for cid in ids:
            base = cid.split("~")[0]
            name = by_call.get(cid) or by_call.get(base)
            if name:
                out[mid] = name
                break
    return out


def span_id_of(span: Any) -> str | None:
    """The 16-hex-digit id of a span (None without one)."""
    if span is None:
        return None
    ctx = span.get_span_context()
    return format(ctx.span_id, "016x") if ctx.is_valid else None


def lost_reference(step: int, referrer: str, source: str, tokens: tuple[str, ...], tool: str | None,
                   removal: Removal | None) -> LostReference:
    """A :class:`LostReference` charged to ``removal`` (the source's last removal, if any)."""
    if removal is None:
        return LostReference(step, referrer, source, tokens, tool)
    return LostReference(step, referrer, source, tokens, tool, removal.check, removal.seq, removal.decision,
                         span_id_of(removal.span))


def chat_attributes(references: int, lost: list[LostReference]) -> dict[str, Any]:
    """What a replay's chat span says about the references its request needed."""
    attrs: dict[str, Any] = {REFERENCES: references, REFERENCES_LOST: len(lost)}
    if lost:
        attrs[REFERENCES_LOST_SOURCES] = [x.source for x in lost]
        attrs[REFERENCES_LOST_TOOLS] = [x.tool or "" for x in lost]
        attrs[REFERENCES_LOST_PRUNE_SEQS] = ["" if x.prune_seq is None else str(x.prune_seq) for x in lost]
        attrs[REFERENCES_LOST_PRUNE_SPANS] = [x.prune_span_id or "" for x in lost]
    return attrs


def decision_attributes(lost: Iterable[LostReference]) -> Mapping[str, Any]:
    """What a held decision span says, when it ends, about the references it cost."""
    lost = list(lost)
    return {
        LOST_REFERENCES: len(lost),
        LOST_REFERRERS: [x.referrer for x in lost],
        LOST_SOURCES: sorted({x.source for x in lost}),
    }


__all__ = [
    "LOST_REFERENCES", "LostReference", "Removal", "RemovalTracker", "chat_attributes", "decision_attributes",
    "lost_reference", "span_id_of", "tool_names",
]
