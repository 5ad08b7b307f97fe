"""Keep the pinned messages and the newest messages that fit; evict the oldest first."""

from __future__ import annotations

from collections.abc import Iterator

from ..policy import ContextView, Eviction, Proposal
from . import _params
from ._text import goal


class RecencyPolicy:
    """Evict the oldest unpinned messages until the context is down to ``target`` × budget.

    Like the sliding windows runtimes ship, it counts messages, not units: ungated it cuts tool
    call/result pairs; under the gate the cut grows or shrinks to whole units. ``target`` below 1
    leaves headroom so the next appends do not trigger another trim: the gate's budget is the
    trigger, the target is where a trim stops.
    """

    name = "recency"

    def __init__(self, target: float = 0.8) -> None:
        self.target = _params.fraction(self.name, "target", target)

    def propose(self, view: ContextView) -> Proposal:
        need = goal(view, self.target)
        proposal = Proposal(policy=self.name, notes=f"target {self.target:g} of budget")
        for mid, tokens in oldest_messages(view):
            if need <= 0:
                break
            proposal.evictions.append(Eviction((mid,), score=float(view.message(mid).seq), reason="oldest"))
            unit = view.unit_of(mid)
            proposal.scores.setdefault(unit.id, float(unit.first_seq))
            need -= tokens
        return proposal


def oldest_messages(view: ContextView, exclude_units: frozenset[str] = frozenset()) -> Iterator[tuple[str, int]]:
    """(message id, tokens) of unpinned units, oldest first, lazily."""
    for unit in view.units():
        if unit.pinned or unit.id in exclude_units:
            continue
        for mid in unit.message_ids:
            yield mid, view.message(mid).tokens
