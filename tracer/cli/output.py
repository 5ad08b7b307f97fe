"""Text output that ``replay`` and ``compare`` share (one line per policy and gating)."""

from __future__ import annotations

from typing import Any

__all__ = ["format_row"]


def format_row(row: dict[str, Any]) -> str:
    """One aggregate row of :func:`tracer.lab.compare.aggregate` as a line of text."""
    ret = "n/a" if row["retention"] is None else f"{row['retention']:.1%}"
    return (f"{row['policy']} ({'gated' if row['gated'] else 'ungated'}): {row['sessions']} sessions, "
            f"{row['model_calls']} model calls, {row['invalid_requests']} invalid requests, "
            f"{row['orphan_results']} orphan results, {row['dangling_calls']} dangling calls, "
            f"{row['duplicated_side_effects']} duplicated side effects, {row['tokens_sent']} tokens sent, "
            f"peak {row['peak_tokens']}, {row['prunes']} prunes, {row['deferrals']} deferrals, "
            f"{row['spills']} spills, {row['reinjects']} re-injections, {row['failures']} failures, "
            f"retention {ret}")
