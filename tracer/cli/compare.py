"""``prunegate compare``: A/B metrics of several policies, gated and/or ungated, on recorded sessions;
with lists of budgets and parameter values, a sweep of every combination in one pass.

Every run is stored as a sweep in ``<store>/sweeps/`` (``prunegate recommend`` reads the last one).
Exit status: 0 done (replays read back from the store), 1 some spans could not be sent to
``--otlp-endpoint``, 2 bad arguments, no sessions or an unreadable store, 3 some replay traces did not
reach the store.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tracer.cli import add_command, options, status
from tracer.cli.output import depends_on, describe, recording


def register(sub: argparse._SubParsersAction) -> None:
    parser = add_command(
        sub, "compare",
        description="Replay every session under every arm (policy, parameters, budget, gating) in one pass: one "
        "row of metrics per arm with retention and cost intervals, plus per-session differences against the "
        "first arm of each gating with Student-t 95% confidence intervals. Policies are comma-separated; '@k=v' "
        "sets a parameter and '@k=v1|v2' sweeps it (e.g. recency@target=0.5|0.8); '--budget 2000,4000' sweeps "
        "budgets. Sessions run in parallel with --workers; each worker records its replays into the store. "
        "The run is stored as a sweep for 'prunegate recommend'.",
    )
    options.add_policies(parser, "policies to compare; the first (at the first budget) is the baseline",
                         required=True)
    options.add_gated(parser, ("on", "off", "both"), "both", "gate on, off, or both (default)")
    options.add_detail(parser, "decisions")
    parser.add_argument("--engine", choices=("local", "ray"), default="local",
                        help="local processes (--workers, the default) or Ray tasks (pip install 'prunegate[ray]')")
    parser.add_argument("--address", metavar="ADDR",
                        help="with --engine ray: the cluster to use ('auto', 'ray://head:10001'); "
                             "default: start a local Ray on this machine")
    options.add_prices(parser)
    options.add_replay_options(parser, budgets=True)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tracer.cli.outcome import recorded_outcome, send_after
    from tracer.store import Store

    rec, path, warnings = options.run_sweep(args)
    for line in warnings:
        print(f"prunegate compare: {line}", file=sys.stderr)
    store = Store(rec["options"]["store"])
    recorded = [r["replay_id"] for a in rec["arms"] for r in a["replays"]]
    depends = depends_on(args, store.path, len(recorded) if args.trace else 0)
    sent_status, sent = send_after(args, store, [r for r in recorded if r], "compare")
    if args.json:
        out = {"rows": rec["rows"], "differences": rec["differences"], "arms": rec["arms"],
               "sweep": {"id": rec["id"], "path": str(path), "command": rec["command"]},
               "models": rec["models"], "prices_as_of": rec["prices"]["as_of"], "depends_on": depends}
        if sent is not None:
            out["otlp"] = sent.to_dict()
        print(json.dumps(out, indent=2))
        return recorded_outcome(args, store, recorded) or sent_status
    print(describe(depends))
    print_table(rec)
    print(f"\nstored as {rec['id']} ({path}); prices as of {rec['prices']['as_of']} ({rec['prices']['source']})")
    rc = recorded_outcome(args, store, recorded)
    if rc == status.SUCCESS:
        print(recording(depends))
    if sent is not None:
        print(sent.summary())
    return rc or sent_status


def _ci(value: float | None, low: float | None, high: float | None, fmt: str) -> str:
    """A value and its interval; an interval that needs more sessions than there are says so."""
    if value is None:
        return "n/a"
    if low is None or high is None:
        return f"{value:{fmt}} [no CI: 1 session]"
    return f"{value:{fmt}} [{low:{fmt}}, {high:{fmt}}]"


def print_table(rec: dict[str, Any]) -> None:
    """One line per arm: retention and cost per session with their intervals, tokens, what was lost."""
    arms = rec["arms"]
    level = int(arms[0]["level"] * 100) if arms else 95
    width = max([len(a["arm"]) for a in arms] + [3])
    print(f"{'arm':<{width}}  {'gate':<8} {'n':>4}  {'retention [' + str(level) + '% CI]':<26} "
          f"{'USD/session [' + str(level) + '% CI]':<30} {'tokens/session':>14} {'invalid':>7} {'lost':>5}  pareto")
    for a in arms:
        ret = _ci(a["retention"], a["retention_low"], a["retention_high"], ".3f")
        cost = _ci(a["cost_per_session"], a["cost_low"], a["cost_high"], ".4f")
        print(f"{a['arm']:<{width}}  {'gated' if a['gated'] else 'ungated':<8} {a['sessions']:>4}  {ret:<26} "
              f"{cost:<30} {a['tokens_per_session']:>14,.0f} {a['invalid_requests']:>7} {a['lost_references']:>5}  "
              f"{'*' if a['pareto'] else ''}")
    diffs = [d for d in rec["differences"] if d["metric"] in ("retention", "cost", "tokens_sent", "invalid_requests")
             and not (d["mean_diff"] == 0 and d["ci_low"] == 0 and d["ci_high"] == 0)]
    if diffs:
        print(f"\npaired differences per session against the baseline (mean, Student-t {level}% CI):")
        for d in diffs:
            print(f"  {d['policy']} - {d['baseline']} ({'gated' if d['gated'] else 'ungated'}) {d['metric']}: "
                  f"{d['mean_diff']} [{d['ci_low']}, {d['ci_high']}] over {d['n']} sessions")
    lost: dict[str, int] = {}
    for a in arms:
        for tool, n in a["lost_by_tool"].items():
            lost[tool] = lost.get(tool, 0) + n
    if lost:
        top = sorted(lost.items(), key=lambda kv: -kv[1])[:5]
        print("\nlost references by the tool whose result held them (all arms): "
              + ", ".join(f"{t} {n}" for t, n in top))
