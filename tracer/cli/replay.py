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
from typing import Any

from policies.errors import PolicyError
from tracer.cli import options
from tracer.cli.output import format_row


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "replay",
        help="replay recorded sessions through a policy, gated or not; recorded as new traces",
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
    from tracer.cli.export import send_after
    from tracer.lab.compare import aggregate, progress_bar, run_replays
    from tracer.lab.replay import ReplaySpec

    try:
        params = parse_params(args.param)
        get_policy(args.policy, **params)  # unknown policy or bad parameters: say so before any work
    except PolicyError as exc:
        print(f"prunegate replay: {exc}", file=sys.stderr)
        return 2
    spec = ReplaySpec(args.policy, tuple(params.items()), gated=not args.ungated, budget=args.budget,
                      hard_ceiling=args.hard_ceiling, stream_results=args.stream_results, seed=args.seed,
                      detail=args.detail)
    if spec.gated is False and args.hard_ceiling is not None:
        print("prunegate replay: --hard-ceiling applies to gated replays only; ignored with --ungated",
              file=sys.stderr)
    if args.otlp_endpoint and not args.trace:
        print("prunegate replay: --otlp-endpoint sends the recorded replays; it cannot go with --no-trace",
              file=sys.stderr)
        return 2
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
        return options.recorded_outcome(args, store, [r.replay_id for r in results]) or sent_status
    print(describe(depends))
    for r in results:
        line = (f"{r.name}: {r.model_calls} model calls, {r.invalid_requests} invalid, {r.orphan_results} orphan results, "
                f"{r.dangling_calls} dangling calls, {r.duplicated_side_effects} duplicated side effects, "
                f"{r.prunes} prunes, {r.deferrals} deferrals, peak {r.peak_tokens} tokens")
        if r.error:
            line += f"; FAILED: {r.error}"
        print(line + (f" -> {r.replay_id}" if args.trace else ""))
    print(format_row(row))
    rc = options.recorded_outcome(args, store, [r.replay_id for r in results])
    if rc == 0:
        print(recording(depends))
    if sent is not None:
        print(sent.summary())
    return rc or sent_status


def depends_on(args: argparse.Namespace, store: Any, recorded: int) -> dict[str, Any]:
    """What every figure of a replay or comparison depends on, and where its replays went."""
    from policies.tokens import DEFAULT_COUNTER

    counter = type(DEFAULT_COUNTER).__name__
    chars = getattr(DEFAULT_COUNTER, "chars_per_token", None)
    return {
        "budget": args.budget,
        "budget_rule": None if args.budget and any(args.budget if isinstance(args.budget, list) else [args.budget])
        else "60% of each session's full size",
        "hard_ceiling": args.hard_ceiling, "seed": args.seed, "stream_results": args.stream_results,
        "token_counter": counter + (f" ({chars:g} characters per token)" if chars else ""),
        "recorded_sessions": recorded, "store": str(store),
    }


def describe(d: dict[str, Any]) -> str:
    """The line printed before the figures: what every one of them depends on."""
    chosen = [b for b in (d["budget"] if isinstance(d["budget"], list) else [d["budget"]]) if b]
    budget = (" / ".join(f"{b:,}" for b in chosen) + " tokens") if chosen else d["budget_rule"]
    seed = (f"--seed {d['seed']} (each parallel batch's results arrive in an order shuffled with this seed)"
            if d["seed"] is not None else "none (results arrive in the recorded order; --seed N shuffles them)")
    return (f"figures below depend on: budget {budget}; hard ceiling {d['hard_ceiling'] or 'none'}; "
            f"seed {seed}; tool results streamed in {d['stream_results'] or 'recorded'} chunks; "
            f"tokens counted by {d['token_counter']}")


def recording(d: dict[str, Any]) -> str:
    """The line printed after the replays were read back from the store: what was recorded where."""
    if d["recorded_sessions"]:
        return (f"recorded {d['recorded_sessions']} replays as new sessions (source 'replay') in {d['store']}; "
                "--no-trace measures without recording")
    return "replays not recorded (--no-trace)"
