"""Live: the sessions active in the last moments, with their latest tokens and decision (the Live page)."""

from __future__ import annotations

import pandas as pd

from tracer.contract import names as sn
from tracer.queries._sql import _AFTERWARDS, BUDGET_CHECK, MESSAGE, SESSION, VIOLATION, Source, _df


def live_sessions(src: Source, *, since_ns: int, limit: int = 50) -> pd.DataFrame:
    """Sessions with spans that started at or after ``since_ns`` (Unix ns), most recent first,
    with their latest context tokens and last decision. The ``limit`` most recent are picked from
    span times alone, so attributes are read for those sessions only (10,000 active sessions would
    otherwise all be parsed on every tick)."""
    sql = f"""
    WITH recent AS (
        SELECT session_id, max(coalesce(end_time_ns, start_time_ns)) AS last_ns FROM spans
        WHERE session_id IS NOT NULL AND name NOT IN {_AFTERWARDS}
        GROUP BY session_id HAVING max(start_time_ns) >= $since
        ORDER BY last_ns DESC, session_id LIMIT $limit
    ),
    s AS (SELECT sp.* FROM spans sp JOIN recent USING (session_id) WHERE sp.name NOT IN {_AFTERWARDS})
    SELECT session_id,
           any_value(source) FILTER (WHERE name = '{SESSION}') AS source,
           any_value(policy) FILTER (WHERE name = '{SESSION}') AS policy,
           any_value(attributes->>'{sn.SESSION_NAME}') FILTER (WHERE name = '{SESSION}') AS label,
           count(*) AS spans,
           max(seq) AS last_seq,
           arg_max(coalesce(TRY_CAST(attributes->>'{sn.CONTEXT_TOKENS}' AS BIGINT), tokens_after),
                   (seq, start_time_ns))
               FILTER (WHERE name IN ('{MESSAGE}', '{BUDGET_CHECK}')) AS tokens,
           arg_max(decision, (seq, start_time_ns))
               FILTER (WHERE name = '{BUDGET_CHECK}') AS last_decision,
           count(*) FILTER (WHERE name = '{VIOLATION}') AS violations,
           max(coalesce(end_time_ns, start_time_ns)) AS last_ns
    FROM s GROUP BY session_id
    ORDER BY last_ns DESC, session_id
    """
    return _df(src, sql, {"since": int(since_ns), "limit": int(limit)})


__all__ = ["live_sessions"]
