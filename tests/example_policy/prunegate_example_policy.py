"""An example third-party policy: keep the newest ``keep`` messages, evict the rest (pins excepted).

It uses only the public API (``policies.Proposal``, ``policies.Eviction``, ``policies.PolicyError``)
and, like every policy, proposes at message granularity: the gate closes the proposal over units.
"""

from __future__ import annotations

from policies import ContextView, Eviction, PolicyError, Proposal


class KeepLastPolicy:
    name = "example_keep_last"

    def __init__(self, keep: int = 6) -> None:
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
            raise PolicyError(f"{self.name}: keep must be an integer >= 0, got {keep!r}")
        self.keep = keep

    def propose(self, view: ContextView) -> Proposal:
        messages = view.messages()
        old = messages[: max(0, len(messages) - self.keep)]
        pins = view.pinned
        proposal = Proposal(policy=self.name, notes=f"keep the newest {self.keep} messages")
        for m in old:
            if view.unit_of(m.id).id not in pins:
                proposal.evictions.append(Eviction((m.id,), score=float(m.seq), reason="older than the window"))
        return proposal
