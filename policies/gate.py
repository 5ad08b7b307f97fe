"""The commit-boundary gate: any policy may propose; only whole, settled units are pruned.

Decision procedure at every budget check (shared/DESIGN.md, "The rule the gate enforces"):
within budget → nothing (O(1); re-inject spilled units that fit at a commit boundary);
a tool call pending → defer; otherwise ask the policy, close its proposal over units (grow or
shrink, never cut), skip pinned and open units, and defer when the budget needs the open ones;
over the hard ceiling → spill the oldest closed units, and fail loudly if even that cannot hold it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from .context import Context
from .decision import Decision, DecisionKind
from .errors import HardCeilingExceeded, PolicyError, StructureError
from .limits import check_limits
from .observer import Observer
from .policy import ContextView, Policy, Proposal, Rewrite, Summary
from .spill import SpillStore


@dataclass
class _Plan:
    evict: list[str] = field(default_factory=list)
    grown: list[str] = field(default_factory=list)
    shrunk: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    rewrites: list[Rewrite] = field(default_factory=list)
    summaries: list[Summary] = field(default_factory=list)
    saves: int = 0

    @property
    def empty(self) -> bool:
        return not (self.evict or self.rewrites or self.summaries)


class Gate:
    """Lets ``policy`` act on a :class:`Context` only at a commit boundary, on whole units.

    ``mode="grow"`` takes a unit whole when a proposal touches part of it; ``"shrink"`` leaves it.
    ``hard_ceiling`` (default: no ceiling) is where deferral stops and spilling starts; without a
    ``spill_store`` crossing it fails at once. Implements :class:`~policies.runtime.Runtime`.
    """

    gated = True

    def __init__(
        self,
        policy: Policy,
        budget: int,
        hard_ceiling: int | None = None,
        *,
        mode: Literal["grow", "shrink"] = "grow",
        spill_store: SpillStore | None = None,
        observer: Observer | None = None,
        reinject: bool = True,
    ) -> None:
        check_limits(budget, hard_ceiling, mode)
        if not isinstance(policy, Policy):
            raise PolicyError(f"{policy!r} is not a policy: it needs a 'name' and a 'propose(view)' method")
        self.policy = policy
        self.budget = budget
        self.hard_ceiling = hard_ceiling
        self.mode = mode
        self.spill_store = spill_store
        self.observer = observer
        self.auto_reinject = reinject
        self.checks = 0
        self._started = 0  # perf_counter_ns at the start of the check in progress (its duration_ns)

    # ------------------------------------------------------------------ the budget check
    def check(self, ctx: Context) -> Decision:
        """Run one budget check. Raises :class:`HardCeilingExceeded` only after reporting the failure."""
        self._started = time.perf_counter_ns()
        self.checks += 1
        ctx.seq += 1
        before = ctx.request_tokens
        if before <= self.budget:
            if ctx.spilled and self.auto_reinject and ctx.at_commit_boundary:
                back = self._reinject_fitting(ctx)
                if back:
                    return self._report(ctx, self._decision(ctx, DecisionKind.REINJECTED, before, reason="fits again",
                                                           reinjected_units=back))
            return self._report(ctx, self._decision(ctx, DecisionKind.WITHIN_BUDGET, before))

        if ctx.pending:
            blocking = sorted(set(ctx.pending.values()), key=_unit_order(ctx))
            d = self._decision(ctx, DecisionKind.DEFERRED, before, reason="pending_calls", blocking_units=blocking)
            return self._hold_ceiling(ctx, d)

        view = ContextView(ctx, budget=self.budget)
        try:
            proposal = self.policy.propose(view)
        except Exception as exc:  # noqa: BLE001 - a failing policy defers; it never corrupts the context
            proposal = Proposal(policy=self.policy.name, error=f"{type(exc).__name__}: {exc}")
        plan = self._close_over_units(ctx, proposal, view.pinned)
        base = dict(policy=proposal.policy, proposal=proposal, proposed_ids=proposal.evict_ids,
                    grown_units=plan.grown, shrunk_units=plan.shrunk, skipped_units=plan.skipped,
                    error=proposal.error)

        if before - plan.saves > self.budget and ctx.open_ids:
            blocking = sorted({u for m in ctx.open_ids if (u := ctx.unit_id_of(m))}, key=_unit_order(ctx))
            d = self._decision(ctx, DecisionKind.DEFERRED, before, reason="open_messages", blocking_units=blocking, **base)
            return self._hold_ceiling(ctx, d)
        if plan.empty:
            reason = "policy_error" if proposal.error else "no_safe_prune"
            d = self._decision(ctx, DecisionKind.DEFERRED, before, reason=reason, **base)
            return self._hold_ceiling(ctx, d)

        d = self._decision(ctx, DecisionKind.PRUNED, before, reason="over_budget", **base)
        self._apply(ctx, plan, d)
        d.tokens_after = ctx.request_tokens
        d.budget_met = ctx.request_tokens <= self.budget
        return self._hold_ceiling(ctx, d)

    # ------------------------------------------------------------------ re-injection on demand
    def reinject(self, ctx: Context, key: str) -> Decision:
        """Bring a spilled unit back, named by unit id, message id or tool call id."""
        self._started = time.perf_counter_ns()
        record = ctx.spilled.get(key)
        if record is None:
            found = [r for r in ctx.spilled.values() if key in r.message_ids or key in r.call_ids]
            if len(found) > 1:  # a call id reused across turns: say which units, do not guess
                units = ", ".join(r.unit_id for r in found)
                raise StructureError(f"{key!r} names several spilled units ({units}); re-inject one by unit id")
            record = found[0] if found else None
        if record is None:
            raise StructureError(f"nothing spilled under {key!r}")
        if self.spill_store is None:
            raise StructureError("this gate has no spill store")
        before = ctx.request_tokens
        self._restore(ctx, record.unit_id)
        d = self._decision(ctx, DecisionKind.REINJECTED, before, reason=f"on demand: {key}",
                           reinjected_units=[record.unit_id])
        return self._report(ctx, d)

    # ------------------------------------------------------------------ internals
    def _close_over_units(self, ctx: Context, proposal: Proposal, pins: frozenset[str]) -> _Plan:
        """The proposal made whole: evictions grown or shrunk to units, then the summaries and rewrites
        that still fit (a pinned, in-flight or already planned unit is skipped, never cut)."""
        plan = _Plan()
        self._plan_evictions(ctx, proposal, pins, plan)
        evicting = set(plan.evict)
        used: set[int] = set()  # replacement objects already planned: one object lands in one place
        _plan_summaries(ctx, proposal, pins, plan, evicting, used)
        _plan_rewrites(ctx, proposal, pins, plan, evicting, used)
        return plan

    def _plan_evictions(self, ctx: Context, proposal: Proposal, pins: frozenset[str], plan: _Plan) -> None:
        """Every unit the proposal touches: evicted whole, grown (``mode="grow"``), shrunk away or skipped."""
        touched: dict[str, set[str]] = {}
        for mid in proposal.evict_ids:
            uid = ctx.unit_id_of(mid)
            if uid is not None:
                touched.setdefault(uid, set()).add(mid)
        for uid, mids in touched.items():
            unit = ctx.units[uid]
            if uid in pins or not unit.closed:
                _skip(plan, (uid,))
            elif len(mids) == len(unit.message_ids):
                plan.evict.append(uid)
            elif self.mode == "grow":
                plan.evict.append(uid)
                plan.grown.append(uid)
            else:
                plan.shrunk.append(uid)
        plan.saves = sum(ctx.units[u].tokens for u in plan.evict)

    def _apply(self, ctx: Context, plan: _Plan, d: Decision) -> None:
        cause = f"pruned by check #{self.checks} ({d.policy})"
        for rw in plan.rewrites:
            ctx.replace_message(rw.message_id, rw.replacement, cause=cause)
            d.rewritten_ids.append(rw.message_id)
        for s in plan.summaries:
            ctx.replace_units(list(s.unit_ids), s.message, cause=cause)
            d.summarized_units.extend(s.unit_ids)
            d.summary_id = s.message.id
        if plan.evict:
            removed = ctx.remove_units(plan.evict, cause=cause)
            d.pruned_units = list(plan.evict)
            d.pruned_ids = [m.id for m in removed]

    def _hold_ceiling(self, ctx: Context, d: Decision) -> Decision:
        d.tokens_after = ctx.request_tokens
        if self.hard_ceiling is None or ctx.request_tokens <= self.hard_ceiling:
            return self._report(ctx, d)
        if self.spill_store is not None:
            pins = ctx.pinned_unit_ids()
            need = ctx.request_tokens - self.hard_ceiling
            victims: list[str] = []
            for unit in ctx.units.values():  # oldest first: the context keeps units in first_seq order
                if need <= 0:
                    break
                if unit.closed and unit.id not in pins:
                    victims.append(unit.id)
                    need -= unit.tokens
            for uid in victims:
                self._spill(ctx, uid)
                d.spilled_units.append(uid)
        d.tokens_after = ctx.request_tokens
        if ctx.request_tokens <= self.hard_ceiling:
            d.kind = DecisionKind.SPILLED
            d.reason = f"{d.reason}; spilled to hold the hard ceiling" if d.reason else "hard ceiling"
            return self._report(ctx, d)
        d.kind = DecisionKind.FAILED
        why = "no spill store" if self.spill_store is None else "nothing closed left to spill"
        d.error = f"{ctx.request_tokens} tokens over the hard ceiling of {self.hard_ceiling} ({why}; {d.reason})"
        self._report(ctx, d)
        raise HardCeilingExceeded(d.error, d)

    def _spill(self, ctx: Context, unit_id: str) -> None:
        assert self.spill_store is not None
        key = f"{ctx.session_id or 'ctx'}-{unit_id}-{ctx.seq}".replace("/", "_")
        messages = [ctx.message(m).copy() for m in ctx.units[unit_id].message_ids]
        self.spill_store.put(key, messages)  # durable before the unit leaves the context
        ctx.spill_unit(unit_id, key)

    def _restore(self, ctx: Context, unit_id: str) -> None:
        assert self.spill_store is not None
        record = ctx.spilled[unit_id]
        messages = self.spill_store.get(record.key)
        ctx.restore_unit(unit_id, messages)
        self.spill_store.delete(record.key)

    def _reinject_fitting(self, ctx: Context) -> list[str]:
        if self.spill_store is None:
            return []
        back = []
        for record in sorted(ctx.spilled.values(), key=lambda r: -r.first_seq):
            if ctx.request_tokens + record.tokens <= self.budget:
                try:
                    self._restore(ctx, record.unit_id)
                except StructureError:  # its ids were reused meanwhile: it stays spilled, on demand only
                    continue
                back.append(record.unit_id)
        return back

    def _decision(self, ctx: Context, kind: DecisionKind, before: int, **kw: object) -> Decision:
        kw.setdefault("policy", self.policy.name)
        return Decision(kind=kind, check=self.checks, seq=ctx.seq, tokens_before=before, tokens_after=ctx.request_tokens,
                        budget=self.budget, hard_ceiling=self.hard_ceiling, overhead_tokens=ctx.overhead_tokens,
                        **kw)  # type: ignore[arg-type]  # kw: the Decision fields the caller names, typed there

    def _report(self, ctx: Context, d: Decision) -> Decision:
        if self._started:
            d.duration_ns = time.perf_counter_ns() - self._started
        d.tokens_after = ctx.request_tokens
        d.budget_met = ctx.request_tokens <= self.budget  # a deferral over budget must not read as "met"
        observer = self.observer or ctx.observer
        if observer is not None:
            try:
                observer.on_decision(ctx, d)
            except Exception as exc:  # noqa: BLE001 - tracing must never crash the agent
                ctx.observer_errors.failed(exc)
        return d



def _plan_summaries(ctx: Context, proposal: Proposal, pins: frozenset[str], plan: _Plan, evicting: set[str],
                    used: set[int]) -> None:
    """The proposal's summaries that replace whole closed units nobody else plans for."""
    summary_ids: set[str] = set()
    for summary in proposal.summaries:
        uids = list(dict.fromkeys(summary.unit_ids))
        try:
            if id(summary.message) in used or (summary.message.id and summary.message.id in summary_ids):
                raise StructureError("the same summary message is proposed twice")
            uids = ctx.check_summary(uids, summary.message)
            if any(u in pins or u in evicting for u in uids):
                raise StructureError("pinned or already planned")
        except StructureError:
            _skip(plan, (u for u in uids if u in ctx.units))
            continue
        used.add(id(summary.message))
        summary_ids.add(summary.message.id)
        plan.summaries.append(Summary(tuple(uids), summary.message, summary.reason, summary.summarizer))
        evicting.update(uids)
        plan.saves += sum(ctx.units[u].tokens for u in uids) - ctx.counter.count(summary.message)


def _plan_rewrites(ctx: Context, proposal: Proposal, pins: frozenset[str], plan: _Plan, evicting: set[str],
                   used: set[int]) -> None:
    """The proposal's rewrites that keep structure, of messages in closed units nobody else plans for."""
    rewritten: set[str] = set()
    for rw in proposal.rewrites:
        uid = ctx.unit_id_of(rw.message_id)
        if uid is None:
            continue
        try:
            if uid in pins or uid in evicting or rw.message_id in rewritten or id(rw.replacement) in used:
                raise StructureError("pinned, planned for eviction or already rewritten")
            ctx.check_rewrite(rw.message_id, rw.replacement)  # in flight, tool ids or role changed
        except StructureError:
            _skip(plan, (uid,))
            continue
        used.add(id(rw.replacement))
        rewritten.add(rw.message_id)
        plan.rewrites.append(rw)
        plan.saves += ctx.message(rw.message_id).tokens - ctx.counter.count(rw.replacement)


def _skip(plan: _Plan, unit_ids: Iterable[str]) -> None:
    for uid in unit_ids:
        if uid not in plan.skipped:
            plan.skipped.append(uid)


def _unit_order(ctx: Context) -> Callable[[str], int]:
    return lambda uid: ctx.units[uid].first_seq if uid in ctx.units else -1
