"""Violations: each with the prune that caused it (its span link), the evicted partners, and repeated side effects.

Why its own module: the causal link (a violation's OTel span link to its prune) is the one place
the store is read across spans of different steps; every query that follows it lives here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from tracer.contract import names as sn
from tracer.queries._sql import MESSAGE, SESSION, VIOLATION, Source, _con, _df, _first_row, _one, records
from tracer.queries.listing import reads_kept

_LINK_TYPE = '[{"trace_id":"VARCHAR","span_id":"VARCHAR","attributes":"JSON"}]'


def violations(src: Source, *, session_id: str | None = None, codes: Sequence[str] = (), limit: int = 2000,
               offset: int = 0) -> pd.DataFrame:
    """Every violation with the prune that caused it (followed through the violation's span link
    whose ``prunegate.link`` is ``caused_by``; the first link when none says so): the prune's
    step, policy, pruned units and ids, and whether that prune was gated. Newest first; ``codes``
    keeps those codes only, and ``limit``/``offset`` take one page of them (the Violations page
    draws 50 at a time: a million-span store holds tens of thousands)."""
    page = f"""
        FROM spans
        WHERE name = '{VIOLATION}' AND (CAST($sid AS VARCHAR) IS NULL OR session_id = CAST($sid AS VARCHAR))
          AND (len($codes::VARCHAR[]) = 0 OR list_contains($codes::VARCHAR[], violation))
        ORDER BY start_time_ns DESC, session_id, seq
        LIMIT $limit OFFSET $offset"""
    params: dict[str, Any] = {"sid": session_id, "codes": [str(c) for c in codes], "limit": int(limit),
                              "offset": int(offset)}
    # The page's sessions first: the prunes and roots are then read from those sessions' row groups
    # only (a causing prune is a span of the violation's own session), not joined against every span.
    params["sessions"] = [str(r[0]) for r in _con(src).execute(
        f"SELECT DISTINCT session_id FROM (SELECT session_id {page})", params).fetchall()]
    sql = f"""
    WITH v AS (
        SELECT session_id, seq, trace_id, span_id, start_time_ns,
               violation AS code,
               coalesce(attributes->>'{sn.VIOLATION_MESSAGE}', status_message) AS message,
               coalesce(from_json(attributes->'{sn.VIOLATION_IDS}', '["VARCHAR"]'), []) AS ids,
               coalesce(from_json(attributes->'{sn.VIOLATION_MESSAGE_IDS}', '["VARCHAR"]'), []) AS message_ids,
               attributes->>'{sn.VIOLATION_EVICTED_ID}' AS evicted_id,
               TRY_CAST(attributes->>'{sn.VIOLATION_INDEX}' AS BIGINT) AS request_index,
               links
        {page}  -- one page, before the links are unnested and joined
    ),
    l AS (
        SELECT v.span_id AS violation_span_id, v.trace_id AS violation_trace_id,
               unnest(coalesce(from_json(v.links, '{_LINK_TYPE}'), [])) AS link
        FROM v
    ),
    cause AS (
        SELECT violation_span_id, violation_trace_id,
               arg_min(link.span_id, CASE WHEN link.attributes->>'{sn.LINK}' = '{sn.LINK_CAUSED_BY}' THEN 0 ELSE 1 END)
                   AS cause_span_id,
               arg_min(link.trace_id, CASE WHEN link.attributes->>'{sn.LINK}' = '{sn.LINK_CAUSED_BY}' THEN 0 ELSE 1 END)
                   AS cause_trace_id
        FROM l GROUP BY ALL
    ),
    roots AS (
        SELECT session_id, any_value(attributes->>'{sn.SESSION_NAME}') AS label
        FROM spans WHERE name = '{SESSION}' AND list_contains($sessions::VARCHAR[], session_id)
        GROUP BY session_id
    )
    SELECT v.session_id, roots.label, v.seq, v.span_id, v.trace_id, v.code, v.message, v.ids, v.message_ids,
           v.evicted_id, v.request_index,
           c.cause_span_id, c.cause_trace_id,
           p.seq AS prune_seq, p.name AS cause_name,
           p.policy AS policy,
           p.gated AS prune_gated,
           coalesce(from_json(p.attributes->'{sn.PRUNED_UNITS}', '["VARCHAR"]'), []) AS pruned_units,
           coalesce(from_json(p.attributes->'{sn.PRUNED_IDS}', '["VARCHAR"]'), []) AS pruned_ids,
           p.tokens_before AS prune_tokens_before,
           p.tokens_after AS prune_tokens_after
    FROM v
    LEFT JOIN cause c ON c.violation_span_id = v.span_id AND c.violation_trace_id = v.trace_id
    LEFT JOIN (SELECT * FROM spans WHERE list_contains($sessions::VARCHAR[], session_id)) p
        ON p.span_id = c.cause_span_id AND p.trace_id = c.cause_trace_id
    LEFT JOIN roots ON roots.session_id = v.session_id
    ORDER BY v.start_time_ns DESC, v.session_id, v.seq
    """
    return _df(src, sql, params)


def violation_codes(src: Source, *, session_id: str | None = None) -> pd.DataFrame:
    """How many violations of each code (``code``, ``n``; most frequent first): the Violations page's
    code filter and its count of pages, without reading the violations themselves."""
    sql = f"""
    SELECT violation AS code, count(*) AS n FROM spans
    WHERE name = '{VIOLATION}' AND (CAST($sid AS VARCHAR) IS NULL OR session_id = CAST($sid AS VARCHAR))
    GROUP BY 1 ORDER BY n DESC, code
    """
    return _df(src, sql, {"sid": session_id})


def causal_eviction(src: Source, violation_span_id: str, *, session_id: str | None = None) -> dict[str, Any] | None:
    """Everything the Violations page shows about one violation: the violation, the prune span it
    links to (policy, proposal, scores, grown/shrunk/skipped units), the *partners* (evicted
    messages whose id, tool call ids or answered ids the violation names, with the score the
    policy gave their unit), and the steps to draw the context before and after the prune.
    ``session_id``: the violation's session when the caller knows it (saves finding it)."""
    sid = session_id or _violation_session(src, violation_span_id)
    if sid is None:
        return None
    sql = f"""
    WITH v AS (
        SELECT * FROM spans WHERE session_id = $sid AND span_id = $vid AND name = '{VIOLATION}' LIMIT 1
    ),
    link AS (
        SELECT unnest(coalesce(from_json(v.links, '{_LINK_TYPE}'), [])) AS l FROM v
    ),
    cause AS (
        SELECT arg_min(l.span_id, CASE WHEN l.attributes->>'{sn.LINK}' = '{sn.LINK_CAUSED_BY}' THEN 0 ELSE 1 END) AS sid,
               arg_min(l.trace_id, CASE WHEN l.attributes->>'{sn.LINK}' = '{sn.LINK_CAUSED_BY}' THEN 0 ELSE 1 END) AS tid
        FROM link
    )
    SELECT v.session_id, v.seq, v.span_id, v.status_message, v.attributes AS violation,
           p.span_id AS prune_span_id, p.seq AS prune_seq, p.name AS prune_name, p.attributes AS prune,
           chk.attributes AS check_attributes
    FROM v
    LEFT JOIN cause ON true
    LEFT JOIN (SELECT * FROM spans WHERE session_id = $sid) p ON p.span_id = cause.sid AND p.trace_id = cause.tid
    LEFT JOIN (SELECT * FROM spans WHERE session_id = $sid) chk
        ON chk.span_id = p.parent_span_id AND chk.trace_id = p.trace_id
    """
    df = _df(src, sql, {"vid": violation_span_id, "sid": sid})
    if df.empty:
        return None
    row = _first_row(df)
    row["partners"] = (
        partners(src, violation_span_id, session_id=sid) if row.get("prune_span_id") else pd.DataFrame()
    )
    return row


def _violation_session(src: Source, violation_span_id: str) -> str | None:
    """The session of a violation span: every later read is of that session only (its prune and
    budget check are spans of the same session), which DuckDB answers from a few row groups."""
    row = _one(src, f"SELECT session_id FROM spans WHERE span_id = $vid AND name = '{VIOLATION}' LIMIT 1",
               {"vid": violation_span_id})
    return None if row is None or row[0] is None else str(row[0])


def partners(src: Source, violation_span_id: str, *, session_id: str | None = None) -> pd.DataFrame:
    """The messages the causing prune evicted that the violation is about: a pruned message whose
    id is named by the violation, or whose tool calls / answers share an id with it, or whose unit
    holds such a message. With the message's role, unit, tokens, the policy's score for its unit and
    its last recorded content (when captured)."""
    sid = session_id or _violation_session(src, violation_span_id)
    sql = f"""
    WITH v AS (
        SELECT session_id, trace_id, links,
               list_concat(coalesce(from_json(attributes->'{sn.VIOLATION_IDS}', '["VARCHAR"]'), []),
                           coalesce(from_json(attributes->'{sn.VIOLATION_MESSAGE_IDS}', '["VARCHAR"]'), []),
                           list_filter([attributes->>'{sn.VIOLATION_EVICTED_ID}'], lambda x: x IS NOT NULL)) AS ids
        FROM spans WHERE session_id = $sid AND span_id = $vid AND name = '{VIOLATION}' LIMIT 1
    ),
    link AS (SELECT unnest(coalesce(from_json(links, '{_LINK_TYPE}'), [])) AS l FROM v),
    cause AS (
        SELECT arg_min(l.span_id, CASE WHEN l.attributes->>'{sn.LINK}' = '{sn.LINK_CAUSED_BY}' THEN 0 ELSE 1 END) AS sid,
               arg_min(l.trace_id, CASE WHEN l.attributes->>'{sn.LINK}' = '{sn.LINK_CAUSED_BY}' THEN 0 ELSE 1 END) AS tid
        FROM link
    ),
    p AS (
        SELECT spans.session_id, spans.seq, TRY_CAST(spans.attributes->>'{sn.SCORES}' AS JSON) AS scores,
               coalesce(from_json(spans.attributes->'{sn.PRUNED_IDS}', '["VARCHAR"]'), []) AS pruned_ids
        FROM spans, cause WHERE spans.session_id = $sid AND spans.span_id = cause.sid AND spans.trace_id = cause.tid
    ),
    removed AS (
        SELECT s.attributes->>'{sn.MESSAGE_ID}' AS message_id,
               s.attributes->>'{sn.UNIT_ID}' AS unit_id,
               s.attributes->>'{sn.MESSAGE_ROLE}' AS role,
               TRY_CAST(s.attributes->>'{sn.MESSAGE_TOKENS}' AS BIGINT) AS tokens,
               coalesce(from_json(s.attributes->'{sn.MESSAGE_CALL_IDS}', '["VARCHAR"]'), []) AS call_ids,
               coalesce(from_json(s.attributes->'{sn.MESSAGE_ANSWERS}', '["VARCHAR"]'), []) AS answers,
               s.attributes->>'{sn.MESSAGE_CAUSE}' AS cause,
               p.scores
        FROM ({records(MESSAGE)}) s, p
        WHERE s.session_id = $sid AND s.session_id = p.session_id AND s.seq = p.seq
          AND s.attributes->>'{sn.EVENT}' = 'remove'
          AND list_contains(p.pruned_ids, s.attributes->>'{sn.MESSAGE_ID}')
    ),
    contents AS (
        SELECT s.attributes->>'{sn.MESSAGE_ID}' AS message_id,
               arg_max(s.attributes->>'{sn.MESSAGE_CONTENT}', (s.seq, s.start_time_ns)) AS content
        FROM ({records(MESSAGE)}) s, p
        WHERE s.session_id = $sid AND s.session_id = p.session_id AND s.seq <= p.seq
          AND s.attributes->>'{sn.MESSAGE_CONTENT}' IS NOT NULL
          AND list_contains(p.pruned_ids, s.attributes->>'{sn.MESSAGE_ID}')
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
    return _df(src, sql, {"vid": violation_span_id, "sid": sid})


def _retries_sql(some: str) -> str:
    return f"""
    WITH t AS (
        SELECT session_id, seq, start_time_ns, span_id,
               attributes->>'{sn.GEN_AI_TOOL_NAME}' AS tool,
               attributes->>'{sn.GEN_AI_TOOL_CALL_ID}' AS call_id,
               TRY_CAST(attributes->>'{sn.TOOL_SIDE_EFFECT}' AS BOOLEAN) AS side_effect,
               coalesce(TRY_CAST(attributes->>'{sn.TOOL_RETRY}' AS BOOLEAN), false) AS retry
        FROM spans
        -- the span name ("execute_tool <tool>") narrows the scan before any attribute is parsed
        WHERE starts_with(name, '{sn.OP_EXECUTE_TOOL}')
          AND attributes->>'{sn.GEN_AI_OPERATION_NAME}' = '{sn.OP_EXECUTE_TOOL}'
          AND (CAST($sid AS VARCHAR) IS NULL OR session_id = CAST($sid AS VARCHAR)) {some}
    ),
    r AS (
        SELECT *, count(*) OVER () AS total FROM t WHERE retry
        ORDER BY start_time_ns DESC LIMIT $limit
    )
    SELECT r.session_id, r.seq, r.tool, r.call_id, r.side_effect, r.span_id,
           (SELECT min(o.seq) FROM t o WHERE o.session_id = r.session_id AND o.call_id = r.call_id
                                        AND NOT o.retry) AS first_seq,
           (SELECT count(*) FROM t o WHERE o.session_id = r.session_id AND o.call_id = r.call_id) AS executions,
           r.total, r.start_time_ns
    FROM r
    ORDER BY r.start_time_ns DESC
    """


_RETRIES = _retries_sql("")
_RETRIES_IN = _retries_sql("AND list_contains($sessions::VARCHAR[], session_id)")


def retries(src: Source, *, session_id: str | None = None, limit: int | None = None) -> pd.DataFrame:
    """Repeated side-effecting calls: ``execute_tool`` spans flagged ``prunegate.tool.retry``, with
    the step of the first execution of the same call id (the one the retry repeats), newest first;
    ``total`` is how many there are in all when ``limit`` keeps only the newest.

    On a store whose catalog compaction keeps, only sessions it counts retries in are read (a JSON
    read of every tool execution of a million-span store otherwise), and with ``limit`` only the
    newest of them: first the newest sessions that hold ``limit`` retries; the oldest retry kept
    from them bounds the rest, so then every session active since that retry (a retry starts
    before its session's last span), which holds the ``limit`` newest retries of all."""
    params: dict[str, Any] = {"sid": session_id, "limit": limit}
    if not reads_kept(src):
        return _df(src, _RETRIES, params).drop(columns=["start_time_ns"])
    held = _con(src).execute(
        "SELECT session_id, last_ns, retries FROM catalog_counts WHERE retries > 0 "
        "AND (CAST($sid AS VARCHAR) IS NULL OR session_id = CAST($sid AS VARCHAR)) ORDER BY last_ns DESC, session_id",
        {"sid": session_id}).fetchall()
    total = sum(int(n) for _, _, n in held)
    sessions = [str(s) for s, _, _ in held]
    if limit is not None:
        newest, n = [], 0
        for s, _, k in held:  # the newest sessions holding `limit` retries
            if n >= limit:
                break
            newest.append(str(s))
            n += int(k)
        df = _df(src, _RETRIES_IN, {**params, "sessions": newest})
        if len(df) >= limit:  # any newer retry is in a session whose last span is at least as new
            bound = int(df["start_time_ns"].min())
            sessions = [str(s) for s, last, _ in held if last is not None and int(last) >= bound]
        if set(sessions) <= set(newest):
            return df.assign(total=total).drop(columns=["start_time_ns"])
    df = _df(src, _RETRIES_IN, {**params, "sessions": sessions})
    return df.assign(total=total).drop(columns=["start_time_ns"])


__all__ = ["causal_eviction", "partners", "retries", "violation_codes", "violations"]
