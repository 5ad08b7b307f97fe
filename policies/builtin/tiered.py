"""Mask, then summarize, then evict, until the target is met: the cheapest loss first.

Each stage projects what it saves before the next one is considered. Masking keeps every message
and its ids; summarizing keeps the gist of the oldest closed run; eviction (oldest messages first,
like ``recency``) only covers what is still missing.
"""

from __future__ import annotations

from ..errors import PolicyError
from ..policy import ContextView, Eviction, Proposal, Rewrite
from . import _params
from ._text import goal
from .mask import MaskPolicy
from .recency import oldest_messages
from .summarize import SummarizePolicy, Summarizer


class TieredPolicy:
    """``mask`` (newest ``keep_last`` results verbatim), then ``summarize``, then evict the oldest.

    ``stages`` picks and orders a subset of ``("mask", "summarize", "evict")``.
    ``Proposal.notes`` gives each stage's projected savings.
    """

    name = "tiered"
    STAGES = ("mask", "summarize", "evict")

    def __init__(
        self,
        target: float = 0.8,
        keep_last: int = 3,
        summarizer: Summarizer | None = None,
        summary_tokens: int = 200,
        stages: list[str] | None = None,
    ) -> None:
        self.target = _params.fraction(self.name, "target", target)
        self.mask = MaskPolicy(target=self.target, keep_last=_params.integer(self.name, "keep_last", keep_last))
        if summarizer is not None:
            _params.function(self.name, "summarizer", summarizer, "(messages) -> str")
        self.summarize = SummarizePolicy(target=self.target, summarizer=summarizer,
                                         summary_tokens=_params.integer(self.name, "summary_tokens", summary_tokens))
        chosen = list(self.STAGES) if stages is None else list(stages) if isinstance(stages, list | tuple) else stages
        if not isinstance(chosen, list) or not chosen:
            raise PolicyError(f"{self.name}: stages must be a non-empty list of {', '.join(self.STAGES)}, "
                                      f"got {stages!r}")
        for s in chosen:
            _params.choice(self.name, "stages[]", s, self.STAGES)
        if len(set(chosen)) != len(chosen):
            raise PolicyError(f"{self.name}: stages lists a stage twice: {chosen!r}")
        self.stages = tuple(chosen)

    def propose(self, view: ContextView) -> Proposal:
        need = goal(view, self.target)
        proposal = Proposal(policy=self.name)
        if need <= 0:
            proposal.notes = "within target"
            return proposal
        mask_saved: dict[str, int] = {}  # message id -> tokens its rewrite saves
        rewrites: list[Rewrite] = []
        summary_saved = 0
        summarized: frozenset[str] = frozenset()
        evicted: dict[str, int] = {}  # message id -> tokens its eviction adds to what masking saved

        def remaining() -> int:
            kept = sum(mask_saved[r.message_id] for r in rewrites)
            return need - kept - summary_saved - sum(evicted.values())

        for stage in self.stages:
            if remaining() <= 0:
                break
            if stage == "mask":
                plan = self.mask.plan(view, remaining())
                rewrites, mask_saved = plan.rewrites, plan.saved
            elif stage == "summarize":
                credit: dict[str, int] = {}
                for r in rewrites:
                    uid = view.unit_of(r.message_id).id
                    credit[uid] = credit.get(uid, 0) + mask_saved[r.message_id]
                splan = self.summarize.plan(view, remaining(), credit=credit)
                proposal.error = splan.error
                if splan.summary is not None:
                    summarized = frozenset(splan.summary.unit_ids)
                    rewrites = [r for r in rewrites if view.unit_of(r.message_id).id not in summarized]
                    proposal.summaries.append(splan.summary)
                    summary_saved = splan.saved
            else:
                for mid, tokens in oldest_messages(view, exclude_units=summarized):
                    if remaining() <= 0:
                        break
                    evicted[mid] = tokens - mask_saved.get(mid, 0) if any(r.message_id == mid for r in rewrites) \
                        else tokens
                    unit = view.unit_of(mid)
                    proposal.evictions.append(Eviction((mid,), score=float(unit.first_seq), reason="oldest"))
                    proposal.scores[unit.id] = float(unit.first_seq)
                rewrites = [r for r in rewrites if r.message_id not in evicted]
        proposal.rewrites = rewrites
        projected = {
            "mask": sum(mask_saved[r.message_id] for r in rewrites),
            "summarize": summary_saved,
            "evict": sum(view.message(m).tokens for m in evicted),
        }
        parts = [f"{s} {projected[s]}" for s in self.stages]
        proposal.notes = f"target {self.target:g} of budget; need {need}; projected savings: {', '.join(parts)}"
        return proposal
