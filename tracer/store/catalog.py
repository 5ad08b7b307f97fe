"""The session catalog that compaction keeps in ``spans.duckdb``: one row per session, and the texts a
search looks at.

Why: the Sessions page must answer in under a second at 10,000 sessions (a million spans), its
first search included. Counting every session's spans and extracting message text from every span's
JSON on first use costs seconds; compaction already reads each new span exactly once, so it records
what the page needs right there, in the same transaction as the spans:

- ``session_catalog``: one row per session (root attributes, kind, span counts by decision and
  violation, first and last span time, messages and peak context tokens), recomputed for the
  sessions a compaction touched;
- ``session_counts``: one row per session, what its spans add up to for the session list and the
  Compare page (:func:`counts_sql`: messages, tool calls, peak and final tokens, checks, decisions,
  retries, model calls, invalid requests; a JSON read of every span's attributes, which costs
  seconds over a million spans and is paid here once per compaction, not per page visit),
  recomputed for the sessions a compaction touched;
- ``session_roots``: every session's root span (its promoted columns and attributes), so that what
  reads the roots of every session (the session list and its pickers, the Compare page) reads 10,000
  rows in one place instead of picking them out of a million spans (:func:`roots_sql`);
- ``search_text``: one row per span that has searchable text (message text and tool names, tool
  executions, decisions and their reasons, violation codes, annotation labels and notes),
  lowercased; append-only, since compaction inserts each span once.

A reader (:class:`~tracer.store.reader.StoreReader`) serves the views ``catalog_sessions``,
``catalog_counts``, ``catalog_roots`` and ``catalog_search``: these rows for what is compacted, the same rows computed
on the fly for the sessions in segments not compacted yet (few: the sink compacts as it writes). A store compacted by
an older prunegate has no catalog until its next compaction builds it; readers compute everything
on the fly meanwhile. Root attributes, decisions, reasons and violation codes are read from the
promoted columns (schema 2, :data:`tracer.store.schema.PROMOTED`); span names and keys come from
:mod:`tracer.contract.names`; the relation names passed in are this package's constants, never user input.
"""

from __future__ import annotations

import json

import duckdb

from tracer.contract import names as sn

CATALOG_VERSION = "4"  # bump when the rows below change: the next compaction rebuilds them
META_KEY = "catalog_version"

_AFTER = ", ".join(f"'{n}'" for n in sn.AFTERWARDS_SPANS)  # annotations: not the session's activity


def message_records(rel: str, where: str = "true") -> str:
    """(session_id, attributes) of every message event of ``rel`` matching ``where``: message spans
    and, for sessions recorded below full detail, the message span events that check and
    ``prunegate.messages`` spans carry (docs/spans.md "Detail levels")."""
    return f"""
    SELECT session_id, attributes FROM {rel}
    WHERE name = '{sn.MESSAGE}' AND session_id IS NOT NULL AND ({where})
    UNION ALL
    SELECT session_id, e.attributes FROM (
        SELECT session_id, unnest(from_json(events, '[{{"name":"VARCHAR","attributes":"JSON"}}]')) AS e
        FROM {rel} WHERE events IS NOT NULL AND events <> '[]' AND session_id IS NOT NULL AND ({where})
    ) WHERE e.name = '{sn.MESSAGE}'"""


def index_sql(rel: str, where: str = "true", *, messages: bool = True) -> str:
    """One row per session of ``rel`` (a relation with the store's span columns) matching ``where``;
    with ``messages``, also its message count and peak context tokens (a JSON read of every message
    event, :func:`message_records`: what compaction does once, and a reader only for the sessions of pending segments)."""
    msgs = f"""
    SELECT session_id,
           count(DISTINCT attributes->>'{sn.MESSAGE_ID}')
               FILTER (WHERE attributes->>'{sn.EVENT}' IN ('append', 'open')) AS messages,
           max(TRY_CAST(attributes->>'{sn.CONTEXT_TOKENS}' AS BIGINT)) AS peak_tokens
    FROM ({message_records(rel, where)}) GROUP BY session_id
""" if messages else "SELECT NULL::VARCHAR AS session_id WHERE false"
    return f"""
WITH roots AS (
    SELECT session_id,
           any_value(attributes->>'{sn.SESSION_NAME}') AS label,
           any_value(source) AS source,
           any_value(attributes->>'{sn.SESSION_SOURCE_ID}') AS source_id,
           any_value(policy) AS policy,
           any_value(gated) AS gated,
           any_value(budget) AS budget
    FROM {rel} WHERE name = '{sn.SESSION}' AND session_id IS NOT NULL AND ({where}) GROUP BY session_id
),
counts AS (
    SELECT session_id, count(*) AS spans,
           count(*) FILTER (WHERE name = '{sn.VIOLATION}') AS violations,
           count(*) FILTER (WHERE name = '{sn.PRUNE}') AS prunes,
           count(*) FILTER (WHERE name = '{sn.DEFER}') AS deferrals,
           count(*) FILTER (WHERE name = '{sn.SPILL}') AS spills,
           count(*) FILTER (WHERE name = '{sn.FAIL}') AS failures,
           min(start_time_ns) AS first_ns, max(coalesce(end_time_ns, start_time_ns)) AS last_ns
    FROM {rel} WHERE session_id IS NOT NULL AND name NOT IN ({_AFTER}) AND ({where}) GROUP BY session_id
),
msgs AS ({msgs})
SELECT c.session_id, r.label, r.source, r.source_id, r.policy, r.gated, r.budget,
       CASE WHEN r.source = 'replay' THEN 'replay' ELSE 'recorded' END AS kind,
       c.* EXCLUDE (session_id){", m.messages, m.peak_tokens" if messages else ""}
FROM counts c LEFT JOIN roots r USING (session_id) LEFT JOIN msgs m USING (session_id)
"""


_COUNT_FIELDS = json.dumps({  # one from_json per span (not one JSON parse per key)
    sn.MESSAGE_ID: "VARCHAR", sn.EVENT: "VARCHAR", sn.MESSAGE_SUMMARY_OF: ["VARCHAR"],
    sn.MESSAGE_CALL_IDS: ["VARCHAR"], sn.SPILLED_UNITS: ["VARCHAR"], sn.CONTEXT_TOKENS: "BIGINT",
    sn.GEN_AI_OPERATION_NAME: "VARCHAR", sn.TOOL_RETRY: "BOOLEAN", sn.REQUEST_VALID: "BOOLEAN",
}).replace("'", "''")
_EVENTS = '[{"name":"VARCHAR","time_ns":"BIGINT","attributes":"JSON"}]'
# A spill or failure whose decision had deferred first (constants only).
_DEFERRED_FIRST = " OR ".join(f"starts_with(coalesce(reason, ''), '{r}')" for r in sn.DEFERRAL_REASONS)


def counts_sql(rel: str, where: str = "true") -> str:
    """Per session of ``rel`` (spans matching ``where``): what its spans add up to, by the
    definitions of docs/replay.md: ``messages``, ``tool_calls``, ``peak_tokens``, ``final_tokens``,
    ``checks``, ``over_budget_checks``, ``violations``, ``prunes``, ``tokens_pruned``,
    ``deferrals``, ``spills``, ``failures``, ``retries``, ``model_calls``, ``invalid_requests``,
    ``max_seq``, ``spans``, ``first_ns``/``last_ns``. Message events recorded below full detail
    (docs/spans.md) count like message spans. The session list and the Compare page read these
    (:func:`tracer.queries.listing.summary_sql`); compaction keeps them (``session_counts``)."""
    return f"""
    SELECT session_id,
           count(DISTINCT a."{sn.MESSAGE_ID}")
               FILTER (WHERE name = '{sn.MESSAGE}' AND a."{sn.EVENT}" IN ('append', 'open')
                       AND a."{sn.MESSAGE_SUMMARY_OF}" IS NULL) AS messages,
           CAST(coalesce(sum(len(a."{sn.MESSAGE_CALL_IDS}"))
               FILTER (WHERE name = '{sn.MESSAGE}' AND a."{sn.EVENT}" IN ('append', 'open')
                       AND a."{sn.MESSAGE_SUMMARY_OF}" IS NULL), 0) AS BIGINT) AS tool_calls,
           greatest(
               max(a."{sn.CONTEXT_TOKENS}") FILTER (WHERE name = '{sn.MESSAGE}'),
               max(tokens_before) FILTER (WHERE name = '{sn.BUDGET_CHECK}')
           ) AS peak_tokens,
           arg_max(coalesce(a."{sn.CONTEXT_TOKENS}", tokens_after), (seq, start_time_ns))
               FILTER (WHERE name IN ('{sn.MESSAGE}', '{sn.BUDGET_CHECK}')) AS final_tokens,
           count(*) FILTER (WHERE name = '{sn.BUDGET_CHECK}') AS checks,
           count(*) FILTER (WHERE name = '{sn.BUDGET_CHECK}'
                            AND tokens_before > budget) AS over_budget_checks,
           count(*) FILTER (WHERE name = '{sn.VIOLATION}') AS violations,
           count(*) FILTER (WHERE name = '{sn.PRUNE}') AS prunes,
           CAST(coalesce(sum(tokens_before - tokens_after)
                         FILTER (WHERE name = '{sn.PRUNE}'), 0) AS BIGINT) AS tokens_pruned,
           count(*) FILTER (WHERE name = '{sn.DEFER}'
                            OR (name IN ('{sn.SPILL}', '{sn.FAIL}') AND ({_DEFERRED_FIRST}))) AS deferrals,
           CAST(coalesce(sum(len(a."{sn.SPILLED_UNITS}")) FILTER (WHERE name IN ('{sn.SPILL}', '{sn.FAIL}')), 0)
               AS BIGINT) AS spills,
           count(*) FILTER (WHERE name = '{sn.FAIL}') AS failures,
           count(*) FILTER (WHERE a."{sn.GEN_AI_OPERATION_NAME}" = '{sn.OP_EXECUTE_TOOL}'
                            AND a."{sn.TOOL_RETRY}") AS retries,
           count(*) FILTER (WHERE a."{sn.GEN_AI_OPERATION_NAME}" = '{sn.OP_CHAT}') AS model_calls,
           count(*) FILTER (WHERE a."{sn.GEN_AI_OPERATION_NAME}" = '{sn.OP_CHAT}'
                            AND a."{sn.REQUEST_VALID}" = false) AS invalid_requests,
           max(seq) AS max_seq,
           count(*) FILTER (WHERE NOT held) AS spans,
           min(start_time_ns) AS first_ns,
           max(coalesce(end_time_ns, start_time_ns)) AS last_ns
    FROM (SELECT session_id, name, seq, start_time_ns, end_time_ns, reason, tokens_before, tokens_after, budget,
                 from_json(attributes, '{_COUNT_FIELDS}') AS a, false AS held
          FROM {rel} WHERE session_id IS NOT NULL AND name NOT IN ({_AFTER}) AND ({where})
          UNION ALL
          SELECT session_id, e.name, CAST(e.attributes->>'$."{sn.SEQ}"' AS BIGINT), e.time_ns, e.time_ns,
                 NULL, NULL, NULL, NULL, from_json(e.attributes, '{_COUNT_FIELDS}'), true
          FROM (SELECT session_id, unnest(from_json(events, '{_EVENTS}')) AS e
                FROM {rel} WHERE events IS NOT NULL AND events <> '[]' AND session_id IS NOT NULL AND ({where}))
          WHERE e.name = '{sn.MESSAGE}') s
    GROUP BY session_id
"""


def roots_sql(rel: str, where: str = "true") -> str:
    """The root spans of ``rel`` (matching ``where``): session id, promoted columns, attributes."""
    return f"""
    SELECT session_id, source, policy, gated, budget, attributes FROM {rel}
    WHERE name = '{sn.SESSION}' AND session_id IS NOT NULL AND ({where})"""


def search_sql(rel: str) -> str:
    """The lowercased searchable text of every span of ``rel`` that has any, with its session."""
    return f"""
SELECT session_id, lower(text) AS text
FROM (
    SELECT session_id, concat_ws(' ', attributes->>'{sn.MESSAGE_CONTENT}',
                                 CAST(attributes->'{sn.MESSAGE_TOOL_NAMES}' AS VARCHAR)) AS text
    FROM ({message_records(rel)})
    UNION ALL
    SELECT session_id, concat_ws(' ', attributes->>'{sn.GEN_AI_TOOL_NAME}', decision, reason, violation)
    FROM {rel}
    WHERE session_id IS NOT NULL AND (name IN ('{sn.BUDGET_CHECK}', '{sn.PRUNE}', '{sn.DEFER}', '{sn.SPILL}',
                                                '{sn.FAIL}', '{sn.VIOLATION}')
                                      OR starts_with(name, '{sn.OP_EXECUTE_TOOL}'))
    UNION ALL
    SELECT session_id, concat_ws(' ', attributes->>'{sn.ANNOTATION_LABEL}', attributes->>'{sn.ANNOTATION_NOTE}')
    FROM {rel} WHERE name = '{sn.ANNOTATION}' AND session_id IS NOT NULL
) t
WHERE text <> ''
"""


_DDL = (
    "CREATE TABLE IF NOT EXISTS session_catalog AS SELECT * FROM (" + index_sql("spans") + ") WHERE false",
    "CREATE TABLE IF NOT EXISTS session_counts AS SELECT * FROM (" + counts_sql("spans") + ") WHERE false",
    "CREATE TABLE IF NOT EXISTS session_roots AS SELECT * FROM (" + roots_sql("spans") + ") WHERE false",
    "CREATE TABLE IF NOT EXISTS search_text (session_id VARCHAR, text VARCHAR)",
)


def ensure(con: duckdb.DuckDBPyConnection) -> None:
    """Create the catalog tables; (re)build them from every span when they are missing or older
    than :data:`CATALOG_VERSION` (a store compacted by an older prunegate). One transaction."""
    row = con.execute("SELECT value FROM store_meta WHERE key = ?", [META_KEY]).fetchone()
    if row is not None and row[0] == CATALOG_VERSION:
        return
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute("DROP TABLE IF EXISTS session_catalog")
        con.execute("DROP TABLE IF EXISTS search_text")
        con.execute("DROP TABLE IF EXISTS session_counts")
        con.execute("DROP TABLE IF EXISTS session_roots")
        for ddl in _DDL:
            con.execute(ddl)
        con.execute("INSERT INTO session_catalog " + index_sql("spans"))
        con.execute("INSERT INTO session_counts " + counts_sql("spans"))
        con.execute("INSERT INTO session_roots " + roots_sql("spans"))
        con.execute("INSERT INTO search_text " + search_sql("spans"))
        con.execute("INSERT OR REPLACE INTO store_meta VALUES (?, ?)", [META_KEY, CATALOG_VERSION])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def refresh(con: duckdb.DuckDBPyConnection, fresh: str) -> None:
    """Inside compaction's transaction, after the rows of the table ``fresh`` went into ``spans``:
    add their searchable texts and recompute the catalog rows of the sessions they belong to."""
    touched = f"session_id IN (SELECT DISTINCT session_id FROM {fresh} WHERE session_id IS NOT NULL)"
    con.execute(f"DELETE FROM session_catalog WHERE {touched}")
    con.execute("INSERT INTO session_catalog " + index_sql("spans", touched))
    con.execute(f"DELETE FROM session_counts WHERE {touched}")
    con.execute("INSERT INTO session_counts " + counts_sql("spans", touched))
    con.execute(f"DELETE FROM session_roots WHERE {touched}")
    con.execute("INSERT INTO session_roots " + roots_sql("spans", touched))
    con.execute("INSERT INTO search_text " + search_sql(fresh))


def pending_activity_sql(files: str) -> str:
    """How many spans of the pending segments' raw rows ``files`` are a session's activity (not an
    annotation): none, and the kept rows need no fresh part (:func:`views`)."""
    return f"SELECT count(*) FROM {files} WHERE session_id IS NOT NULL AND name NOT IN ({_AFTER})"


def views(catalog: bool, pending: str, files: str | None = None, *, db: str = "store") -> tuple[tuple[str, str], ...]:
    """The reader's ``catalog_sessions``, ``catalog_counts``, ``catalog_roots`` and
    ``catalog_search``: with a ``catalog`` attached as ``db``, its rows plus what the segments in
    ``pending`` (not compacted yet) add; without one, everything computed over ``spans``. ``files``:
    the pending segments' raw rows when they hold a session's activity (None: no segment, or
    annotations only, which change none of the kept rows but the searchable texts)."""
    if not catalog:  # messages and peaks: for the page's rows only (tracer.queries.catalog.page_detail)
        return (("catalog_sessions", index_sql("spans", messages=False)), ("catalog_counts", counts_sql("spans")),
                ("catalog_roots", roots_sql("spans")), ("catalog_search", search_sql("spans")))
    search = ("catalog_search", f"SELECT * FROM {db}.search_text UNION ALL ({search_sql(pending)})")
    if files is None:  # the kept rows as they are (computing an empty fresh part still scans every span)
        return (("catalog_sessions", f"SELECT * FROM {db}.session_catalog"),
                ("catalog_counts", f"SELECT * FROM {db}.session_counts"),
                ("catalog_roots", f"SELECT * FROM {db}.session_roots"), search)
    # Sessions with activity in the pending segments: their rows are computed afresh. Read from the
    # raw files: a span also in the database recomputes its session's row to the same values.
    in_pending = (f"session_id IN (SELECT DISTINCT session_id FROM {files} "
                  f"WHERE session_id IS NOT NULL AND name NOT IN ({_AFTER}))")

    def kept(table: str, fresh: str) -> str:
        return f"SELECT * FROM {db}.{table} WHERE NOT ({in_pending}) UNION ALL BY NAME ({fresh})"

    return (("catalog_sessions", kept("session_catalog", index_sql("spans", in_pending))),
            ("catalog_counts", kept("session_counts", counts_sql("spans", in_pending))),
            ("catalog_roots", kept("session_roots", roots_sql("spans", in_pending))), search)
