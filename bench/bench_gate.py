"""Cost of the gate's budget check and prune decision, beside a full rescan, measured in one run.

For contexts of 1k, 10k and 100k messages (user turns, assistant turns, and tool call/result
pairs in rotation), on the same inputs:

1. A budget check within budget. Gate: ``Gate.check`` (the context keeps its token total and unit
   index incrementally). Full rescan: sum the tokens of every message to learn that the budget
   holds. Floor: the gate's cost does not grow with the number of messages (100k/1k <= 2).
2. A decision that prunes one unit. Just over budget; the policy proposes the oldest unpinned
   message (half the time the call of a call/result pair, which the gate grows to the whole unit).
   Gate: ``Gate.check`` end to end (policy proposal, closure over units, removal, decision).
   Full rescan: the reference ``prune_context`` (it rebuilds its unit index from the whole list on
   every call) fed with the same messages, the same prune set, the pending calls and the open
   messages (none); it only checks and closes the set, it does not ask a policy nor remove
   anything, so the ratio is conservative. The gate's decisions run back to back, then the
   reference's, so neither pollutes the other's caches.
   Floor: at 100k messages the gate is at least 50 times faster.
3. For reference, a check over budget while a call is in flight (the gate defers), beside
   ``prune_context`` raising on the same prune set.

Sizes are interleaved round by round so that a busy machine slows every size alike; per-call
times are medians over rounds (checks: 2000 calls a round); the cyclic GC is paused inside timed
calls (for both sides) and runs between them. Usage: .venv/bin/python bench/bench_gate.py [--sizes 1000 10000 100000]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from policies import (  # noqa: E402
    Context,
    ContextView,
    Eviction,
    Gate,
    Message,
    Proposal,
    PruneBoundaryViolation,
    prune_context,
    text_message,
    tool_result,
    tool_use,
)

TEXT = "the quick brown fox jumps over the lazy dog and keeps on running "


class OldestFirst:
    """Proposes the oldest unpinned messages until the excess is covered, one message per unit
    (the call of a pair, so the gate has to grow it). Lazy: reads only the units it needs."""

    name = "oldest-first"

    def propose(self, view: ContextView) -> Proposal:
        need = view.excess
        proposal = Proposal(self.name)
        for unit in view.units():
            if need <= 0:
                break
            if unit.pinned:
                continue
            proposal.evictions.append(Eviction((unit.message_ids[0],), reason="oldest"))
            need -= unit.tokens
        return proposal


class Traffic:
    """Appends turns in rotation: user, assistant, assistant call + tool result."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.i = 0
        self.calls = 0

    def add(self) -> list[Message]:
        i, ctx = self.i, self.ctx
        self.i += 1
        kind = i % 3
        if kind == 0:
            return [ctx.append(text_message("", "user", f"question {i}: {TEXT}"))]
        if kind == 1:
            return [ctx.append(text_message("", "assistant", f"answer {i}: {TEXT * 2}"))]
        self.calls += 1
        call = f"call_{self.calls}"
        a = ctx.append(Message("", "assistant", [tool_use(call, "lookup", {"q": i})]))
        r = ctx.append(Message("", "tool", [tool_result(call, f"result {i}: {TEXT}")]))
        return [a, r]


def build(n: int) -> tuple[Context, Traffic, list[dict]]:
    ctx = Context()
    ctx.append(text_message("", "system", "You are a helpful agent."))
    ctx.append(text_message("", "user", "First question: " + TEXT))
    traffic = Traffic(ctx)
    while len(ctx) < n:
        traffic.add()
    rows = [_row(ctx, m) for m in ctx.messages]
    return ctx, traffic, rows


def _row(ctx: Context, m: Message) -> dict:
    """The reference check's view of a message (kept beside the context, as a runtime would)."""
    return {"id": m.id, "unit_id": ctx.unit_id_of(m.id), "role": m.role, "closed": m.closed, "tokens": m.tokens}


class paused_gc:
    """The cyclic collector paused while a timed call runs: a full collection over a heap of 100k
    messages costs more than any call measured here, and would land on whichever call tripped it."""

    def __enter__(self) -> None:
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        gc.enable()


def timed(fn: Callable[[], object], calls: int) -> float:
    """Mean seconds per call over ``calls`` calls."""
    with paused_gc():
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        return (time.perf_counter() - t0) / calls


class Case:
    """One context size and everything measured on it."""

    def __init__(self, n: int) -> None:
        t0 = time.perf_counter()
        self.ctx, self.traffic, self.rows = build(n)
        self.built = time.perf_counter() - t0
        self.n = n
        self.samples: dict[str, list[float]] = {k: [] for k in ("check", "rescan", "prune", "reference",
                                                                 "defer", "defer_ref")}
        self.grown = 0

    def median(self, key: str) -> float:
        return statistics.median(self.samples[key])

    # 1. within budget
    def check_round(self) -> None:
        ctx, rows = self.ctx, self.rows
        gate = Gate(OldestFirst(), budget=ctx.tokens + 10**9)
        budget = gate.budget

        def rescan() -> bool:
            return sum(r["tokens"] for r in rows) <= budget

        assert rescan() and gate.check(ctx).kind == "within_budget"
        self.samples["check"].append(timed(lambda: gate.check(ctx), 2000))
        self.samples["rescan"].append(timed(rescan, max(3, 200_000 // len(rows))))

    # 2. one decision that prunes one unit
    def prune_round(self) -> list[str]:
        ctx = self.ctx
        gate = Gate(OldestFirst(), budget=ctx.tokens - 1)  # just over budget: exactly one unit has to go
        with paused_gc():
            t0 = time.perf_counter()
            d = gate.check(ctx)
            self.samples["prune"].append(time.perf_counter() - t0)
        assert d.kind == "pruned" and len(d.pruned_units) == 1, d
        self.grown += bool(d.grown_units)
        self.traffic.add()  # the next turn arrives: the size stays about the same
        return d.pruned_ids

    def reference_round(self, pruned: list[str]) -> None:
        """The reference on the rows of the context as it was before the decisions: every unit the
        gate pruned was there (the oldest go first), so the inputs are the gate's own."""
        with paused_gc():
            t0 = time.perf_counter()
            closed = prune_context(self.rows, pruned, (), ())
            self.samples["reference"].append(time.perf_counter() - t0)
        gc.collect(0)
        assert closed == set(pruned)

    # 3. over budget with a call in flight
    def defer_round(self) -> None:
        ctx, rows = self.ctx, self.rows
        if not ctx.pending:
            ctx.append(Message("", "assistant", [tool_use(f"slow_{self.n}", "slow_tool", {})]))
            rows[:] = [_row(ctx, m) for m in ctx.messages]
        ((_call, uid),) = ctx.pending.items()
        a_id = ctx.units[uid].message_ids[0]
        gate = Gate(OldestFirst(), budget=ctx.tokens - 1)

        def ref() -> None:
            try:
                prune_context(rows, [a_id], [uid], ())
            except PruneBoundaryViolation:
                return
            raise AssertionError("the reference check let an in-flight unit go")

        assert gate.check(ctx).reason == "pending_calls"
        self.samples["defer"].append(timed(lambda: gate.check(ctx), 2000))
        self.samples["defer_ref"].append(timed(ref, max(2, 50_000 // len(rows))))


def fmt(seconds: float) -> str:
    us = seconds * 1e6
    return f"{us:10.2f} us" if us < 10_000 else f"{us / 1000:10.2f} ms"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--decisions", type=int, default=60)
    args = ap.parse_args(argv)

    cases = [Case(n) for n in args.sizes]
    for c in cases:
        print(f"built {len(c.ctx):,} messages / {len(c.ctx.units):,} units / {c.ctx.tokens:,} tokens"
              f" in {c.built:.2f}s", file=sys.stderr)
    gc.collect()
    # sizes interleaved round by round, so a busy machine slows every size alike
    for _ in range(args.rounds):
        for c in cases:
            c.check_round()
    pruned: dict[int, list[list[str]]] = {c.n: [] for c in cases}
    for _ in range(args.decisions):  # the gate's decisions back to back, then the reference's
        for c in cases:
            pruned[c.n].append(c.prune_round())
    for i in range(args.decisions):
        for c in cases:
            c.reference_round(pruned[c.n][i])
    for _ in range(args.rounds):
        for c in cases:
            c.defer_round()

    head = (f"{'messages':>9} | {'check: gate':>13} {'rescan':>13} {'x':>8} | {'prune 1 unit: gate':>18} "
            f"{'prune_context':>13} {'x':>8} | {'defer: gate':>13} {'prune_context':>13} {'x':>8}")
    print(head)
    print("-" * len(head))
    for c in cases:
        cg, cr, pg, pr, dg, dr = (c.median(k) for k in ("check", "rescan", "prune", "reference", "defer", "defer_ref"))
        print(f"{c.n:>9,} | {fmt(cg)} {fmt(cr)} {cr / cg:7.1f}x | {fmt(pg):>18} {fmt(pr)} {pr / pg:7.1f}x"
              f" | {fmt(dg)} {fmt(dr)} {dr / dg:7.1f}x")
    print(f"({', '.join(f'{c.grown}/{args.decisions}' for c in cases)} prunes grew a call/result pair to its whole unit)")

    small, large = cases[0], cases[-1]
    growth = large.median("check") / small.median("check")
    prune_growth = large.median("prune") / small.median("prune")
    ratio = large.median("reference") / large.median("prune")
    print()
    print(f"within-budget check, gate: {large.n:,} vs {small.n:,} messages = {growth:.2f}x"
          " (floor: does not grow, <= 2x)")
    print(f"prune one unit, gate: {large.n:,} vs {small.n:,} messages = {prune_growth:.2f}x")
    print(f"prune one unit at {large.n:,} messages: gate is {ratio:.1f}x faster than the full rescan (floor: >= 50x)")
    ok = growth <= 2.0 and (large.n < 100_000 or ratio >= 50)
    print("floors met" if ok else "FLOOR MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
