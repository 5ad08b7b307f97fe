"""What several commands print the same way: an aggregate row, what figures depend on, an import's report."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tracer.traffic.recorded import ImportReport

__all__ = ["deferrals_text", "depends_on", "describe", "format_row", "print_report", "recording"]


def format_row(row: dict[str, Any]) -> str:
    """One aggregate row of :func:`tracer.lab.compare.aggregate` as a line of text."""
    ret = "n/a" if row["retention"] is None else f"{row['retention']:.1%}"
    return (f"{row['policy']} ({'gated' if row['gated'] else 'ungated'}): {row['sessions']} sessions, "
            f"{row['model_calls']} model calls, {row['invalid_requests']} invalid requests, "
            f"{row['orphan_results']} orphan results, {row['dangling_calls']} dangling calls, "
            f"{row['duplicated_side_effects']} duplicated side effects, {row['tokens_sent']} tokens sent, "
            f"peak {row['peak_tokens']}, {row['prunes']} prunes, {deferrals_text(row['deferrals'])}, "
            f"{row['spills']} spills, {row['reinjects']} re-injections, {row['failures']} failures, "
            f"retention {ret}")


def deferrals_text(n: int | None) -> str:
    """Deferrals as a line says them; None (an ungated arm cannot defer) is not applicable, not 0."""
    return "no deferrals (ungated: not applicable)" if n is None else f"{n} deferrals"


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


def print_report(report: ImportReport, store_path: Path, *, as_json: bool = False, sent: Any = None) -> None:
    """What an import did (text or JSON on stdout) and, one line each on stderr, what it refused and
    whatever did not reach the store; ``sent``, what ``--otlp-endpoint`` received, beside them."""
    from tracer.store.spool import spooled_line

    for r in report.refused:  # on stderr with --json too: one line each, file:line and why
        print(f"prunegate import: refused {r}", file=sys.stderr)
    if as_json:
        out = report.to_dict()
        if sent is not None:
            out["otlp"] = sent.to_dict()
        print(json.dumps(out, indent=2, ensure_ascii=False))
    else:
        print(f"imported {report.sessions} sessions ({report.spans} spans, read back from the store; "
              f"{report.messages} messages, {report.tool_calls} tool calls) into {store_path}")
        if report.skipped:
            print(f"skipped {len(report.skipped)} sessions already in the store")
        if report.renamed:
            print(f"renamed {len(report.renamed)} reused tool-call ids:")
            for ren in report.renamed:
                print(f"  {ren['session']} {ren['message']}: {ren['old']} -> {ren['new']}")
        if report.otlp_files:
            print(f"imported {report.otlp_spans} spans from {report.otlp_files} OTLP JSON files")
        if report.refused:
            print(f"refused {len(report.refused)} inputs (see above)")
        if sent is not None:
            print(sent.summary())
    if report.spooled_spans:
        print(f"prunegate import: {report.spooled_sessions} sessions: "
              + spooled_line(report.spooled_spans, Path(report.spool_dir or ""), store_path, report.store_error),
              file=sys.stderr)
    if report.lost_spans:
        print(f"prunegate import: {report.lost_sessions} sessions ({report.lost_spans} spans) reached neither the "
              f"store {store_path} ({report.store_error}) nor the spool {report.spool_dir} ({report.spool_error}); "
              "free space or fix permissions and import again", file=sys.stderr)
    if report.store_error and not (report.spooled_spans or report.lost_spans):
        print(f"prunegate import: could not write the store {store_path}: {report.store_error}", file=sys.stderr)
    if report.busy:
        print(f"prunegate import: {len(report.busy)} sessions are still being imported by another process; "
              "not verified here: run the import again once it is done", file=sys.stderr)
    if report.unverified:
        print(f"prunegate import: {len(report.unverified)} sessions written but not found whole when read back "
              f"from {store_path}: {', '.join(report.unverified[:5])}", file=sys.stderr)
