"""What the gate decided at one budget check: a value, reported to the observer and returned."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class DecisionKind(StrEnum):
    WITHIN_BUDGET = "within_budget"
    PRUNED = "pruned"
    DEFERRED = "deferred"  # "cannot prune safely now": its own state, never folded into over-budget
    SPILLED = "spilled"
    REINJECTED = "reinjected"
    FAILED = "failed"


@dataclass
class Decision:
    kind: DecisionKind
    check: int  # index of this budget check in the gate's life
    seq: int  # the context's event counter when the check ran
    tokens_before: int
    tokens_after: int
    budget: int
    hard_ceiling: int | None
    policy: str | None = None
    reason: str = ""
    proposal: Any = None  # the policy's Proposal, kept for tracing
    proposed_ids: list[str] = field(default_factory=list)  # message ids the policy asked to evict
    pruned_units: list[str] = field(default_factory=list)
    pruned_ids: list[str] = field(default_factory=list)  # final message ids removed
    grown_units: list[str] = field(default_factory=list)  # units taken whole although only partly proposed
    shrunk_units: list[str] = field(default_factory=list)  # units dropped from a proposal that split them
    skipped_units: list[str] = field(default_factory=list)  # proposed but pinned, open or pending
    rewritten_ids: list[str] = field(default_factory=list)
    summarized_units: list[str] = field(default_factory=list)
    summary_id: str | None = None
    blocking_units: list[str] = field(default_factory=list)  # what forced a deferral
    spilled_units: list[str] = field(default_factory=list)
    reinjected_units: list[str] = field(default_factory=list)
    budget_met: bool = True
    error: str | None = None
    overhead_tokens: int = 0  # of tokens_before/after: the request outside its messages (tools, framing)
    duration_ns: int = field(default=0, compare=False)  # time the runtime took to decide (0: not measured)

    @property
    def overhead_share(self) -> float:
        """The part of the budget that tool definitions and framing take before any message."""
        return self.overhead_tokens / self.budget if self.budget else 0.0

    @property
    def compacted(self) -> bool:
        """The check took something out of the window: pruned, summarized or spilled units
        (the request span's ``gen_ai.conversation.compacted``)."""
        return bool(self.pruned_units or self.summarized_units or self.spilled_units)

    @property
    def over_budget(self) -> bool:
        return self.tokens_before > self.budget

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k != "proposal"}
        d["kind"] = str(self.kind)
        if self.proposal is not None and hasattr(self.proposal, "to_dict"):
            d["proposal"] = self.proposal.to_dict()
        return d
