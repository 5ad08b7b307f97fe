"""``prunegate replay``: recorded sessions through one policy, gated or ungated, recorded as new traces.

Exit status: 0 done (whatever the replays found) and every replay read back from the store, 1 some
spans could not be sent to ``--otlp-endpoint``, 2 bad arguments, no sessions or an unreadable store,
3 some replay traces did not reach the store (the line printed says where they are and how to move
them in).
"""

from __future__ import annotations

import argparse
import json
import sys

from tracer.cli import add_command, options, status
from tracer.cli.output import deferrals_text, depends_on, describe, format_row, recording


def register(sub: argparse._SubParsersAction) -> None:
    parser = add_command(
        sub, "replay",
        description="Replay recorded sessions through a policy. Gated, the commit-boundary gate decides; with "
        "--ungated, the policy is applied to raw messages after every append, as naive runtimes do, and an "
        "invalid request makes it retry the whole last batch. Every model call's request is validated for the "
        "session's provider. Each replay is recorded as a new session (source 'replay').",
    )
    parser.add_argument("--policy", required=True, help="policy name (see the policies in docs/policies.md)")
    parser.add_argument("--param", action="append", default=[], metavar="K=V", help="policy parameter (repeatable)")
    parser.add_argument("--ungated", action="store_true", help="no gate: what naive runtimes do")
    options.add_detail(parser, "full")
    options.add_replay_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from policies import get_policy, parse_params
    from tracer.cli.outcome import recorded_outcome, send_after
    from tracer.lab.compare import aggregate, progress_bar, run_replays
    from tracer.lab.replay import ReplaySpec

    params = parse_params(args.param)
    get_policy(args.policy, **params)  # unknown policy or bad parameters (PolicyError): said before any work
    spec = ReplaySpec(args.policy, tuple(params.items()), gated=not args.ungated, budget=args.budget,
                      hard_ceiling=args.hard_ceiling, stream_results=args.stream_results, seed=args.seed,
                      detail=args.detail)
    if spec.gated is False and args.hard_ceiling is not None:
        print("prunegate replay: --hard-ceiling applies to gated replays only; ignored with --ungated",
              file=sys.stderr)
    store, convs = options.load_sessions(args)
    results = run_replays(convs, [spec], workers=args.workers, store_path=store.path if args.trace else None,
                          capture_content=args.capture_content, progress=progress_bar())[0]
    row = aggregate([spec], [results])[0]
    depends = depends_on(args, store.path, len(results) if args.trace else 0)
    sent_status, sent = send_after(args, store, [r.replay_id for r in results if r.replay_id], "replay")
    if args.json:
        out = {"totals": row, "sessions": [r.to_dict() for r in results], "depends_on": depends}
        if sent is not None:
            out["otlp"] = sent.to_dict()
        print(json.dumps(out, indent=2))
        return recorded_outcome(args, store, [r.replay_id for r in results]) or sent_status
    print(describe(depends))
    for r in results:
        line = (f"{r.name}: {r.model_calls} model calls, {r.invalid_requests} invalid, {r.orphan_results} orphan results, "
                f"{r.dangling_calls} dangling calls, {r.duplicated_side_effects} duplicated side effects, "
                f"{r.prunes} prunes, {deferrals_text(None if not r.gated else r.deferrals)}, peak {r.peak_tokens} tokens")
        if r.error:
            line += f"; FAILED: {r.error}"
        print(line + (f" -> {r.replay_id}" if args.trace else ""))
    print(format_row(row))
    rc = recorded_outcome(args, store, [r.replay_id for r in results])
    if rc == status.SUCCESS:
        print(recording(depends))
    if sent is not None:
        print(sent.summary())
    return rc or sent_status


