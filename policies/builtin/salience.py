"""Evict the lowest-salience messages first: the policy of the source document.

The scorer sees one message at a time (its age, size, role and whether later messages refer back
to it), the way salience scorers in agent runtimes do. It knows nothing of structure: ungated it
evicts a small tool-call turn and keeps the result a later answer quoted, which orphans that
result. Under the gate the eviction grows to the whole call/result unit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..messages import Message
from ..policy import ContextView, Eviction, Proposal
from . import _params
from ._text import goal, message_kind, salient_terms


@dataclass(frozen=True)
class Features:
    """What the scorer knows about one message."""

    message_id: str
    unit_id: str
    role: str  # system, developer, user, assistant, tool
    kind: str  # text, tool_call, tool_result, summary
    tokens: int
    age: float  # 0.0 for the newest message in the context .. 1.0 for the oldest
    references: int  # later messages mentioning one of its ids, numbers or codes (or its tool call id)


Scorer = Callable[[Message, Features], float]

ROLE_WEIGHT = {
    "system": 1.0,
    "developer": 1.0,
    "user": 1.0,
    "summary": 0.8,
    "assistant": 0.6,
    "tool_call": 0.3,
    "tool_result": 0.35,
}


def default_scorer(message: Message, f: Features) -> float:
    """Higher is more worth keeping, in [0, 1].

    Recency weighs most; then role (user words over assistant prose over tool traffic); small
    messages are cheap to keep; a message a later one refers back to (an id, a number, a code from
    a tool result) is still in use.
    """
    role = ROLE_WEIGHT.get(f.kind if f.kind != "text" else f.role, 0.5)
    size = 1.0 / (1.0 + f.tokens / 250.0)
    referenced = min(1.0, f.references / 2.0)
    return round(0.4 * (1.0 - f.age) + 0.25 * role + 0.1 * size + 0.25 * referenced, 6)


class SaliencePolicy:
    """Score every unpinned message, evict the lowest until the context is at ``target`` × budget.

    ``scorer(message, features) -> float`` replaces :func:`default_scorer`; higher keeps.
    ``Proposal.scores`` holds each candidate unit's best message score (for tracing); each
    :class:`~policies.policy.Eviction` carries its message's own score.
    """

    name = "salience"

    def __init__(self, target: float = 0.8, scorer: Scorer | None = None, max_df: float = 0.25) -> None:
        self.target = _params.fraction(self.name, "target", target)
        self.scorer: Scorer = (
            default_scorer if scorer is None
            else _params.function(self.name, "scorer", scorer, "(message, features) -> float")
        )
        self.max_df = _params.fraction(self.name, "max_df", max_df)

    def features(self, view: ContextView) -> list[tuple[Message, Features, bool]]:
        """(message, features, pinned) for every message, oldest first."""
        pins = view.pinned
        msgs = view.messages()
        n = len(msgs)
        terms = [salient_terms(m.plain_text()) | set(m.call_ids) for m in msgs]
        df: dict[str, int] = {}
        for ts in terms:
            for t in ts:
                df[t] = df.get(t, 0) + 1
        common = max(5, int(self.max_df * n))  # a term most messages carry (a date, a user id) refers to nothing
        later: dict[str, int] = {}  # term -> number of later messages mentioning it
        refs = [0] * n
        for i in range(n - 1, -1, -1):
            own = {t for t in terms[i] if df[t] <= common}
            refs[i] = max((later.get(t, 0) for t in own), default=0)
            for t in terms[i]:
                later[t] = later.get(t, 0) + 1
        out = []
        for i, m in enumerate(msgs):
            uid = view.unit_of(m.id).id
            kind = message_kind(m)
            if view.unit(uid).kind == "summary":
                kind = "summary"
            age = (n - 1 - i) / (n - 1) if n > 1 else 0.0
            f = Features(m.id, uid, m.role, kind, m.tokens, age, refs[i])
            out.append((m, f, uid in pins))
        return out

    def propose(self, view: ContextView) -> Proposal:
        need = goal(view, self.target)
        proposal = Proposal(policy=self.name, notes=f"target {self.target:g} of budget")
        if need <= 0:
            return proposal
        scored = []
        for m, f, pinned in self.features(view):
            if pinned:
                continue
            score = float(self.scorer(m, f))
            scored.append((score, m.seq, m, f))
            proposal.scores[f.unit_id] = max(score, proposal.scores.get(f.unit_id, score))
        scored.sort(key=lambda s: (s[0], s[1]))
        for score, _seq, m, f in scored:
            if need <= 0:
                break
            why = f"salience {score:.3f}: {f.kind}, age {f.age:.2f}, {f.tokens} tokens, {f.references} later references"
            proposal.evictions.append(Eviction((m.id,), score=score, reason=why))
            need -= m.tokens
        return proposal
