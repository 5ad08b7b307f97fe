"""The Sessions page's one query: search, filter and page every session in DuckDB.

At 10,000 sessions the page must answer in under a second, first render and every filter. So the
whole store is never summarised per span attribute: the filters read the root spans (one per
session) and per-session span counts by name (no JSON); the search scans attribute text once with
a cheap ``contains`` before extracting the searched fields; message counts and peak tokens are
computed for the page's rows only. Every value is a parameter.

Search looks at what a user remembers: message text, tool names, decisions, their reasons,
violation codes, and the session's id and name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracer.queries import (
    BUDGET_CHECK,
    DEFER,
    FAIL,
    MESSAGE,
    PRUNE,
    SESSION,
    SPILL,
    VIOLATION,
    Source,
    _con,
    _list,
)

__all__ = ["KINDS", "session_page"]

KINDS = ("recorded", "replay")  # recorded traffic (import, live, shadow, ...) vs replays through a policy

_SQL = f"""
WITH roots AS (
    SELECT session_id,
           any_value(attributes->>'prunegate.session.name') AS label,
           any_value(attributes->>'prunegate.session.source') AS source,
           any_value(attributes->>'prunegate.session.source_id') AS source_id,
           any_value(attributes->>'prunegate.policy') AS policy,
           any_value(TRY_CAST(attributes->>'prunegate.gated' AS BOOLEAN)) AS gated,
           any_value(TRY_CAST(attributes->>'prunegate.budget' AS BIGINT)) AS budget
    FROM spans WHERE name = '{SESSION}' AND session_id IS NOT NULL GROUP BY session_id
),
counts AS (
    SELECT session_id, count(*) AS spans,
           count(*) FILTER (WHERE name = '{VIOLATION}') AS violations,
           count(*) FILTER (WHERE name = '{PRUNE}') AS prunes,
           count(*) FILTER (WHERE name = '{DEFER}') AS deferrals,
           count(*) FILTER (WHERE name = '{SPILL}') AS spills,
           count(*) FILTER (WHERE name = '{FAIL}') AS failures,
           min(start_time_ns) AS first_ns, max(coalesce(end_time_ns, start_time_ns)) AS last_ns
    FROM spans WHERE session_id IS NOT NULL GROUP BY session_id
),
hits AS (
    SELECT DISTINCT session_id FROM spans
    WHERE CAST($q AS VARCHAR) IS NOT NULL AND session_id IS NOT NULL
      AND contains(lower(CAST(attributes AS VARCHAR)), CAST($q AS VARCHAR))
      AND contains(lower(concat_ws(' ',
            CASE WHEN name = '{MESSAGE}' THEN attributes->>'prunegate.message.content' END,
            CASE WHEN name = '{MESSAGE}' THEN CAST(attributes->'prunegate.message.tool_names' AS VARCHAR) END,
            attributes->>'gen_ai.tool.name',
            CASE WHEN name = '{BUDGET_CHECK}' THEN attributes->>'prunegate.decision' END,
            CASE WHEN name IN ('{BUDGET_CHECK}', '{PRUNE}', '{DEFER}', '{SPILL}', '{FAIL}')
                 THEN attributes->>'prunegate.reason' END,
            CASE WHEN name = '{VIOLATION}' THEN attributes->>'prunegate.violation.code' END)),
          CAST($q AS VARCHAR))
),
listed AS (
    SELECT c.session_id, r.label, r.source, r.source_id, r.policy, r.gated, r.budget,
           CASE WHEN r.source = 'replay' THEN 'replay' ELSE 'recorded' END AS kind,
           c.* EXCLUDE (session_id)
    FROM counts c LEFT JOIN roots r USING (session_id)
),
picked AS (
    SELECT * FROM listed
    WHERE (CAST($kind AS VARCHAR) IS NULL OR kind = CAST($kind AS VARCHAR))
      AND (len(CAST($policies AS VARCHAR[])) = 0 OR list_contains(CAST($policies AS VARCHAR[]), policy))
      AND (CAST($gated AS BOOLEAN) IS NULL OR gated = CAST($gated AS BOOLEAN))
      AND (NOT $only_v OR violations > 0)
      AND (CAST($since AS BIGINT) IS NULL OR last_ns >= CAST($since AS BIGINT))
      AND (CAST($until AS BIGINT) IS NULL OR first_ns < CAST($until AS BIGINT))
      AND (CAST($q AS VARCHAR) IS NULL
           OR contains(lower(session_id), CAST($q AS VARCHAR))
           OR contains(lower(coalesce(label, '')), CAST($q AS VARCHAR))
           OR session_id IN (SELECT session_id FROM hits))
)
SELECT *, count(*) OVER () AS total,
       count(*) FILTER (WHERE kind = 'recorded') OVER () AS total_recorded,
       sum(violations) OVER () AS total_violations
FROM picked
ORDER BY last_ns DESC NULLS LAST, session_id
LIMIT $limit OFFSET $offset
"""

_PAGE_DETAIL = f"""
SELECT session_id,
       count(DISTINCT attributes->>'prunegate.message.id')
           FILTER (WHERE name = '{MESSAGE}' AND attributes->>'prunegate.event' IN ('append', 'open')) AS messages,
       max(TRY_CAST(attributes->>'prunegate.context.tokens' AS BIGINT)) FILTER (WHERE name = '{MESSAGE}')
           AS peak_tokens
FROM spans WHERE list_contains(CAST($ids AS VARCHAR[]), session_id)
GROUP BY session_id
"""


def session_page(
    src: Source,
    *,
    search: str | None = None,
    kind: str | None = None,
    policies: Sequence[str] | None = None,
    gated: bool | None = None,
    only_with_violations: bool = False,
    since_ns: int | None = None,
    until_ns: int | None = None,
    offset: int = 0,
    limit: int = 50,
) -> dict[str, Any]:
    """One page of sessions, newest activity first, and how many match.

    ``search`` matches (case-insensitive substring) message text, tool names, decisions, reasons,
    violation codes, session ids and names; ``kind`` is ``recorded`` (any source but replay) or
    ``replay``; ``since_ns``/``until_ns`` keep sessions active in that window (Unix ns).
    Returns ``rows`` (a frame: id, name, kind, source, source id, policy, gated, budget, counts of
    violations, prunes, deferrals, spills, failures, first/last span time, messages, peak tokens),
    ``total``, ``recorded`` and ``replays`` (of the matching sessions) and ``violations``.
    """
    if kind is not None and kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS} or None; got {kind!r}")
    q = (search or "").strip().lower() or None
    con = _con(src)
    rows = con.execute(_SQL, {
        "q": q, "kind": kind, "policies": _list(policies), "gated": gated, "only_v": bool(only_with_violations),
        "since": since_ns, "until": until_ns, "limit": int(limit), "offset": max(0, int(offset)),
    }).df()
    if rows.empty:
        total = recorded = violations = 0
        if offset > 0:  # past the end: count what matches
            again = session_page(src, search=search, kind=kind, policies=policies, gated=gated,
                                 only_with_violations=only_with_violations, since_ns=since_ns, until_ns=until_ns,
                                 offset=0, limit=1)
            total, recorded, violations = again["total"], again["recorded"], again["violations"]
    else:
        total, recorded = int(rows["total"].iloc[0]), int(rows["total_recorded"].iloc[0])
        violations = int(rows["total_violations"].iloc[0] or 0)
    rows = rows.drop(columns=["total", "total_recorded", "total_violations"])
    detail = con.execute(_PAGE_DETAIL, {"ids": [str(s) for s in rows["session_id"]]}).df()
    rows = rows.merge(detail, on="session_id", how="left")
    return {"rows": rows, "total": total, "recorded": recorded, "replays": total - recorded,
            "violations": violations}


def policies_seen(src: Source) -> list[str]:
    """Policies of the sessions in the store (the filter's choices)."""
    rows = _con(src).execute(
        f"SELECT DISTINCT attributes->>'prunegate.policy' FROM spans WHERE name = '{SESSION}' "
        "AND attributes->>'prunegate.policy' IS NOT NULL ORDER BY 1").fetchall()
    return [str(r[0]) for r in rows]



