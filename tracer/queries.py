"""Every query the dashboard runs, against the store's ``spans`` view (docs/spans.md).

Why a module of its own: the dashboard renders and never writes SQL, so the queries can be tested
and benchmarked without a browser, and the span contract has exactly one reader-side translation.
Rules: values travel as parameters (``$name``), never formatted into SQL; grouping, windowing and
"which message is in context at step k" run in DuckDB, not in Python loops. Each function takes
an open :class:`~tracer.store.StoreReader` (or a DuckDB connection that has a ``spans`` view)
and returns a pandas DataFrame or a plain dict.

A session's *steps* are its ``prunegate.seq`` values: the context's event counter. A message is in
context after step ``k`` when its latest message event at or before ``k`` (ordered by seq, then
start time) is not ``remove`` (``append``/``open``/``delta``/``close``/``rewrite``/``reinject``
keep or bring it in; ``remove`` takes it out, whether pruned or spilled).
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Sequence
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa

from tracer.store import StoreReader

Source = StoreReader | duckdb.DuckDBPyConnection

# Span names of the contract (docs/spans.md).
SESSION = "prunegate.session"
MESSAGE = "prunegate.message"
UNIT_CLOSE = "prunegate.unit.close"
BUDGET_CHECK = "prunegate.budget_check"
PRUNE = "prunegate.prune"
DEFER = "prunegate.defer"
SPILL = "prunegate.spill"
REINJECT = "prunegate.reinject"
FAIL = "prunegate.fail"
VIOLATION = "prunegate.violation"

# What "jump to the next ..." can aim at: a label -> the span names that count.
JUMP_TARGETS: dict[str, tuple[str, ...]] = {
    "violation": (VIOLATION,),
    "prune": (PRUNE,),
    "deferral": (DEFER,),
    "spill": (SPILL,),
    "failure": (FAIL,),
}

# Per-session metrics that compare policies; all computed by session_metrics().
METRICS: tuple[str, ...] = (
    "violations",
    "invalid_requests",
    "retries",
    "prunes",
    "deferrals",
    "spills",
    "failures",
    "peak_tokens",
    "final_tokens",
    "tokens_pruned",
    "over_budget_checks",
)


_SCRATCH: duckdb.DuckDBPyConnection | None = None
_SCRATCH_LOCK = threading.Lock()


def scratch() -> duckdb.DuckDBPyConnection:
    """A private connection to an in-memory database for queries over Arrow tables or frames.
    A cursor of one shared database: opening a fresh DuckDB database costs tens of milliseconds,
    a cursor almost nothing; each cursor has its own temp tables and registrations. Close it."""
    global _SCRATCH
    with _SCRATCH_LOCK:
        if _SCRATCH is None:
            _SCRATCH = duckdb.connect(":memory:")
        return _SCRATCH.cursor()


def _con(src: Source) -> duckdb.DuckDBPyConnection:
    return src.con if isinstance(src, StoreReader) else src


def _df(src: Source, sql: str, params: dict[str, Any] | None = None) -> pd.DataFrame:
    con = _con(src)
    return con.execute(sql, params or {}).df()


def _one(src: Source, sql: str, params: dict[str, Any]) -> tuple[Any, ...] | None:
    rows = _con(src).execute(sql, params).fetchall()  # fetch to the end: DuckDB 2 keeps a half-read result busy
    return rows[0] if rows else None


def _agg(src: Source, sql: str, params: dict[str, Any]) -> tuple[Any, ...]:
    """The row of an aggregate without GROUP BY (DuckDB returns exactly one, even over no rows)."""
    [row] = _con(src).execute(sql, params).fetchall()
    return row


def _on_frame(src: Source, frame: pd.DataFrame, sql: str, params: dict[str, Any]) -> pd.DataFrame:
    """Run ``sql`` over ``frame`` registered as the table ``frame`` on this connection."""
    con = _con(src)
    con.register("frame", frame)
    try:
        return con.execute(sql, params).df()
    finally:
        con.unregister("frame")


def _list(values: Sequence[Any] | None) -> list[Any]:
    return [v for v in (values or []) if v is not None]


# --------------------------------------------------------------------------- sessions
_SUMMARY_FIELDS = {
    "prunegate.session.source": "VARCHAR", "prunegate.session.source_id": "VARCHAR",
    "prunegate.session.name": "VARCHAR", "prunegate.provider": "VARCHAR", "prunegate.policy": "VARCHAR",
    "prunegate.policy.params": "VARCHAR", "prunegate.gated": "BOOLEAN", "prunegate.budget": "BIGINT",
    "prunegate.hard_ceiling": "BIGINT", "prunegate.content_captured": "BOOLEAN",
    "prunegate.message.id": "VARCHAR", "prunegate.event": "VARCHAR", "prunegate.message.summary_of": ["VARCHAR"],
    "prunegate.context.tokens": "BIGINT", "prunegate.tokens.before": "BIGINT", "prunegate.tokens.after": "BIGINT",
    "gen_ai.operation.name": "VARCHAR", "prunegate.tool.retry": "BOOLEAN", "prunegate.request.valid": "BOOLEAN",
}


def _summary_sql(where: str) -> str:
    """The per-session summary; ``where`` is a constant filter on spans (e.g. ``session_id = $sid``)."""
    fields = json.dumps(_SUMMARY_FIELDS).replace("'", "''")
    return f"""
WITH s AS (
    SELECT session_id, name, seq, start_time_ns, end_time_ns, from_json(attributes, '{fields}') AS a
    FROM spans WHERE session_id IS NOT NULL AND {where}
),
roots AS (
    SELECT session_id,
           any_value(a."prunegate.session.source") AS source,
           any_value(a."prunegate.session.source_id") AS source_id,
           any_value(a."prunegate.session.name") AS label,
           any_value(a."prunegate.provider") AS provider,
           any_value(a."prunegate.policy") AS policy,
           any_value(a."prunegate.policy.params") AS policy_params,
           any_value(a."prunegate.gated") AS gated,
           any_value(a."prunegate.budget") AS budget,
           any_value(a."prunegate.hard_ceiling") AS hard_ceiling,
           any_value(a."prunegate.content_captured") AS content_captured
    FROM s WHERE name = '{SESSION}' GROUP BY session_id
),
agg AS (
    SELECT session_id,
           count(DISTINCT a."prunegate.message.id")
               FILTER (WHERE name = '{MESSAGE}' AND a."prunegate.event" IN ('append', 'open')
                       AND a."prunegate.message.summary_of" IS NULL) AS messages,
           greatest(
               max(a."prunegate.context.tokens") FILTER (WHERE name = '{MESSAGE}'),
               max(a."prunegate.tokens.before") FILTER (WHERE name = '{BUDGET_CHECK}')
           ) AS peak_tokens,
           arg_max(coalesce(a."prunegate.context.tokens", a."prunegate.tokens.after"), (seq, start_time_ns))
               FILTER (WHERE name IN ('{MESSAGE}', '{BUDGET_CHECK}')) AS final_tokens,
           count(*) FILTER (WHERE name = '{BUDGET_CHECK}') AS checks,
           count(*) FILTER (WHERE name = '{BUDGET_CHECK}'
                            AND a."prunegate.tokens.before" > a."prunegate.budget") AS over_budget_checks,
           count(*) FILTER (WHERE name = '{VIOLATION}') AS violations,
           count(*) FILTER (WHERE name = '{PRUNE}') AS prunes,
           CAST(coalesce(sum(a."prunegate.tokens.before" - a."prunegate.tokens.after")
                         FILTER (WHERE name = '{PRUNE}'), 0) AS BIGINT) AS tokens_pruned,
           count(*) FILTER (WHERE name = '{DEFER}') AS deferrals,
           count(*) FILTER (WHERE name = '{SPILL}') AS spills,
           count(*) FILTER (WHERE name = '{FAIL}') AS failures,
           count(*) FILTER (WHERE a."gen_ai.operation.name" = 'execute_tool' AND a."prunegate.tool.retry") AS retries,
           count(*) FILTER (WHERE a."gen_ai.operation.name" = 'chat') AS model_calls,
           count(*) FILTER (WHERE a."gen_ai.operation.name" = 'chat'
                            AND a."prunegate.request.valid" = false) AS invalid_requests,
           max(seq) AS max_seq,
           count(*) AS spans,
           min(start_time_ns) AS first_ns,
           max(coalesce(end_time_ns, start_time_ns)) AS last_ns
    FROM s GROUP BY session_id
)
SELECT agg.session_id, roots.label, roots.source, roots.source_id, roots.provider, roots.policy,
       roots.policy_params, roots.gated, roots.budget, roots.hard_ceiling, roots.content_captured,
       agg.* EXCLUDE (session_id)
FROM agg LEFT JOIN roots USING (session_id)
"""


_SESSION_SUMMARY = _summary_sql("true")
_ONE_SESSION_SUMMARY = _summary_sql("session_id = $sid")


def sessions(
    src: Source,
    *,
    sources: Sequence[str] | None = None,
    policies: Sequence[str] | None = None,
    gated: bool | None = None,
    text: str | None = None,
    only_with_violations: bool = False,
    limit: int = 5000,
) -> pd.DataFrame:
    """One row per session (source, policy, gated, messages, peak tokens, violations, deferrals,
    spills, failures, ...), newest activity first, filtered in DuckDB."""
    sql = f"""
    SELECT * FROM ({_SESSION_SUMMARY}) t
    WHERE (len(CAST($sources AS VARCHAR[])) = 0
           OR list_contains(CAST($sources AS VARCHAR[]), coalesce(source, '')))
      AND (len(CAST($policies AS VARCHAR[])) = 0
           OR list_contains(CAST($policies AS VARCHAR[]), coalesce(policy, '')))
      AND (CAST($gated AS BOOLEAN) IS NULL OR gated = CAST($gated AS BOOLEAN))
      AND (CAST($text AS VARCHAR) IS NULL OR contains(lower(session_id), lower(CAST($text AS VARCHAR)))
           OR contains(lower(coalesce(label, '')), lower(CAST($text AS VARCHAR))))
      AND (NOT $only_v OR violations > 0)
    ORDER BY last_ns DESC NULLS LAST, session_id
    LIMIT $limit
    """
    params = {
        "sources": _list(sources),
        "policies": _list(policies),
        "gated": gated,
        "text": text or None,
        "only_v": bool(only_with_violations),
        "limit": int(limit),
    }
    return _df(src, sql, params)


def session_filter_options(src: Source) -> dict[str, list[str]]:
    """Distinct sources and policies, for the filter widgets."""
    rows = _agg(
        src,
        f"""
        SELECT list(DISTINCT attributes->>'prunegate.session.source') FILTER (WHERE attributes->>'prunegate.session.source' IS NOT NULL),
               list(DISTINCT attributes->>'prunegate.policy') FILTER (WHERE attributes->>'prunegate.policy' IS NOT NULL)
        FROM spans WHERE name = '{SESSION}'
        """,
        {},
    )
    return {"sources": sorted(rows[0] or []), "policies": sorted(rows[1] or [])}


def session_info(src: Source, session_id: str) -> dict[str, Any] | None:
    """The summary row of one session (as :func:`sessions`), or None when it has no spans."""
    df = _df(src, _ONE_SESSION_SUMMARY, {"sid": session_id})
    if df.empty:
        return None
    return _first_row(df)


def _isna(v: Any) -> bool:
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def _first_row(df: pd.DataFrame) -> dict[str, Any]:
    """The first row of ``df`` by column name, pandas' missing values (NaN, NaT, NA) as None."""
    return {str(k): (None if _isna(v) else v) for k, v in df.iloc[0].to_dict().items()}


def session_bounds(src: Source, session_id: str) -> tuple[int, int] | None:
    """The first and last step (``prunegate.seq``) of a session, or None when it has none."""
    row = _one(
        src,
        "SELECT min(seq), max(seq) FROM spans WHERE session_id = $sid AND seq IS NOT NULL",
        {"sid": session_id},
    )
    if row is None or row[0] is None:
        return None
    return int(row[0]), int(row[1])


# --------------------------------------------------------------------------- replay: context at a step
def _struct(fields: dict[str, Any]) -> str:
    """A ``from_json`` structure for these attribute keys: one JSON parse per span, not one per key."""
    return json.dumps(fields).replace("'", "''")


_MSG_FIELDS = _struct({
    "prunegate.message.id": "VARCHAR", "prunegate.event": "VARCHAR", "prunegate.message.role": "VARCHAR",
    "prunegate.unit.id": "VARCHAR", "prunegate.message.tokens": "BIGINT", "prunegate.message.closed": "BOOLEAN",
    "prunegate.message.call_ids": ["VARCHAR"], "prunegate.message.answers": ["VARCHAR"],
    "prunegate.message.tool_names": ["VARCHAR"], "prunegate.message.content": "VARCHAR",
    "prunegate.context.tokens": "BIGINT",
})
_CLOSE_FIELDS = _struct({
    "prunegate.unit.id": "VARCHAR", "prunegate.unit.kind": "VARCHAR", "prunegate.unit.message_ids": ["VARCHAR"],
})

# A session's message events with their attributes extracted (every step at once).
_MSG_EVENTS_SQL = f"""
SELECT seq, start_time_ns AS t,
       j."prunegate.message.id" AS message_id, j."prunegate.event" AS event,
       j."prunegate.message.role" AS role, j."prunegate.unit.id" AS unit_id,
       j."prunegate.message.tokens" AS tokens, j."prunegate.message.closed" AS closed,
       coalesce(j."prunegate.message.call_ids", []) AS call_ids,
       coalesce(j."prunegate.message.answers", []) AS answers,
       coalesce(j."prunegate.message.tool_names", []) AS tool_names,
       j."prunegate.message.content" AS content,
       j."prunegate.context.tokens" AS context_tokens
FROM (SELECT seq, start_time_ns, from_json(attributes, '{_MSG_FIELDS}') AS j
      FROM spans WHERE session_id = $sid AND name = '{MESSAGE}' AND seq IS NOT NULL) x
"""
# A session's unit closures, one row per member message.
_CLOSES_SQL = f"""
SELECT seq, t, unnest(message_ids) AS message_id, unit_id, unit_kind
FROM (SELECT seq, start_time_ns AS t, j."prunegate.unit.id" AS unit_id, j."prunegate.unit.kind" AS unit_kind,
             coalesce(j."prunegate.unit.message_ids", []) AS message_ids
      FROM (SELECT seq, start_time_ns, from_json(attributes, '{_CLOSE_FIELDS}') AS j
            FROM spans WHERE session_id = $sid AND name = '{UNIT_CLOSE}' AND seq IS NOT NULL) x) y
"""

# The messages in context after step $seq, from the relations msg_events and unit_closes.
_STEP_SQL = """
WITH m AS (SELECT * FROM msg_events WHERE seq <= $seq),
latest AS (
    SELECT * EXCLUDE (content) FROM m
    QUALIFY row_number() OVER (PARTITION BY message_id ORDER BY seq DESC, t DESC) = 1
),
firsts AS (
    SELECT message_id,
           min(seq) FILTER (WHERE event IN ('append', 'open')) AS first_seq,
           min(t) FILTER (WHERE event IN ('append', 'open')) AS first_t,
           arg_max(content, (seq, t)) FILTER (WHERE content IS NOT NULL) AS content
    FROM m GROUP BY message_id
),
answered AS (SELECT DISTINCT unnest(answers) AS call_id FROM m),
last_close AS (
    SELECT * FROM unit_closes WHERE seq <= $seq
    QUALIFY row_number() OVER (PARTITION BY message_id ORDER BY seq DESC, t DESC) = 1
),
present AS (
    SELECT l.message_id, l.role, l.tokens, l.closed, l.event AS last_event, l.seq AS last_seq,
           coalesce(f.first_seq, l.seq) AS first_seq, coalesce(f.first_t, l.t) AS first_t,
           CASE WHEN c.unit_id IS NOT NULL AND (c.seq > l.seq OR (c.seq = l.seq AND c.t >= l.t))
                THEN c.unit_id ELSE coalesce(l.unit_id, l.message_id) END AS unit_id,
           c.unit_kind, l.call_ids, l.answers, l.tool_names, f.content
    FROM latest l
    LEFT JOIN firsts f USING (message_id)
    LEFT JOIN last_close c USING (message_id)
    WHERE l.event <> 'remove'
),
pending AS (
    SELECT message_id, list(call_id ORDER BY call_id) AS pending_calls
    FROM (SELECT message_id, unnest(call_ids) AS call_id FROM present) x
    WHERE call_id NOT IN (SELECT call_id FROM answered WHERE call_id IS NOT NULL)
    GROUP BY message_id
),
ordered AS (
    SELECT p.*, coalesce(pd.pending_calls, []) AS pending_calls,
           row_number() OVER (ORDER BY p.first_seq, p.first_t, p.message_id) - 1 AS position
    FROM present p LEFT JOIN pending pd USING (message_id)
),
pins AS (
    SELECT *,
           role = 'system'
           OR position = min(CASE WHEN role = 'user' THEN position END) OVER ()
           OR position = max(CASE WHEN role = 'user' THEN position END) OVER ()
           OR position = max(position) OVER () AS pinned_message
    FROM ordered
)
SELECT position, message_id, role, unit_id,
       coalesce(unit_kind, CASE WHEN count(*) OVER (PARTITION BY unit_id) > 1 THEN 'batch' ELSE role END)
           AS kind,
       tokens, closed, NOT coalesce(closed, true) AS open,
       len(pending_calls) > 0 AS pending, pending_calls,
       coalesce(bool_or(pinned_message) OVER (PARTITION BY unit_id), false) AS pinned,
       call_ids, answers, tool_names, first_seq, last_seq, last_event, content
FROM pins
"""

# The context as units, from the step_ctx table the step query filled.
_UNITS_SQL = """
SELECT *, CAST(coalesce(sum(tokens) OVER (ORDER BY position ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)
               AS BIGINT) AS offset
FROM (
    SELECT unit_id, any_value(kind) AS kind, min(position) AS position,
           CAST(sum(coalesce(tokens, 0)) AS BIGINT) AS tokens, count(*) AS messages,
           list(message_id ORDER BY position) AS message_ids,
           list(DISTINCT role) AS roles,
           bool_or(open) AS open, bool_or(pending) AS pending, bool_or(pinned) AS pinned,
           flatten(list(pending_calls)) AS pending_calls,
           flatten(list(tool_names)) AS tool_names
    FROM step_ctx GROUP BY unit_id
) u
ORDER BY position
"""


_EVENT_FIELDS = _struct({
    "prunegate.event": "VARCHAR", "prunegate.message.id": "VARCHAR", "prunegate.message.role": "VARCHAR",
    "prunegate.unit.id": "VARCHAR", "gen_ai.tool.call.id": "VARCHAR", "gen_ai.operation.name": "VARCHAR",
    "prunegate.decision": "VARCHAR", "prunegate.violation.code": "VARCHAR",
    "prunegate.pruned.units": ["VARCHAR"], "prunegate.blocking.units": ["VARCHAR"],
    "prunegate.spilled.units": ["VARCHAR"], "prunegate.violation.ids": ["VARCHAR"],
    "prunegate.context.tokens": "BIGINT", "prunegate.tokens.before": "BIGINT", "prunegate.tokens.after": "BIGINT",
    "prunegate.budget": "BIGINT", "prunegate.hard_ceiling": "BIGINT",
    "prunegate.message.cause": "VARCHAR", "prunegate.violation.message": "VARCHAR", "prunegate.error": "VARCHAR",
    "prunegate.reason": "VARCHAR", "prunegate.policy": "VARCHAR",
})
_DECISIONS = (BUDGET_CHECK, PRUNE, DEFER, SPILL, REINJECT, FAIL)
_IN_DECISIONS = ", ".join(f"'{n}'" for n in _DECISIONS)
_MARKED = ", ".join(f"'{n}'" for n in (PRUNE, DEFER, SPILL, FAIL, VIOLATION, REINJECT))

# Every span of a session that has a step, as one event-log row each (the root is left out).
_EVENTS_SQL = f"""
SELECT seq, t, e, name, span_id, status_code,
       CASE WHEN name = '{MESSAGE}' THEN j."prunegate.event"
            WHEN name = '{BUDGET_CHECK}' THEN j."prunegate.decision"
            WHEN name = '{VIOLATION}' THEN j."prunegate.violation.code"
            WHEN j."gen_ai.operation.name" IS NOT NULL THEN j."gen_ai.operation.name"
            ELSE replace(name, 'prunegate.', '') END AS what,
       coalesce(j."prunegate.message.id", j."prunegate.unit.id", j."gen_ai.tool.call.id",
                nullif(array_to_string(j."prunegate.pruned.units", ', '), ''),
                nullif(array_to_string(j."prunegate.spilled.units", ', '), ''),
                nullif(array_to_string(j."prunegate.blocking.units", ', '), ''),
                nullif(array_to_string(j."prunegate.violation.ids", ', '), '')) AS subject,
       j."prunegate.message.role" AS role,
       coalesce(j."prunegate.context.tokens", j."prunegate.tokens.after") AS context_tokens,
       j."prunegate.tokens.before" AS tokens_before, j."prunegate.tokens.after" AS tokens_after,
       j."prunegate.budget" AS budget, j."prunegate.hard_ceiling" AS hard_ceiling,
       coalesce(j."prunegate.message.cause", j."prunegate.violation.message", j."prunegate.error",
                j."prunegate.reason", status_message) AS detail,
       j."prunegate.policy" AS policy,
       CASE WHEN name IN ({_IN_DECISIONS}) THEN attributes END AS attributes,
       status_message
FROM (SELECT seq, start_time_ns AS t, coalesce(end_time_ns, start_time_ns) AS e, name, span_id, status_code,
             status_message, CAST(attributes AS VARCHAR) AS attributes, from_json(attributes, '{_EVENT_FIELDS}') AS j
      FROM spans WHERE session_id = $sid AND seq IS NOT NULL AND name <> '{SESSION}') x
"""

_ROOT_FIELDS = _struct({
    "prunegate.session.name": "VARCHAR", "prunegate.session.source": "VARCHAR",
    "prunegate.session.source_id": "VARCHAR", "prunegate.provider": "VARCHAR", "prunegate.policy": "VARCHAR",
    "prunegate.gated": "BOOLEAN", "prunegate.budget": "BIGINT", "prunegate.hard_ceiling": "BIGINT",
    "prunegate.content_captured": "BOOLEAN",
})


def session_root(src: Source, session_id: str) -> dict[str, Any] | None:
    """A session's root attributes (name as ``label``, source, policy, gated, budget, ...): cheap,
    reads the root span only. None while the session is still recording (no root yet) or unknown."""
    row = _one(src, f"""
        SELECT j."prunegate.session.name", j."prunegate.session.source", j."prunegate.session.source_id",
               j."prunegate.provider", j."prunegate.policy", j."prunegate.gated", j."prunegate.budget",
               j."prunegate.hard_ceiling", j."prunegate.content_captured"
        FROM (SELECT from_json(attributes, '{_ROOT_FIELDS}') AS j FROM spans
              WHERE session_id = $sid AND name = '{SESSION}' LIMIT 1) x
        """, {"sid": session_id})
    if row is None:
        return None
    keys = ("label", "source", "source_id", "provider", "policy", "gated", "budget", "hard_ceiling",
            "content_captured")
    return {"session_id": session_id, **dict(zip(keys, row, strict=True))}


def session_tables(src: Source, session_id: str) -> dict[str, pa.Table]:
    """A session's spans with their attributes extracted once (one JSON parse per span), as Arrow
    tables: ``msg_events`` (message events), ``unit_closes`` (one row per member message) and
    ``events`` (every span with a step: the event log, budget checks and decisions). Every
    ``*_from_tables`` function answers from these without the store; extracting once and stepping
    many times is what keeps a long session's replay fast."""
    con = _con(src)
    params = {"sid": session_id}
    return {
        "msg_events": con.sql(_MSG_EVENTS_SQL, params=params).to_arrow_table(),
        "unit_closes": con.sql(_CLOSES_SQL, params=params).to_arrow_table(),
        "events": con.sql(_EVENTS_SQL, params=params).to_arrow_table(),
    }


def _on_tables(tables: dict[str, pa.Table], fn: Any) -> Any:
    con = scratch()
    try:
        for name, table in tables.items():
            con.register(name, table)
        return fn(con)
    finally:
        con.close()


def step_from_tables(tables: dict[str, pa.Table], seq: int, *, with_content: bool = True,
                     before: int = 12, after: int = 12) -> dict[str, pd.DataFrame]:
    """Everything about step ``seq`` from :func:`session_tables`, computed by DuckDB over the Arrow
    tables: ``messages`` in context (see :func:`context_at`), ``units`` (see :func:`units_at`),
    and, when the tables hold ``events``, the ``events`` log from ``seq - before`` to
    ``seq + after`` and the budget ``check`` with its decision at ``seq``."""

    def run(con: duckdb.DuckDBPyConnection) -> dict[str, pd.DataFrame]:
        con.execute(f"CREATE TEMP TABLE step_ctx AS {_STEP_SQL}", {"seq": int(seq)})
        messages = con.execute("SELECT * FROM step_ctx ORDER BY position").df()
        if not with_content:
            messages = messages.drop(columns=["content"])
        out = {"messages": messages, "units": con.execute(_UNITS_SQL).df()}
        if "events" in tables:
            out["events"] = _event_log(con, int(seq), before, after)
            out["check"] = _check(con, int(seq))
        return out

    return _on_tables(tables, run)


def _event_log(con: duckdb.DuckDBPyConnection, seq: int, before: int, after: int) -> pd.DataFrame:
    return con.execute(
        "SELECT seq, t AS start_time_ns, name, span_id, status_code, what, subject, role, context_tokens, detail, "
        "policy FROM events WHERE seq BETWEEN $lo AND $hi ORDER BY seq, t, span_id",
        {"lo": seq - before, "hi": seq + after},
    ).df()


def _check(con: duckdb.DuckDBPyConnection, seq: int) -> pd.DataFrame:
    return con.execute(
        f"SELECT name, span_id, status_code, status_message, attributes FROM events "
        f"WHERE seq = $seq AND name IN ({_IN_DECISIONS}) ORDER BY t, name",
        {"seq": seq},
    ).df()


def series_from_tables(tables: dict[str, pa.Table], *, max_points: int = 2000) -> pd.DataFrame:
    """Context tokens over the session's steps: after every message event, and before/after every
    budget check. Longer series are bucketed by step in DuckDB, keeping each bucket's peak (what
    matters against the budget) and its last value."""
    sql = f"""
    WITH pts AS (
        SELECT seq, t, context_tokens AS tokens FROM events WHERE name = '{MESSAGE}'
        UNION ALL SELECT seq, t - 1, tokens_before FROM events WHERE name = '{BUDGET_CHECK}'
        UNION ALL SELECT seq, e, tokens_after FROM events WHERE name = '{BUDGET_CHECK}'
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
    WITH m AS (SELECT seq, replace(name, 'prunegate.', '') AS kind FROM events WHERE name IN ({_MARKED})),
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
        f"WHERE name = '{BUDGET_CHECK}'").fetchall()[0])
    root = root or {}
    return {"budget": root.get("budget") or row[0], "hard_ceiling": root.get("hard_ceiling") or row[1]}


def next_from_tables(tables: dict[str, pa.Table], seq: int, target: str, *, backwards: bool = False) -> int | None:
    """The next (or previous) step after ``seq`` holding a span of ``target`` (a key of
    :data:`JUMP_TARGETS`), or None when there is none."""
    if target not in JUMP_TARGETS:
        raise ValueError(f"unknown jump target {target!r}; expected one of {sorted(JUMP_TARGETS)}")
    agg, cmp = ("max", "<") if backwards else ("min", ">")
    row = _on_tables(tables, lambda con: con.execute(
        f"SELECT {agg}(seq) FROM events WHERE seq {cmp} $seq AND list_contains(CAST($names AS VARCHAR[]), name)",
        {"seq": int(seq), "names": list(JUMP_TARGETS[target])}).fetchall()[0])
    return None if row[0] is None else int(row[0])


def context_at(src: Source, session_id: str, seq: int, *, with_content: bool = False) -> pd.DataFrame:
    """The messages in context after step ``seq``, in context order, one row each, with unit,
    kind, tokens and the flags the replay marks: ``open`` (streaming), ``pending`` (issues a call
    with no result yet), ``pinned`` (the gate never prunes it: system units, the first user
    message, the last user message and the last message; explicit ``Context.pin`` calls are not
    recorded in spans). ``content`` (with ``with_content``) is the latest recorded content."""
    return step_from_tables(session_tables(src, session_id), seq, with_content=with_content)["messages"]


def units_at(src: Source, session_id: str, seq: int) -> pd.DataFrame:
    """The context after step ``seq`` as units (the replay's bar): tokens per unit, its kind,
    its messages and whether any of them is open, pending or pinned; in context order, with the
    token offset where each unit starts."""
    return step_from_tables(session_tables(src, session_id), seq, with_content=False)["units"]


def token_series(src: Source, session_id: str, *, max_points: int = 2000) -> pd.DataFrame:
    """:func:`series_from_tables` for a session of the store."""
    return series_from_tables(session_tables(src, session_id), max_points=max_points)


def markers(src: Source, session_id: str) -> pd.DataFrame:
    """:func:`markers_from_tables` for a session of the store."""
    return markers_from_tables(session_tables(src, session_id))


def event_log(src: Source, session_id: str, seq: int, *, before: int = 12, after: int = 12) -> pd.DataFrame:
    """The session's spans from step ``seq - before`` to ``seq + after`` as an event log, one row
    per span, in event order (the root is left out)."""
    return step_from_tables(session_tables(src, session_id), seq, before=before, after=after)["events"]


def check_at(src: Source, session_id: str, seq: int) -> pd.DataFrame:
    """The budget check and its decision span at step ``seq`` (0, 1 or 2 rows), attributes as JSON text."""
    return step_from_tables(session_tables(src, session_id), seq)["check"]


def budget_at(src: Source, session_id: str) -> dict[str, int | None]:
    """The session's budget and hard ceiling (root span, else its latest budget check)."""
    return budget_from_tables(session_tables(src, session_id), session_root(src, session_id))


def next_step(src: Source, session_id: str, seq: int, target: str, *, backwards: bool = False) -> int | None:
    """:func:`next_from_tables` for a session of the store."""
    if target not in JUMP_TARGETS:
        raise ValueError(f"unknown jump target {target!r}; expected one of {sorted(JUMP_TARGETS)}")
    return next_from_tables(session_tables(src, session_id), seq, target, backwards=backwards)


def message_detail(src: Source, session_id: str, message_id: str) -> pd.DataFrame:
    """Every event of one message (its history), with the recorded content when captured."""
    sql = f"""
    SELECT seq, attributes->>'prunegate.event' AS event, attributes->>'prunegate.unit.id' AS unit_id,
           TRY_CAST(attributes->>'prunegate.message.tokens' AS BIGINT) AS tokens,
           attributes->>'prunegate.message.cause' AS cause,
           attributes->>'prunegate.message.content' AS content,
           attributes->>'prunegate.delta.text' AS delta_text
    FROM spans
    WHERE session_id = $sid AND name = '{MESSAGE}' AND attributes->>'prunegate.message.id' = $mid
    ORDER BY seq, start_time_ns
    """
    return _df(src, sql, {"sid": session_id, "mid": message_id})


# --------------------------------------------------------------------------- violations
_LINK_TYPE = '[{"trace_id":"VARCHAR","span_id":"VARCHAR","attributes":"JSON"}]'


def violations(src: Source, *, session_id: str | None = None, limit: int = 2000) -> pd.DataFrame:
    """Every violation with the prune that caused it (followed through the violation's span link
    whose ``prunegate.link`` is ``caused_by``; the first link when none says so): the prune's
    step, policy, pruned units and ids, and whether that prune was gated."""
    sql = f"""
    WITH v AS (
        SELECT session_id, seq, trace_id, span_id, start_time_ns,
               attributes->>'prunegate.violation.code' AS code,
               coalesce(attributes->>'prunegate.violation.message', status_message) AS message,
               coalesce(from_json(attributes->'prunegate.violation.ids', '["VARCHAR"]'), []) AS ids,
               coalesce(from_json(attributes->'prunegate.violation.message_ids', '["VARCHAR"]'), []) AS message_ids,
               attributes->>'prunegate.violation.evicted_id' AS evicted_id,
               TRY_CAST(attributes->>'prunegate.violation.index' AS BIGINT) AS request_index,
               links
        FROM spans
        WHERE name = '{VIOLATION}' AND (CAST($sid AS VARCHAR) IS NULL OR session_id = CAST($sid AS VARCHAR))
    ),
    l AS (
        SELECT v.span_id AS violation_span_id, v.trace_id AS violation_trace_id,
               unnest(coalesce(from_json(v.links, '{_LINK_TYPE}'), [])) AS link
        FROM v
    ),
    cause AS (
        SELECT violation_span_id, violation_trace_id,
               arg_min(link.span_id, CASE WHEN link.attributes->>'prunegate.link' = 'caused_by' THEN 0 ELSE 1 END)
                   AS cause_span_id,
               arg_min(link.trace_id, CASE WHEN link.attributes->>'prunegate.link' = 'caused_by' THEN 0 ELSE 1 END)
                   AS cause_trace_id
        FROM l GROUP BY ALL
    ),
    roots AS (
        SELECT session_id, any_value(attributes->>'prunegate.session.name') AS label
        FROM spans WHERE name = '{SESSION}' AND session_id IN (SELECT session_id FROM v)
        GROUP BY session_id
    )
    SELECT v.session_id, roots.label, v.seq, v.span_id, v.trace_id, v.code, v.message, v.ids, v.message_ids,
           v.evicted_id, v.request_index,
           c.cause_span_id, c.cause_trace_id,
           p.seq AS prune_seq, p.name AS cause_name,
           p.attributes->>'prunegate.policy' AS policy,
           TRY_CAST(p.attributes->>'prunegate.gated' AS BOOLEAN) AS prune_gated,
           coalesce(from_json(p.attributes->'prunegate.pruned.units', '["VARCHAR"]'), []) AS pruned_units,
           coalesce(from_json(p.attributes->'prunegate.pruned.ids', '["VARCHAR"]'), []) AS pruned_ids,
           TRY_CAST(p.attributes->>'prunegate.tokens.before' AS BIGINT) AS prune_tokens_before,
           TRY_CAST(p.attributes->>'prunegate.tokens.after' AS BIGINT) AS prune_tokens_after
    FROM v
    LEFT JOIN cause c ON c.violation_span_id = v.span_id AND c.violation_trace_id = v.trace_id
    LEFT JOIN spans p ON p.span_id = c.cause_span_id AND p.trace_id = c.cause_trace_id
    LEFT JOIN roots ON roots.session_id = v.session_id
    ORDER BY v.start_time_ns DESC, v.session_id, v.seq
    LIMIT $limit
    """
    return _df(src, sql, {"sid": session_id, "limit": int(limit)})


def causal_eviction(src: Source, violation_span_id: str) -> dict[str, Any] | None:
    """Everything the Violations page shows about one violation: the violation, the prune span it
    links to (policy, proposal, scores, grown/shrunk/skipped units), the *partners* (evicted
    messages whose id, tool call ids or answered ids the violation names, with the score the
    policy gave their unit), and the steps to draw the context before and after the prune."""
    sql = f"""
    WITH v AS (
        SELECT * FROM spans WHERE span_id = $vid AND name = '{VIOLATION}' LIMIT 1
    ),
    link AS (
        SELECT unnest(coalesce(from_json(v.links, '{_LINK_TYPE}'), [])) AS l FROM v
    ),
    cause AS (
        SELECT arg_min(l.span_id, CASE WHEN l.attributes->>'prunegate.link' = 'caused_by' THEN 0 ELSE 1 END) AS sid,
               arg_min(l.trace_id, CASE WHEN l.attributes->>'prunegate.link' = 'caused_by' THEN 0 ELSE 1 END) AS tid
        FROM link
    )
    SELECT v.session_id, v.seq, v.span_id, v.status_message, v.attributes AS violation,
           p.span_id AS prune_span_id, p.seq AS prune_seq, p.name AS prune_name, p.attributes AS prune,
           chk.attributes AS check_attributes
    FROM v
    LEFT JOIN cause ON true
    LEFT JOIN spans p ON p.span_id = cause.sid AND p.trace_id = cause.tid
    LEFT JOIN spans chk ON chk.span_id = p.parent_span_id AND chk.trace_id = p.trace_id
    """
    df = _df(src, sql, {"vid": violation_span_id})
    if df.empty:
        return None
    row = _first_row(df)
    row["partners"] = (
        partners(src, violation_span_id) if row.get("prune_span_id") else pd.DataFrame()
    )
    return row


def partners(src: Source, violation_span_id: str) -> pd.DataFrame:
    """The messages the causing prune evicted that the violation is about: a pruned message whose
    id is named by the violation, or whose tool calls / answers share an id with it, or whose unit
    holds such a message. With the message's role, unit, tokens, the policy's score for its unit and
    its last recorded content (when captured)."""
    sql = f"""
    WITH v AS (
        SELECT session_id, trace_id, links,
               list_concat(coalesce(from_json(attributes->'prunegate.violation.ids', '["VARCHAR"]'), []),
                           coalesce(from_json(attributes->'prunegate.violation.message_ids', '["VARCHAR"]'), []),
                           list_filter([attributes->>'prunegate.violation.evicted_id'], lambda x: x IS NOT NULL)) AS ids
        FROM spans WHERE span_id = $vid AND name = '{VIOLATION}' LIMIT 1
    ),
    link AS (SELECT unnest(coalesce(from_json(links, '{_LINK_TYPE}'), [])) AS l FROM v),
    cause AS (
        SELECT arg_min(l.span_id, CASE WHEN l.attributes->>'prunegate.link' = 'caused_by' THEN 0 ELSE 1 END) AS sid,
               arg_min(l.trace_id, CASE WHEN l.attributes->>'prunegate.link' = 'caused_by' THEN 0 ELSE 1 END) AS tid
        FROM link
    ),
    p AS (
        SELECT spans.session_id, spans.seq, TRY_CAST(spans.attributes->>'prunegate.scores' AS JSON) AS scores,
               coalesce(from_json(spans.attributes->'prunegate.pruned.ids', '["VARCHAR"]'), []) AS pruned_ids
        FROM spans, cause WHERE spans.span_id = cause.sid AND spans.trace_id = cause.tid
    ),
    removed AS (
        SELECT s.attributes->>'prunegate.message.id' AS message_id,
               s.attributes->>'prunegate.unit.id' AS unit_id,
               s.attributes->>'prunegate.message.role' AS role,
               TRY_CAST(s.attributes->>'prunegate.message.tokens' AS BIGINT) AS tokens,
               coalesce(from_json(s.attributes->'prunegate.message.call_ids', '["VARCHAR"]'), []) AS call_ids,
               coalesce(from_json(s.attributes->'prunegate.message.answers', '["VARCHAR"]'), []) AS answers,
               s.attributes->>'prunegate.message.cause' AS cause,
               p.scores
        FROM spans s, p
        WHERE s.session_id = p.session_id AND s.name = '{MESSAGE}' AND s.seq = p.seq
          AND s.attributes->>'prunegate.event' = 'remove'
          AND list_contains(p.pruned_ids, s.attributes->>'prunegate.message.id')
    ),
    contents AS (
        SELECT s.attributes->>'prunegate.message.id' AS message_id,
               arg_max(s.attributes->>'prunegate.message.content', (s.seq, s.start_time_ns)) AS content
        FROM spans s, p
        WHERE s.session_id = p.session_id AND s.name = '{MESSAGE}' AND s.seq <= p.seq
          AND s.attributes->>'prunegate.message.content' IS NOT NULL
          AND list_contains(p.pruned_ids, s.attributes->>'prunegate.message.id')
        GROUP BY 1
    ),
    named AS (
        SELECT r.*, (list_contains(v.ids, r.message_id)
                     OR len(list_intersect(r.call_ids, v.ids)) > 0
                     OR len(list_intersect(r.answers, v.ids)) > 0) AS direct
        FROM removed r, v
    )
    SELECT n.message_id, n.unit_id, n.role, n.tokens, n.call_ids, n.answers, n.cause, n.direct,
           TRY_CAST(json_extract_string(n.scores, n.unit_id) AS DOUBLE) AS score, c.content
    FROM named n LEFT JOIN contents c USING (message_id)
    WHERE n.direct OR n.unit_id IN (SELECT unit_id FROM named WHERE direct)
    ORDER BY direct DESC, message_id
    """
    return _df(src, sql, {"vid": violation_span_id})


def retries(src: Source, *, session_id: str | None = None) -> pd.DataFrame:
    """Repeated side-effecting calls: ``execute_tool`` spans flagged ``prunegate.tool.retry``, with
    the step of the first execution of the same call id (the one the retry repeats)."""
    sql = """
    WITH t AS (
        SELECT session_id, seq, start_time_ns, span_id,
               attributes->>'gen_ai.tool.name' AS tool,
               attributes->>'gen_ai.tool.call.id' AS call_id,
               TRY_CAST(attributes->>'prunegate.tool.side_effect' AS BOOLEAN) AS side_effect,
               coalesce(TRY_CAST(attributes->>'prunegate.tool.retry' AS BOOLEAN), false) AS retry
        FROM spans
        WHERE attributes->>'gen_ai.operation.name' = 'execute_tool'
          AND (CAST($sid AS VARCHAR) IS NULL OR session_id = CAST($sid AS VARCHAR))
    )
    SELECT r.session_id, r.seq, r.tool, r.call_id, r.side_effect, r.span_id,
           (SELECT min(o.seq) FROM t o WHERE o.session_id = r.session_id AND o.call_id = r.call_id
                                        AND NOT o.retry) AS first_seq,
           (SELECT count(*) FROM t o WHERE o.session_id = r.session_id AND o.call_id = r.call_id) AS executions
    FROM t r WHERE r.retry
    ORDER BY r.start_time_ns DESC
    """
    return _df(src, sql, {"sid": session_id})


# --------------------------------------------------------------------------- compare
def session_metrics(
    src: Source,
    *,
    session_ids: Sequence[str] | None = None,
    source_ids: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Per-session metrics (:data:`METRICS`) with the session's policy, gated flag and the session
    it replays (``source_id``: a recorded session is its own source; a replay of a conversation that
    was never recorded pairs by name). Filter by the sessions themselves and/or by their sources."""
    cols = ", ".join(METRICS)
    sql = f"""
    SELECT session_id, coalesce(source_id, CASE WHEN source = 'replay' THEN label END, session_id) AS source_id,
           label, source,
           coalesce(policy, '(recorded)') AS policy, gated,
           CASE WHEN policy IS NULL THEN '(recorded)'
                WHEN gated THEN policy || ' · gated'
                WHEN gated = false THEN policy || ' · ungated'
                ELSE policy END AS arm,
           budget, {cols}
    FROM ({_SESSION_SUMMARY}) t
    WHERE (len(CAST($sids AS VARCHAR[])) = 0 OR list_contains(CAST($sids AS VARCHAR[]), session_id))
      AND (len(CAST($srcs AS VARCHAR[])) = 0
           OR list_contains(CAST($srcs AS VARCHAR[]),
                            coalesce(source_id, CASE WHEN source = 'replay' THEN label END, session_id)))
    ORDER BY source_id, arm
    """
    return _df(src, sql, {"sids": _list(session_ids), "srcs": _list(source_ids)})


def arm_summary(src: Source, metrics: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Mean of ``metric`` per arm (policy · gated) with a 95% confidence interval (Student t for
    small n, normal beyond 30), computed in DuckDB over the per-session rows."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; expected one of {list(METRICS)}")
    out = _on_frame(
        src,
        metrics[["arm", metric]].rename(columns={metric: "value"}),
        """
        SELECT arm, count(value) AS n, avg(value) AS mean, stddev_samp(value) AS sd,
               min(value) AS min, max(value) AS max, sum(value) AS total
        FROM frame GROUP BY arm ORDER BY arm
        """,
        {},
    )
    half = [
        _t95(int(n)) * sd / math.sqrt(n) if n > 1 and not _isna(sd) else float("nan")
        for n, sd in zip(out["n"], out["sd"], strict=True)
    ]
    out["ci_low"] = out["mean"] - pd.Series(half)
    out["ci_high"] = out["mean"] + pd.Series(half)
    return out


def paired_differences(src: Source, metrics: pd.DataFrame, metric: str, baseline: str) -> pd.DataFrame:
    """Per source session: each arm's ``metric`` minus the baseline arm's, for sessions both ran."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; expected one of {list(METRICS)}")
    return _on_frame(
        src,
        metrics[["source_id", "label", "arm", metric]].rename(columns={metric: "value"}),
        """
        WITH per AS (SELECT source_id, any_value(label) AS label, arm, avg(value) AS value
                     FROM frame GROUP BY source_id, arm)
        SELECT a.source_id, b.label, a.arm, b.value AS baseline, a.value, a.value - b.value AS difference
        FROM per a JOIN per b ON a.source_id = b.source_id AND b.arm = $base AND a.arm <> $base
        ORDER BY a.arm, a.source_id
        """,
        {"base": baseline},
    )


def _t95(n: int) -> float:
    """Two-sided 95% Student t quantile for n-1 degrees of freedom (table; normal beyond 30)."""
    table = {
        1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
        10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110,
        18: 2.101, 19: 2.093, 20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060,
        26: 2.056, 27: 2.052, 28: 2.048, 29: 2.045, 30: 2.042,
    }  # fmt: skip
    return table.get(n - 1, 1.96)


# --------------------------------------------------------------------------- live
def live_sessions(src: Source, *, since_ns: int, limit: int = 50) -> pd.DataFrame:
    """Sessions with spans that started at or after ``since_ns`` (Unix ns), most recent first,
    with their latest context tokens and last decision."""
    sql = f"""
    WITH recent AS (
        SELECT session_id FROM spans
        WHERE session_id IS NOT NULL AND start_time_ns >= $since
        GROUP BY session_id
    ),
    s AS (SELECT sp.* FROM spans sp JOIN recent USING (session_id))
    SELECT session_id,
           any_value(attributes->>'prunegate.session.source') FILTER (WHERE name = '{SESSION}') AS source,
           any_value(attributes->>'prunegate.policy') FILTER (WHERE name = '{SESSION}') AS policy,
           any_value(attributes->>'prunegate.session.name') FILTER (WHERE name = '{SESSION}') AS label,
           count(*) AS spans,
           max(seq) AS last_seq,
           arg_max(TRY_CAST(coalesce(attributes->>'prunegate.context.tokens', attributes->>'prunegate.tokens.after')
                            AS BIGINT), (seq, start_time_ns))
               FILTER (WHERE name IN ('{MESSAGE}', '{BUDGET_CHECK}')) AS tokens,
           arg_max(attributes->>'prunegate.decision', (seq, start_time_ns))
               FILTER (WHERE name = '{BUDGET_CHECK}') AS last_decision,
           count(*) FILTER (WHERE name = '{VIOLATION}') AS violations,
           max(coalesce(end_time_ns, start_time_ns)) AS last_ns
    FROM s GROUP BY session_id
    ORDER BY last_ns DESC LIMIT $limit
    """
    return _df(src, sql, {"since": int(since_ns), "limit": int(limit)})


def store_totals(src: Source) -> dict[str, int]:
    """Span and session counts, and the newest span time (Unix ns; 0 when empty)."""
    row = _agg(src, "SELECT count(*), count(DISTINCT session_id), coalesce(max(start_time_ns), 0) FROM spans", {})
    return {"spans": int(row[0]), "sessions": int(row[1]), "last_ns": int(row[2])}


def policy_choices(src: Source) -> list[str]:
    """Policy names a comparison can run: the registry's built-ins and any seen in the store."""
    from policies.registry import available

    row = _agg(src, f"SELECT list(DISTINCT attributes->>'prunegate.policy') FROM spans WHERE name = '{SESSION}'", {})
    seen = {p for p in (row[0] or []) if p}
    return sorted(set(available()) | {p.split("@", 1)[0] for p in seen})


def recorded_sessions(src: Source, *, limit: int = 2000) -> pd.DataFrame:
    """Sessions a comparison can replay (every source but ``replay``), newest first."""
    sql = f"""
    SELECT session_id, any_value(attributes->>'prunegate.session.name') AS label,
           any_value(attributes->>'prunegate.session.source') AS source,
           any_value(attributes->>'prunegate.provider') AS provider,
           min(start_time_ns) AS start_time_ns
    FROM spans
    WHERE name = '{SESSION}' AND coalesce(attributes->>'prunegate.session.source', '') <> 'replay'
    GROUP BY session_id ORDER BY start_time_ns DESC LIMIT $limit
    """
    return _df(src, sql, {"limit": int(limit)})


def session_list(src: Source, *, limit: int = 5000) -> pd.DataFrame:
    """Session roots only (id, name, source, policy, gated), newest first: a cheap list for pickers.
    A session still recording has no root span yet; it is listed from its other spans."""
    fields = json.dumps({k: _SUMMARY_FIELDS[k] for k in (
        "prunegate.session.name", "prunegate.session.source", "prunegate.policy", "prunegate.gated")})
    sql = f"""
    WITH roots AS (
        SELECT session_id, start_time_ns, from_json(attributes, '{fields}') AS a
        FROM spans WHERE name = '{SESSION}' AND session_id IS NOT NULL
    ),
    listed AS (
        SELECT session_id, any_value(a."prunegate.session.name") AS label,
               any_value(a."prunegate.session.source") AS source, any_value(a."prunegate.policy") AS policy,
               any_value(a."prunegate.gated") AS gated, min(start_time_ns) AS start_time_ns
        FROM roots GROUP BY session_id
    ),
    open_sessions AS (
        SELECT session_id, NULL AS label, NULL AS source, NULL AS policy, CAST(NULL AS BOOLEAN) AS gated,
               min(start_time_ns) AS start_time_ns
        FROM spans WHERE session_id IS NOT NULL AND session_id NOT IN (SELECT session_id FROM listed)
        GROUP BY session_id
    )
    SELECT * FROM listed UNION ALL SELECT * FROM open_sessions
    ORDER BY start_time_ns DESC, session_id LIMIT $limit
    """
    return _df(src, sql, {"limit": int(limit)})
