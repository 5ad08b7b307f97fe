"""The policy interface: a policy reads a view of the context and proposes; the gate decides.

A policy never mutates the context. It returns a :class:`Proposal` of evictions (message ids with
a score and a reason), rewrites (a closed message's content replaced, structure kept) and
summaries (whole units replaced by one message). The gate closes the proposal over units.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .messages import Message

if TYPE_CHECKING:
    from .context import Context, Unit


@dataclass(frozen=True)
class Eviction:
    message_ids: tuple[str, ...]
    score: float | None = None
    reason: str = ""


@dataclass
class Rewrite:
    message_id: str
    replacement: Message
    reason: str = ""


@dataclass
class Summary:
    unit_ids: tuple[str, ...]
    message: Message
    reason: str = ""
    summarizer: str = ""


@dataclass
class Proposal:
    policy: str
    evictions: list[Eviction] = field(default_factory=list)
    rewrites: list[Rewrite] = field(default_factory=list)
    summaries: list[Summary] = field(default_factory=list)
    scores: dict[str, float] = field(default_factory=dict)  # unit id -> score, for tracing
    notes: str = ""
    error: str | None = None  # e.g. a summarizer that failed: reported, never passed off as a summary

    @property
    def evict_ids(self) -> list[str]:
        out: list[str] = []
        for e in self.evictions:
            out.extend(e.message_ids)
        return out

    @property
    def empty(self) -> bool:
        return not (self.evictions or self.rewrites or self.summaries)

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "evictions": [{"message_ids": list(e.message_ids), "score": e.score, "reason": e.reason} for e in self.evictions],
            "rewrites": [{"message_id": r.message_id, "reason": r.reason} for r in self.rewrites],
            "summaries": [
                {"unit_ids": list(s.unit_ids), "reason": s.reason, "summarizer": s.summarizer} for s in self.summaries
            ],
            "scores": dict(self.scores),
            "notes": self.notes,
            "error": self.error,
        }


@dataclass(frozen=True)
class UnitView:
    """What a policy may know about a unit."""

    id: str
    message_ids: tuple[str, ...]
    tokens: int
    kind: str
    pinned: bool
    closed: bool
    pending: bool
    open: bool
    first_seq: int
    last_seq: int
    age: int  # events since the unit last changed


class ContextView:
    """A read-only window on a :class:`~policies.context.Context` for policies.

    Iteration is lazy, oldest first, so a policy that only needs the oldest units does not pay for
    the whole context.
    """

    def __init__(self, ctx: Context, *, budget: int, target: int | None = None, query: str | None = None) -> None:
        self._ctx = ctx
        self.budget = budget
        self.target = budget if target is None else target
        self._query = query
        self._pins = ctx.pinned_unit_ids()

    @property
    def tokens(self) -> int:
        """The whole request's tokens: messages plus what the request carries besides (when counted)."""
        return self._ctx.request_tokens

    @property
    def excess(self) -> int:
        """Tokens to remove to get down to the target."""
        return max(0, self._ctx.request_tokens - self.target)

    @property
    def seq(self) -> int:
        return self._ctx.seq

    @property
    def pinned(self) -> frozenset[str]:
        return frozenset(self._pins)

    @property
    def query(self) -> str:
        """The current query: the text of the newest user message, unless given."""
        if self._query is None:
            self._query = ""
            for m in self._ctx.iter_messages(newest_first=True):  # stops at the newest user turn
                if m.has_user_text():
                    self._query = m.plain_text()
                    break
        return self._query

    def _view(self, unit: Unit) -> UnitView:
        return UnitView(
            id=unit.id,
            message_ids=tuple(unit.message_ids),
            tokens=unit.tokens,
            kind=unit.kind,
            pinned=unit.id in self._pins,
            closed=unit.closed,
            pending=bool(unit.pending),
            open=bool(unit.open_ids),
            first_seq=unit.first_seq,
            last_seq=unit.last_seq,
            age=self._ctx.seq - unit.last_seq,
        )

    def units(self) -> Iterator[UnitView]:
        """All units, oldest first. Lazy, no copy: consume it before the context changes."""
        return (self._view(u) for u in self._ctx.units.values())

    def units_newest_first(self) -> Iterator[UnitView]:
        """All units, newest first. Lazy, no copy: consume it before the context changes."""
        return (self._view(u) for u in reversed(self._ctx.units.values()))

    def unit(self, unit_id: str) -> UnitView:
        return self._view(self._ctx.units[unit_id])

    def unit_of(self, message_id: str) -> UnitView:
        return self._view(self._ctx.unit_of(message_id))

    def messages(self, unit_id: str | None = None) -> list[Message]:
        """Messages of one unit (or of the whole context), oldest first. Do not mutate them."""
        if unit_id is None:
            return self._ctx.messages
        return [self._ctx.message(mid) for mid in self._ctx.units[unit_id].message_ids]

    def message(self, message_id: str) -> Message:
        return self._ctx.message(message_id)

    def count_tokens(self, message: Message) -> int:
        return self._ctx.counter.count(message)

    def __len__(self) -> int:
        return len(self._ctx)


@runtime_checkable
class Policy(Protocol):
    """A pruning policy. ``name`` is what traces and comparisons call it."""

    name: str

    def propose(self, view: ContextView) -> Proposal: ...
