"""One session's trace as a span tree: every span with its depth, offset, duration and status, in
the order a trace view (Phoenix, Jaeger) draws them: each span right after its parent, siblings by
start time. The tree is walked in DuckDB (a recursive CTE), not in Python.
"""

from __future__ import annotations

import pandas as pd

from tracer.queries._sql import _AFTERWARDS, Source, _df

TRACE_COLUMNS = ["span_id", "parent_span_id", "name", "depth", "seq", "start_ms", "duration_ms", "status_code",
                 "status_message", "children"]

_TREE_SQL = f"""
WITH RECURSIVE s AS (
    SELECT span_id, parent_span_id, name, seq, start_time_ns, end_time_ns, status_code, status_message
    FROM spans WHERE session_id = $sid AND name NOT IN {_AFTERWARDS}
),
roots AS (  -- a span whose parent is not in this session's spans starts a tree
    SELECT s.* FROM s LEFT JOIN s AS p ON s.parent_span_id = p.span_id WHERE p.span_id IS NULL
),
tree AS (
    SELECT span_id, parent_span_id, name, seq, start_time_ns, end_time_ns, status_code, status_message, 0 AS depth,
           [lpad(CAST(start_time_ns AS VARCHAR), 20, '0') || span_id] AS path
    FROM roots
    UNION ALL
    SELECT c.span_id, c.parent_span_id, c.name, c.seq, c.start_time_ns, c.end_time_ns, c.status_code,
           c.status_message, t.depth + 1,
           list_append(t.path, lpad(CAST(c.start_time_ns AS VARCHAR), 20, '0') || c.span_id)
    FROM s AS c JOIN tree AS t ON c.parent_span_id = t.span_id
    WHERE t.depth < 64
),
kids AS (SELECT parent_span_id AS span_id, count(*) AS children FROM s GROUP BY 1)
SELECT t.span_id, t.parent_span_id, t.name, t.depth, t.seq,
       (t.start_time_ns - min(t.start_time_ns) OVER ()) / 1e6 AS start_ms,
       greatest(coalesce(t.end_time_ns, t.start_time_ns) - t.start_time_ns, 0) / 1e6 AS duration_ms,
       coalesce(t.status_code, 'UNSET') AS status_code, t.status_message,
       coalesce(k.children, 0) AS children
FROM tree AS t LEFT JOIN kids AS k USING (span_id)
ORDER BY t.path
LIMIT $limit
"""


def span_tree(src: Source, session_id: str, *, limit: int = 5000) -> pd.DataFrame:
    """The session's spans as a tree (:data:`TRACE_COLUMNS`): ``depth`` 0 for a root, ``start_ms``
    from the session's first span, ``duration_ms``, ``status_code`` (UNSET, OK or ERROR), the
    number of direct ``children``; each span follows its parent, siblings by start time. At most
    ``limit`` rows (the first in that order)."""
    return _df(src, _TREE_SQL, {"sid": session_id, "limit": int(limit)})[TRACE_COLUMNS]


def trace_size(src: Source, session_id: str) -> int:
    """How many spans the session's trace holds (what :func:`span_tree` may have cut)."""
    sql = f"SELECT count(*) AS n FROM spans WHERE session_id = $sid AND name NOT IN {_AFTERWARDS}"
    return int(_df(src, sql, {"sid": session_id})["n"].iloc[0])


__all__ = ["TRACE_COLUMNS", "span_tree", "trace_size"]
