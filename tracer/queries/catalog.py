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

import pandas as pd
import pyarrow as pa

from tracer.queries._sql import (
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
    scratch,
)
from tracer.spans import names as sn

__all__ = ["KINDS", "page_detail", "page_of", "policies_seen", "search_index", "session_index", "session_page"]

KINDS = ("recorded", "replay")  # recorded traffic (import, live, shadow, ...) vs replays through a policy

_INDEX_SQL = f"""
WITH roots AS (
    SELECT session_id,
           any_value(attributes->>'{sn.SESSION_NAME}') AS label,
           any_value(source) AS source,
           any_value(attributes->>'{sn.SESSION_SOURCE_ID}') AS source_id,
           any_value(policy) AS policy,
           any_value(gated) AS gated,
           any_value(budget) AS budget
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
)
SELECT c.session_id, r.label, r.source, r.source_id, r.policy, r.gated, r.budget,
       CASE WHEN r.source = 'replay' THEN 'replay' ELSE 'recorded' END AS kind,
       c.* EXCLUDE (session_id)
FROM counts c LEFT JOIN roots r USING (session_id)
"""

# What a search looks at, lowercased, one row per span that has any: message text and tool names, tool
# executions, decisions and their reasons, violation codes.
_SEARCH_SQL = f"""
SELECT session_id, lower(text) AS text
FROM (
    SELECT session_id, concat_ws(' ', attributes->>'{sn.MESSAGE_CONTENT}',
                                 CAST(attributes->'{sn.MESSAGE_TOOL_NAMES}' AS VARCHAR)) AS text
    FROM spans WHERE name = '{MESSAGE}' AND session_id IS NOT NULL
    UNION ALL
    SELECT session_id, concat_ws(' ', attributes->>'gen_ai.tool.name', decision, reason, violation)
    FROM spans
    WHERE session_id IS NOT NULL AND (name IN ('{BUDGET_CHECK}', '{PRUNE}', '{DEFER}', '{SPILL}', '{FAIL}',
                                                '{VIOLATION}') OR starts_with(name, 'execute_tool'))
) t
WHERE text <> ''
"""

_PAGE_SQL = """
WITH picked AS (
    SELECT * FROM idx
    WHERE (CAST($kind AS VARCHAR) IS NULL OR kind = CAST($kind AS VARCHAR))
      AND (len(CAST($policies AS VARCHAR[])) = 0 OR list_contains(CAST($policies AS VARCHAR[]), policy))
      AND (CAST($gated AS BOOLEAN) IS NULL OR gated = CAST($gated AS BOOLEAN))
      AND (NOT $only_v OR violations > 0)
      AND (CAST($since AS BIGINT) IS NULL OR last_ns >= CAST($since AS BIGINT))
      AND (CAST($until AS BIGINT) IS NULL OR first_ns < CAST($until AS BIGINT))
      AND (CAST($q AS VARCHAR) IS NULL
           OR contains(lower(session_id), CAST($q AS VARCHAR))
           OR contains(lower(coalesce(label, '')), CAST($q AS VARCHAR))
           OR session_id IN (SELECT session_id FROM search WHERE contains(text, CAST($q AS VARCHAR))))
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
       count(DISTINCT attributes->>'{sn.MESSAGE_ID}')
           FILTER (WHERE attributes->>'{sn.EVENT}' IN ('append', 'open')) AS messages,
       max(TRY_CAST(attributes->>'{sn.CONTEXT_TOKENS}' AS BIGINT)) AS peak_tokens
FROM spans WHERE name = '{MESSAGE}' AND session_id IN (SELECT unnest(CAST($ids AS VARCHAR[])))
GROUP BY session_id
"""

_EMPTY_SEARCH = pa.table({"session_id": pa.array([], pa.string()), "text": pa.array([], pa.string())})


def session_index(src: Source) -> pa.Table:
    """One row per session: root attributes (name, source, source id, policy, gated, budget), kind
    (recorded or replay), span counts by decision and violation, first and last span time. Read once
    per store state (the dashboard caches it); every filter and page then runs over it."""
    return _con(src).sql(_INDEX_SQL).to_arrow_table()


def search_index(src: Source) -> pa.Table:
    """Lowercased texts per session holding what a search looks at (message text, tool names,
    decisions, reasons, violation codes). Built on the first search, cached like :func:`session_index`."""
    return _con(src).sql(_SEARCH_SQL).to_arrow_table()


def page_of(index: pa.Table, search: pa.Table | None = None, *, q: str | None = None, kind: str | None = None,
            policies: Sequence[str] | None = None, gated: bool | None = None, only_with_violations: bool = False,
            since_ns: int | None = None, until_ns: int | None = None, offset: int = 0,
            limit: int = 50) -> dict[str, Any]:
    """Filter and page :func:`session_index` (and, for ``q``, :func:`search_index`) in DuckDB."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS} or None; got {kind!r}")
    con = scratch()
    try:
        con.register("idx", index)
        con.register("search", search if search is not None else _EMPTY_SEARCH)
        rows = con.execute(_PAGE_SQL, {
            "q": q, "kind": kind, "policies": _list(policies), "gated": gated, "only_v": bool(only_with_violations),
            "since": since_ns, "until": until_ns, "limit": int(limit), "offset": max(0, int(offset)),
        }).df()
        if rows.empty and offset > 0:  # past the end: still say how many match
            again = page_of(index, search, q=q, kind=kind, policies=policies, gated=gated,
                            only_with_violations=only_with_violations, since_ns=since_ns, until_ns=until_ns,
                            offset=0, limit=1)
            return {**again, "rows": rows.drop(columns=["total", "total_recorded", "total_violations"])}
    finally:
        con.close()
    total = int(rows["total"].iloc[0]) if len(rows) else 0
    recorded = int(rows["total_recorded"].iloc[0]) if len(rows) else 0
    violations = int(rows["total_violations"].iloc[0] or 0) if len(rows) else 0
    return {"rows": rows.drop(columns=["total", "total_recorded", "total_violations"]), "total": total,
            "recorded": recorded, "replays": total - recorded, "violations": violations}


def page_detail(src: Source, rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with ``messages`` and ``peak tokens`` of those sessions only (read from the store)."""
    detail = _con(src).execute(_PAGE_DETAIL, {"ids": [str(s) for s in rows["session_id"]]}).df()
    return rows.merge(detail, on="session_id", how="left")


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
    """One page of sessions, newest activity first, and how many match (indexes built on the spot;
    the dashboard keeps them per store state and calls :func:`page_of` and :func:`page_detail`).

    ``search`` matches (case-insensitive substring) message text, tool names, decisions, reasons,
    violation codes, session ids and names; ``kind`` is ``recorded`` (any source but replay) or
    ``replay``; ``since_ns``/``until_ns`` keep sessions active in that window (Unix ns).
    Returns ``rows`` (a frame: id, name, kind, source, source id, policy, gated, budget, counts of
    violations, prunes, deferrals, spills, failures, first/last span time, messages, peak tokens),
    ``total``, ``recorded`` and ``replays`` (of the matching sessions) and ``violations``.
    """
    q = (search or "").strip().lower() or None
    out = page_of(session_index(src), search_index(src) if q else None, q=q, kind=kind, policies=policies,
                  gated=gated, only_with_violations=only_with_violations, since_ns=since_ns, until_ns=until_ns,
                  offset=offset, limit=limit)
    out["rows"] = page_detail(src, out["rows"])
    return out


def policies_seen(src: Source) -> list[str]:
    """Policies of the sessions in the store (the filter's choices)."""
    rows = _con(src).execute(
        f"SELECT DISTINCT policy FROM spans WHERE name = '{SESSION}' AND policy IS NOT NULL ORDER BY 1").fetchall()
    return [str(r[0]) for r in rows]



