"""Keep the pinned messages and the newest messages that fit; evict the oldest first."""

from __future__ import annotations

from ..errors import PolicyError
from ..policy import ContextView, Eviction, Proposal


class RecencyPolicy:
    """Evict the oldest unpinned messages until the context is down to ``target`` × budget.

    Like the sliding windows runtimes ship, it counts messages, not units: ungated it cuts tool
    call/result pairs; under the gate the cut grows or shrinks to whole units. ``target`` below 1
    leaves headroom so the next appends do not trigger another trim: the gate's budget is the
    trigger, the target is where a trim stops.
    """

    name = "recency"

    def __init__(self, target: float = 0.8) -> None:
        try:
            target = float(target)
        except (TypeError, ValueError):
            raise PolicyError(f"recency: target must be a number, got {target!r}") from None
        if not 0 < target <= 1:
            raise PolicyError(f"recency: target must be in (0, 1], got {target!r}")
        self.target = target

    def propose(self, view: ContextView) -> Proposal:
        need = view.tokens - int(view.budget * self.target)
        proposal = Proposal(policy=self.name, notes=f"target {self.target:g} of budget")
        for unit in view.units():  # oldest first, lazily: stops as soon as enough is freed
            if need <= 0:
                break
            if unit.pinned:
                continue
            for mid in unit.message_ids:
                if need <= 0:
                    break
                tokens = view.message(mid).tokens
                proposal.evictions.append(Eviction((mid,), score=float(view.message(mid).seq), reason="oldest"))
                need -= tokens
            proposal.scores[unit.id] = float(unit.first_seq)
        return proposal
