"""``prunegate recommend``: the cheapest arm of the last sweep whose retention is high enough.

Reads the store's last sweep (every ``prunegate compare`` stores one), or runs one first when
``--policies`` is given. Exit status: 0 an arm qualifies, 1 none does, 2 bad arguments, no sweep,
no sessions or an unreadable store.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tracer.cli import checks
from tracer.cli.compare import add_prices, run_sweep
from tracer.cli.options import add_detail, add_replay_options


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "recommend",
        help="name the cheapest arm of the last sweep that keeps retention above a minimum",
        description="Pick, among the arms of the store's last sweep (or of a sweep run now with --policies), the "
        "cheapest one whose retention interval's lower bound is at least --min-retention and that sent no "
        "invalid request; print it, the sessions it was measured on and the prunegate compare command that "
        "reproduces it.",
    )
    parser.add_argument("--min-retention", type=checks.fraction, required=True, metavar="R",
                        help="the least acceptable retention (0..1), held by the interval's lower bound")
    parser.add_argument("--gated", choices=("on", "off", "any"), default="any",
                        help="consider gated arms only (on), ungated only (off) or both (any, default)")
    parser.add_argument("--sweep", metavar="ID|FILE", help="a stored sweep (id or file) instead of the last one")
    parser.add_argument("--policies", metavar="A,B,...",
                        help="run a sweep of these policies first (same syntax as prunegate compare), then pick")
    add_prices(parser)
    add_replay_options(parser, budgets=True)
    add_detail(parser, "decisions")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tracer.lab import sweep
    from tracer.lab.recommend import describe, recommend
    from tracer.traffic.recorded import store_path_arg

    rec: dict[str, Any]
    if args.policies:
        args.gated, wanted = {"any": "both"}.get(args.gated, args.gated), args.gated
        try:
            rec, _ = run_sweep(args, "recommend")
        except SystemExit as exc:
            return int(exc.code or 0)
        args.gated = wanted
    else:
        store = store_path_arg(args.store)
        found: dict[str, Any] | None
        try:
            if args.sweep:
                named = [p for p in sweep.list_sweeps(store.path) if p.name == f"{args.sweep}.json"]
                found = sweep.load(named[0] if named else args.sweep)
            else:
                found = sweep.last_sweep(store.path)
        except ValueError as exc:
            print(f"prunegate recommend: {exc}", file=sys.stderr)
            return 2
        if found is None:
            print(f"prunegate recommend: no sweep stored in {store.path} (run prunegate compare with "
                  "--budget and --policies lists first, or give --policies here)", file=sys.stderr)
            return 2
        rec = found
    out = recommend(rec, args.min_retention, gated=args.gated)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print("\n".join(describe(out)))
    return 0 if out["arm"] is not None else 1
