"""Keep the pinned units and the newest units that fit; evict the oldest first."""

from __future__ import annotations

from ..errors import PolicyError
from ..policy import ContextView, Eviction, Proposal


class RecencyPolicy:
    """Evict the oldest unpinned units until the context is down to ``target`` × budget.

    ``target`` below 1 leaves headroom so the next few appends do not trigger another trim: the
    gate's budget is the trigger, the target is where a trim stops.
    """

    name = "recency"

    def __init__(self, target: float = 0.8) -> None:
        if not 0 < float(target) <= 1:
            raise PolicyError(f"recency: target must be in (0, 1], got {target!r}")
        self.target = float(target)

    def propose(self, view: ContextView) -> Proposal:
        need = view.tokens - int(view.budget * self.target)
        proposal = Proposal(policy=self.name, notes=f"target {self.target:g} of budget")
        for unit in view.units():  # oldest first, lazily: stops as soon as enough is freed
            if need <= 0:
                break
            if unit.pinned or not unit.closed:
                continue
            proposal.evictions.append(Eviction(unit.message_ids, score=float(unit.first_seq), reason="oldest"))
            proposal.scores[unit.id] = float(unit.first_seq)
            need -= unit.tokens
        return proposal
