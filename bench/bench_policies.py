"""Every registered policy on real τ-bench traffic, gated and ungated, side by side.

Each conversation is replayed message by message into a ``Context(strict=False)`` with a budget
check after every append: once under the commit-boundary gate (``Gate``) and once ungated
(``NaiveRuntime``, the proposal applied to raw messages). Before every assistant message (a model
call) the rendered OpenAI body is validated with ``policies.validate``. Prints a markdown table.

    .venv/bin/python bench/bench_policies.py                 # all 200 conversations
    .venv/bin/python bench/bench_policies.py --limit 50      # a quicker subset
    .venv/bin/python bench/bench_policies.py --fraction 0.6 --of final

Budget per conversation: ``--of history`` (default) is the system prompt plus ``--fraction`` of
the rest of the conversation's final tokens; ``--of final`` is ``--fraction`` of all final tokens
(the τ-bench system prompt is about half of a conversation, and it is pinned, so a fraction of the
final size often cannot be met at all); ``--fixed N`` is the same budget for every conversation.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.sources import TAU_FILE  # noqa: E402
from policies import Context, DecisionKind, Gate, available, get_policy  # noqa: E402
from policies.convert import from_openai  # noqa: E402
from policies.errors import PrunegateError  # noqa: E402
from policies.naive import NaiveRuntime  # noqa: E402
from policies.validate import validate  # noqa: E402


@dataclass
class Run:
    sessions: int = 0
    calls: int = 0
    tokens_at_calls: int = 0
    over_budget_calls: int = 0
    prunes: int = 0
    deferrals: int = 0
    invalid_calls: int = 0
    invalid_sessions: int = 0
    errors: int = 0
    crashes: int = 0  # the runtime itself raised (a harness defect, reported, the session stopped)
    codes: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    last_crash: str = ""


def budget_for(traj: list[dict], fraction: float = 0.5, of: str = "history", fixed: int | None = None) -> int:
    """The token budget for one conversation (see the module docstring)."""
    if fixed:
        return fixed
    ctx = Context.from_openai({"messages": traj}, strict=False)
    total = ctx.tokens
    if of == "final":
        return max(1, int(total * fraction))
    system = sum(m.tokens for m in ctx.messages if m.role in ("system", "developer"))
    return max(1, system + int((total - system) * fraction))


def replay(traj: list[dict], name: str | None, gated: bool, budget: int, run: Run) -> None:
    """One conversation through one policy; adds to ``run``."""
    messages, _ = from_openai({"messages": traj})
    ctx = Context(strict=False, provider="openai")
    runtime = None
    if name is not None:
        policy = get_policy(name)
        runtime = Gate(policy, budget) if gated else NaiveRuntime(policy, budget)
    invalid_here = 0
    for msg in messages:
        if msg.role == "assistant":  # the model is called with the context as it is now
            run.calls += 1
            run.tokens_at_calls += ctx.tokens
            run.over_budget_calls += ctx.tokens > budget
            violations = validate(ctx.to_openai(), "openai")
            if violations:
                invalid_here += 1
                for v in violations:
                    run.codes[v.code] = run.codes.get(v.code, 0) + 1
        ctx.append(msg)
        if runtime is not None:
            try:
                d = runtime.check(ctx)
            except PrunegateError as exc:
                run.crashes += 1
                run.last_crash = f"{type(exc).__name__}: {exc}"
                break
            run.prunes += d.kind == DecisionKind.PRUNED
            run.deferrals += d.kind == DecisionKind.DEFERRED
            run.errors += bool(d.error)
    run.sessions += 1
    run.invalid_calls += invalid_here
    run.invalid_sessions += invalid_here > 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traffic", type=Path, default=TAU_FILE, help="τ-bench JSON (default: ../shared/traffic/...)")
    ap.add_argument("--limit", type=int, default=None, help="only the first N conversations")
    ap.add_argument("--fraction", type=float, default=0.5, help="budget fraction (see --of)")
    ap.add_argument("--of", choices=("history", "final"), default="history")
    ap.add_argument("--fixed", type=int, default=None, help="one fixed budget in tokens for every conversation")
    ap.add_argument("--policy", action="append", help="only these policies (repeatable; default: all)")
    args = ap.parse_args(argv)
    if not args.traffic.exists():
        print(f"{args.traffic}: not found (the τ-bench traffic lives in ../shared/traffic)", file=sys.stderr)
        return 2
    convs = json.loads(args.traffic.read_text())[: args.limit]
    names = args.policy or available()
    budgets = [budget_for(c["traj"], args.fraction, args.of, args.fixed) for c in convs]
    rows: list[tuple[str, Run, Run]] = []
    baseline = Run()
    for conv, budget in zip(convs, budgets, strict=True):
        replay(conv["traj"], None, True, budget, baseline)
    for name in names:
        gated, naive = Run(), Run()
        for run, is_gated in ((gated, True), (naive, False)):
            t0 = time.perf_counter()
            for conv, budget in zip(convs, budgets, strict=True):
                replay(conv["traj"], name, is_gated, budget, run)
            run.seconds = time.perf_counter() - t0
        rows.append((name, gated, naive))

    how = f"fixed {args.fixed}" if args.fixed else (
        f"system prompt + {args.fraction:g} × the rest of each conversation's final tokens" if args.of == "history"
        else f"{args.fraction:g} × each conversation's final tokens")
    print(f"{len(convs)} τ-bench conversations, {baseline.calls} model calls; budget: {how} "
          f"(mean {sum(budgets) / len(budgets):.0f} tokens). No pruning: {_mean(baseline):.0f} tokens at a "
          f"model call, {baseline.over_budget_calls} calls over budget.\n")
    print("| policy | tokens at calls, gated | ungated | calls over budget, gated | ungated "
          "| prunes/session, gated | ungated | deferrals/session, gated | invalid requests, gated "
          "| ungated (sessions) | ungated violation codes | policy errors |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    for name, g, n in rows:
        codes = ", ".join(f"{k} {v}" for k, v in sorted(n.codes.items())) or "-"
        print(f"| {name} | {_mean(g):.0f} | {_mean(n):.0f} | {g.over_budget_calls} | {n.over_budget_calls} "
              f"| {g.prunes / g.sessions:.2f} | {n.prunes / n.sessions:.2f} | {g.deferrals / g.sessions:.2f} "
              f"| {g.invalid_calls} | {n.invalid_calls} ({n.invalid_sessions}) | {codes} | {g.errors + n.errors} |")
    for name, g, n in rows:
        for mode, r in (("gated", g), ("ungated", n)):
            if r.crashes:
                print(f"\n{name} {mode}: the runtime raised in {r.crashes} sessions (replay stopped there); "
                      f"last: {r.last_crash}")
    total = sum(g.seconds + n.seconds for _, g, n in rows)
    print(f"\n{len(rows)} policies × 2 modes replayed in {total:.1f} s")
    return 0


def _mean(run: Run) -> float:
    return run.tokens_at_calls / run.calls if run.calls else 0.0


if __name__ == "__main__":
    sys.exit(main())
