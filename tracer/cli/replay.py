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
from tracer.cli.checks import nonneg_int, positive_int
from tracer.cli.output import format_row


def add_common(parser: argparse.ArgumentParser, *, budgets: bool = False) -> None:
    """Options ``replay`` and ``compare`` share; ``budgets``: ``--budget`` takes a list (a sweep)."""
    if budgets:
        parser.add_argument("--budget", type=_budgets, metavar="N[,N...]",
                            help="token budget, or a comma-separated list to sweep every arm over "
                                 "(default: 60%% of each session's full size; 'auto' in a list means that)")
    else:
        parser.add_argument("--budget", type=positive_int, help="token budget (default: 60%% of each session's full size)")
    parser.add_argument("--hard-ceiling", type=positive_int, help="hard ceiling: spill, then fail loudly, above it (gated)")
    parser.add_argument("--session", nargs="+", action="extend", metavar="ID",
                        help="replay only these sessions (id or name); default: every non-replay session")
    parser.add_argument("--stream-results", type=nonneg_int, default=0, metavar="N",
                        help="deliver every tool result as a stream of N chunks (default: only recorded streams)")
    parser.add_argument("--seed", type=int, help="shuffle each batch's result order with this seed")
    parser.add_argument("--workers", type=positive_int, default=1, help="processes to replay in (default 1)")
    options.add_store(parser)
    parser.add_argument("--no-trace", dest="trace", action="store_false",
                        help="do not record the replays (measure only; for benchmarks)")
    parser.add_argument("--capture-content", action="store_true", help="record message content in the replay traces")
    options.add_json(parser)
    from tracer.cli.export import add_otlp_options

    add_otlp_options(parser)


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
    add_common(parser)
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
                      hard_ceiling=args.hard_ceiling, stream_results=args.stream_results, seed=args.seed)
    if spec.gated is False and args.hard_ceiling is not None:
        print("prunegate replay: --hard-ceiling applies to gated replays only; ignored with --ungated",
              file=sys.stderr)
    if args.otlp_endpoint and not args.trace:
        print("prunegate replay: --otlp-endpoint sends the recorded replays; it cannot go with --no-trace",
              file=sys.stderr)
        return 2
    loaded = load_sessions(args, "replay")
    if isinstance(loaded, int):
        return loaded
    store, convs = loaded
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
                f"{r.prunes} prunes, {r.deferrals} deferrals, peak {r.peak_tokens} tokens")
        if r.error:
            line += f"; FAILED: {r.error}"
        print(line + (f" -> {r.replay_id}" if args.trace else ""))
    print(format_row(row))
    rc = recorded_outcome(args, store, [r.replay_id for r in results])
    if rc == 0:
        print(recording(depends))
    if sent is not None:
        print(sent.summary())
    return rc or sent_status


def recorded_outcome(args: argparse.Namespace, store: Any, replay_ids: list[str | None]) -> int:
    """0 when the recorded replays are in the store (read back), else say what is not (exit 3)."""
    if not args.trace:
        return 0
    from tracer.cli.outcome import check_recorded

    return check_recorded(args.command, store, replay_ids)


def load_sessions(args: argparse.Namespace, command: str) -> Any:
    """(store, conversations) for ``--store``/``--session``, or an exit code after saying what is wrong."""
    from tracer.store import StoreError
    from tracer.traffic.recorded import StoredSessions, select_sessions, store_path_arg

    store = store_path_arg(args.store)
    if not store.path.exists():
        print(f"prunegate {command}: no store at {store.path} (import sessions first: prunegate import PATH)",
              file=sys.stderr)
        return 2
    try:
        convs = StoredSessions(store, select_sessions(store, args.session))  # read a batch at a time
    except StoreError as exc:
        print(f"prunegate {command}: {exc}", file=sys.stderr)
        return 2
    if args.session:
        found = convs.names()
        missing = [s for s in args.session if s not in found]
        if missing:
            print(f"prunegate {command}: no session {', '.join(map(repr, missing))} in {store.path}", file=sys.stderr)
            return 2
    if not len(convs):
        print(f"prunegate {command}: no sessions to replay in {store.path}", file=sys.stderr)
        return 2
    return store, convs


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


def _budgets(text: str) -> list[int | None]:
    from tracer.lab.sweep import parse_budgets

    try:
        return parse_budgets(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--budget: ")) from None
