"""From a sweep to a decision: the cheapest arm whose retention is high enough, with confidence.

An arm qualifies when the *lower bound* of its retention interval is at least the asked minimum
(a point estimate just above the line is not enough on a few dozen sessions), it sent no invalid
request and no session failed. Among those, the cheapest by cost per session wins (tokens sent per
session when the sessions have no price); ties go to fewer tokens. The answer names the sessions it
was measured on and the exact ``prunegate compare`` command that replays that arm alone.
"""

from __future__ import annotations

from typing import Any

GATED_FILTER = {"on": (True,), "off": (False,), "any": (True, False)}


def recommend(sweep: dict[str, Any], min_retention: float, *, gated: str = "any") -> dict[str, Any]:
    """The recommendation (``arm`` None when no arm qualifies) and why each other arm did not."""
    if not 0.0 <= min_retention <= 1.0:
        raise ValueError(f"--min-retention must be between 0 and 1, got {min_retention}")
    if gated not in GATED_FILTER:
        raise ValueError(f"--gated must be on, off or any; got {gated!r}")
    allowed = GATED_FILTER[gated]
    candidates, rejected = [], []
    for a in sweep["arms"]:
        if a["gated"] not in allowed:
            continue
        why = _rejection(a, min_retention)
        if why:
            rejected.append({"arm": a["arm"], "gated": a["gated"], "why": why})
        else:
            candidates.append(a)
    priced = all(a.get("cost_per_session") is not None for a in candidates)
    key = "cost_per_session" if priced else "tokens_per_session"
    candidates.sort(key=lambda a: (a[key], a["tokens_per_session"]))
    best = candidates[0] if candidates else None
    return {
        "sweep": sweep.get("id"), "min_retention": min_retention, "gated": gated,
        "ranked_by": key, "arm": best,
        "command": best["command"] if best else None,
        "sessions": sweep.get("sessions", []),
        "qualified": [a["arm"] + (" (gated)" if a["gated"] else " (ungated)") for a in candidates],
        "rejected": rejected,
    }


def _rejection(arm: dict[str, Any], min_retention: float) -> str | None:
    low = arm.get("retention_low")
    if arm.get("retention") is None:
        return "no references to measure retention on"
    if low is None:
        return "retention measured on one session only: no interval"
    if low < min_retention:
        return f"retention interval's lower bound {low:.4f} < {min_retention}"
    if arm.get("invalid_requests"):
        return f"{arm['invalid_requests']} invalid requests"
    if arm.get("failures"):
        return f"{arm['failures']} failed sessions"
    return None


def describe(rec: dict[str, Any]) -> list[str]:
    """The recommendation as lines of text (what ``prunegate recommend`` prints)."""
    a = rec["arm"]
    n = len(rec["sessions"])
    scope = {"on": "gated arms", "off": "ungated arms", "any": "arms"}[rec["gated"]]
    if a is None:
        lines = [f"No {scope} of {rec['sweep']} keep retention >= {rec['min_retention']} at the interval's "
                 "lower bound with no invalid request and no failure:"]
        lines += [f"  {r['arm']} ({'gated' if r['gated'] else 'ungated'}): {r['why']}" for r in rec["rejected"]]
        return lines
    money = (f"${a['cost_per_session']:.6f} per session [{a['cost_low']:.6f}, {a['cost_high']:.6f}]"
             if a.get("cost_per_session") is not None else "cost unknown (no price for the sessions' model)")
    names = [s["name"] or s["id"] for s in rec["sessions"]]
    shown = ", ".join(names[:5]) + (f", ... ({n - 5} more)" if n > 5 else "")
    return [
        f"Recommended: {a['arm']} ({'gated' if a['gated'] else 'ungated'}), budget {a['budget'] or 'auto'}",
        f"  retention {a['retention']:.4f} [{a['retention_low']:.4f}, {a['retention_high']:.4f}] "
        f"({int(a['level'] * 100)}% interval, {a['references']} references) >= {rec['min_retention']} at the lower bound",
        f"  {money}; {a['tokens_per_session']:.0f} tokens sent per session; "
        f"{a['invalid_requests']} invalid requests",
        f"  cheapest of {len(rec['qualified'])} qualifying {scope} (of {len(rec['qualified']) + len(rec['rejected'])}), "
        f"ranked by {rec['ranked_by'].replace('_', ' ')}; sweep {rec['sweep']}",
        f"  measured on {n} sessions: {shown}",
        "  reproduce with:",
        f"    {rec['command']}",
    ]


__all__ = ["describe", "recommend"]
