"""What runtimes do without the gate: apply a policy's proposal to raw messages, at any moment.

It exists to reproduce and measure the failures the gate prevents (orphaned results, a stream
writing into an evicted message), and it reports its decisions through the same observer
interface so ungated replays are traced like gated ones.
"""

from __future__ import annotations

import time

from .context import Context
from .decision import Decision, DecisionKind
from .observer import Observer
from .policy import ContextView, Policy, Proposal


class NaiveRuntime:
    """The :class:`~policies.runtime.Runtime` interface of :class:`~policies.gate.Gate`, no safety."""

    gated = False

    def __init__(self, policy: Policy, budget: int, *, observer: Observer | None = None) -> None:
        self.policy = policy
        self.budget = budget
        self.hard_ceiling: int | None = None  # no ceiling: nothing is ever spilled
        self.observer = observer
        self.checks = 0

    def check(self, ctx: Context) -> Decision:
        started = time.perf_counter_ns()
        self.checks += 1
        ctx.seq += 1
        before = ctx.request_tokens
        d = Decision(DecisionKind.WITHIN_BUDGET, self.checks, ctx.seq, before, before, self.budget, None,
                     policy=self.policy.name)
        if before > self.budget:
            try:
                proposal = self.policy.propose(ContextView(ctx, budget=self.budget))
            except Exception as exc:  # noqa: BLE001
                proposal = Proposal(policy=self.policy.name, error=f"{type(exc).__name__}: {exc}")
            d.proposal, d.proposed_ids, d.error = proposal, proposal.evict_ids, proposal.error
            self._apply(ctx, proposal, d)
            d.kind = DecisionKind.PRUNED if (d.pruned_ids or d.rewritten_ids or d.summarized_units) else DecisionKind.DEFERRED
            d.reason = "over_budget" if d.kind == DecisionKind.PRUNED else "no_proposal"
            d.budget_met = ctx.request_tokens <= self.budget
        d.tokens_after = ctx.request_tokens
        d.duration_ns = time.perf_counter_ns() - started
        observer = self.observer or ctx.observer
        if observer is not None:
            ctx.observer_errors.call(observer.on_decision, ctx, d)
        return d

    def _apply(self, ctx: Context, proposal: Proposal, d: Decision) -> None:
        cause = f"pruned ungated by check #{self.checks} ({self.policy.name})"
        for rw in proposal.rewrites:
            if rw.message_id in ctx:
                old = ctx.message(rw.message_id)
                if sorted(old.call_ids) != sorted(rw.replacement.call_ids) or sorted(old.answered_ids) != sorted(
                    rw.replacement.answered_ids
                ):
                    d.error = f"rewrite of '{old.id}' changes its tool ids; not applied"
                    continue
                ctx.overwrite_message(old.id, rw.replacement, cause)  # in place, even mid-flight: the naive part
                d.rewritten_ids.append(old.id)
        for s in proposal.summaries:
            ids = [m for u in s.unit_ids if u in ctx.units for m in ctx.units[u].message_ids]
            if ids:
                first = min(ctx.message(m).seq for m in ids)
                ctx.remove_messages(ids, cause)
                ctx.insert_summary(s.message, seq=first, summary_of=list(s.unit_ids))
                d.summarized_units.extend(s.unit_ids)
                d.summary_id = s.message.id
        removed = ctx.remove_messages(proposal.evict_ids, cause)
        d.pruned_ids = [m.id for m in removed]

