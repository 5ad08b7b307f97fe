"""The timeline of one session: context tokens over its steps, the marks of its decisions, its bounds and budget.

Computed from :func:`tracer.queries.steps.session_tables` (extracted once, then DuckDB over Arrow),
bucketed in DuckDB so a session of 50,000 spans draws as quickly as a short one.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pyarrow as pa

from tracer.contract import names as sn
from tracer.queries._sql import (
    Source,
    _on_tables,
)
from tracer.queries.listing import session_root
from tracer.queries.steps import session_tables

_MARKED = ", ".join(f"'{n}'" for n in (sn.PRUNE, sn.DEFER, sn.SPILL, sn.FAIL, sn.VIOLATION, sn.REINJECT))


def series_from_tables(tables: dict[str, pa.Table], *, max_points: int = 2000) -> pd.DataFrame:
    """Context tokens over the session's steps: after every message event, and before/after every
    budget check. Longer series are bucketed by step in DuckDB, keeping each bucket's peak (what
    matters against the budget) and its last value."""
    sql = f"""
    WITH pts AS (
        SELECT seq, t, context_tokens AS tokens FROM events WHERE name = '{sn.MESSAGE}'
        UNION ALL SELECT seq, t - 1, tokens_before FROM events WHERE name = '{sn.BUDGET_CHECK}'
        UNION ALL SELECT seq, e, tokens_after FROM events WHERE name = '{sn.BUDGET_CHECK}'
    ),
    clean AS (SELECT * FROM pts WHERE tokens IS NOT NULL),
    bounds AS (SELECT min(seq) AS lo, max(seq) AS hi, count(*) AS n FROM clean),
    bucketed AS (
        SELECT c.*, CASE WHEN b.n <= $max_points THEN c.seq
                         ELSE b.lo + CAST(floor((c.seq - b.lo) * ($max_points / 2) / (b.hi - b.lo + 1)) AS BIGINT)
                         END AS bucket
        FROM clean c, bounds b
    )
    SELECT min(seq) AS seq, max(seq) AS seq_end, max(tokens) AS peak_tokens,
           arg_max(tokens, (seq, t)) AS tokens, count(*) AS points
    FROM bucketed GROUP BY bucket ORDER BY 1
    """
    return _on_tables(tables, lambda con: con.execute(sql, {"max_points": int(max_points)}).df())


def markers_from_tables(tables: dict[str, pa.Table], *, max_markers: int = 400) -> pd.DataFrame:
    """Steps of every prune, deferral, spill, re-injection, failure and violation (the timeline's
    marks): ``seq``, ``kind`` and ``n`` spans. Beyond ``max_markers`` marks of a kind, its marks are
    grouped into that many step buckets (first step of the bucket, ``n`` = how many)."""
    sql = f"""
    WITH m AS (SELECT seq, replace(name, '{sn.PREFIX}', '') AS kind FROM events WHERE name IN ({_MARKED})),
    b AS (SELECT kind, min(seq) AS lo, max(seq) AS hi, count(*) AS total FROM m GROUP BY kind)
    SELECT min(m.seq) AS seq, m.kind, count(*) AS n
    FROM m JOIN b USING (kind)
    GROUP BY m.kind, CASE WHEN b.total <= $max THEN m.seq
                          ELSE CAST(floor((m.seq - b.lo) * $max / (b.hi - b.lo + 1)) AS BIGINT) END
    ORDER BY seq, kind
    """
    return _on_tables(tables, lambda con: con.execute(sql, {"max": int(max_markers)}).df())


def bounds_from_tables(tables: dict[str, pa.Table]) -> tuple[int, int] | None:
    """The first and last step of the session, or None when it has no step yet."""
    row = _on_tables(tables, lambda con: con.execute("SELECT min(seq), max(seq) FROM events").fetchall()[0])
    return None if row[0] is None else (int(row[0]), int(row[1]))


def budget_from_tables(tables: dict[str, pa.Table], root: dict[str, Any] | None = None) -> dict[str, int | None]:
    """The budget and hard ceiling: the root's, else the latest budget check's."""
    row = _on_tables(tables, lambda con: con.execute(
        f"SELECT arg_max(budget, (seq, t)), arg_max(hard_ceiling, (seq, t)) FROM events "
        f"WHERE name = '{sn.BUDGET_CHECK}'").fetchall()[0])
    root = root or {}
    return {"budget": root.get("budget") or row[0], "hard_ceiling": root.get("hard_ceiling") or row[1]}


def token_series(src: Source, session_id: str, *, max_points: int = 2000) -> pd.DataFrame:
    """:func:`series_from_tables` for a session of the store."""
    return series_from_tables(session_tables(src, session_id), max_points=max_points)


def markers(src: Source, session_id: str) -> pd.DataFrame:
    """:func:`markers_from_tables` for a session of the store."""
    return markers_from_tables(session_tables(src, session_id))


def budget_at(src: Source, session_id: str) -> dict[str, int | None]:
    """The session's budget and hard ceiling (root span, else its latest budget check)."""
    return budget_from_tables(session_tables(src, session_id), session_root(src, session_id))



__all__ = [
    "budget_at", "budget_from_tables", "bounds_from_tables", "markers", "markers_from_tables", "series_from_tables",
    "token_series",
]
