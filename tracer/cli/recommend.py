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

from tracer.cli import add_command, options, status
from tracer.errors import CommandError


def register(sub: argparse._SubParsersAction) -> None:
    parser = add_command(
        sub, "recommend",
        description="Pick, among the arms of the store's last sweep (or of a sweep run now with --policies), the "
        "cheapest one whose retention interval's lower bound is at least --min-retention and that sent no "
        "invalid request; print it, the sessions it was measured on and the prunegate compare command that "
        "reproduces it.",
    )
    parser.add_argument("--min-retention", type=options.fraction, required=True, metavar="R",
                        help="the least acceptable retention (0..1), held by the interval's lower bound")
    options.add_gated(parser, ("on", "off", "any"), "any",
                      "consider gated arms only (on), ungated only (off) or both (any, default)")
    parser.add_argument("--sweep", metavar="ID|FILE", help="a stored sweep (id or file) instead of the last one")
    options.add_policies(parser, "run a sweep of these policies first (same syntax as prunegate compare), then pick")
    options.add_prices(parser)
    options.add_replay_options(parser, budgets=True)
    options.add_detail(parser, "decisions")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tracer.lab import sweep
    from tracer.lab.recommend import describe, recommend

    rec: dict[str, Any]
    if args.policies:
        args.gated, wanted = {"any": "both"}.get(args.gated, args.gated), args.gated
        rec, _, warnings = options.run_sweep(args)
        for line in warnings:
            print(f"prunegate recommend: {line}", file=sys.stderr)
        args.gated = wanted
    else:
        store = options.store_of(args)
        found: dict[str, Any] | None
        try:
            if args.sweep:
                named = [p for p in sweep.list_sweeps(store.path) if p.name == f"{args.sweep}.json"]
                found = sweep.load(named[0] if named else args.sweep)
            else:
                found = sweep.last_sweep(store.path)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if found is None:
            raise CommandError(f"no sweep stored in {store.path} (run prunegate compare with --budget and "
                               "--policies lists first, or give --policies here)")
        rec = found
    out = recommend(rec, args.min_retention, gated=args.gated)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print("\n".join(describe(out)))
    return status.SUCCESS if out["arm"] is not None else status.FOUND_PROBLEMS
