"""``prunegate compare``: A/B metrics of several policies, gated and/or ungated, on recorded sessions.

Exit status: 0 done (replays read back from the store), 2 bad arguments, no sessions or an unreadable
store, 3 some replay traces did not reach the store.
"""

from __future__ import annotations

import argparse
import json
import sys

from policies.errors import PolicyError
from tracer.cli.replay import add_common, format_row, load_sessions, recorded_outcome


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "compare",
        help="compare policies on recorded sessions (A/B metrics with paired 95% confidence intervals)",
        description="Replay every session under every policy (and gating), one row of metrics per policy and "
        "gating, plus per-session differences against the first policy with Student-t 95% confidence intervals. "
        "Policies are comma-separated; '@k=v' sets a parameter (e.g. recency@target=0.5). Sessions run in "
        "parallel with --workers; each worker records its replays into the store.",
    )
    parser.add_argument("--policies", required=True, metavar="A,B,...", help="policies to compare; the first is the baseline")
    parser.add_argument("--gated", choices=("on", "off", "both"), default="both", help="gate on, off, or both (default)")
    parser.add_argument("--engine", choices=("local", "ray"), default="local",
                        help="local processes (--workers, the default) or Ray tasks (pip install 'prunegate[ray]')")
    parser.add_argument("--address", metavar="ADDR",
                        help="with --engine ray: the cluster to use ('auto', 'ray://head:10001'); "
                             "default: start a local Ray on this machine")
    add_common(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from policies import get_policy
    from tracer.lab.compare import compare, parse_policies, progress_bar

    try:
        policies = parse_policies(args.policies)
        for name, params in policies:
            get_policy(name, **dict(params))
    except (PolicyError, ValueError) as exc:
        print(f"prunegate compare: {exc}", file=sys.stderr)
        return 2
    if args.address and args.engine != "ray":
        print("prunegate compare: --address is for --engine ray", file=sys.stderr)
        return 2
    if args.engine == "ray":
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            print("prunegate compare: --engine ray needs Ray: pip install 'prunegate[ray]'", file=sys.stderr)
            return 2
    loaded = load_sessions(args, "compare")
    if isinstance(loaded, int):
        return loaded
    store, convs = loaded
    result = compare(convs, policies, gated=args.gated, budget=args.budget, hard_ceiling=args.hard_ceiling,
                     stream_results=args.stream_results, seed=args.seed, workers=args.workers,
                     store_path=store.path if args.trace else None, capture_content=args.capture_content,
                     progress=progress_bar(), engine=args.engine, address=args.address)
    recorded = [r.replay_id for rs in result.results for r in rs]
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
        return recorded_outcome(args, store, recorded)
    for row in result.rows:
        print(format_row(row))
    if result.differences:
        print("\npaired differences per session against the baseline (mean, Student-t 95% CI):")
        for d in result.differences:
            if d["mean_diff"] == 0 and d["ci_low"] == 0 and d["ci_high"] == 0:
                continue
            print(f"  {d['policy']} - {d['baseline']} ({'gated' if d['gated'] else 'ungated'}) {d['metric']}: "
                  f"{d['mean_diff']} [{d['ci_low']}, {d['ci_high']}] over {d['n']} sessions")
    return recorded_outcome(args, store, recorded)
