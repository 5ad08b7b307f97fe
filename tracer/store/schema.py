"""The trace store's schema: one table of spans, its Arrow twin, and the views readers query.

Everything that names a column lives here so the segment writer, the compactor and the reader
cannot disagree. docs/store.md describes the same schema for people.
"""

from __future__ import annotations

import pyarrow as pa

from tracer.contract import names as sn

SCHEMA_VERSION = 2
"""2: the attributes the views read are typed columns too (:data:`PROMOTED`). 1: attributes as JSON only."""

# (column, DuckDB type, Arrow type). JSON columns travel as strings in Parquet segments and are
# cast to DuckDB's JSON type when read.
COLUMNS: tuple[tuple[str, str, pa.DataType], ...] = (
    ("trace_id", "VARCHAR", pa.string()),  # 32 lowercase hex digits
    ("span_id", "VARCHAR", pa.string()),  # 16 lowercase hex digits
    ("parent_span_id", "VARCHAR", pa.string()),  # NULL for a root span
    ("trace_state", "VARCHAR", pa.string()),  # W3C tracestate header, NULL when empty
    ("name", "VARCHAR", pa.string()),
    ("kind", "VARCHAR", pa.string()),  # INTERNAL | SERVER | CLIENT | PRODUCER | CONSUMER
    ("start_time_ns", "BIGINT", pa.int64()),  # Unix epoch nanoseconds
    ("end_time_ns", "BIGINT", pa.int64()),
    ("status_code", "VARCHAR", pa.string()),  # UNSET | OK | ERROR
    ("status_message", "VARCHAR", pa.string()),
    ("attributes", "JSON", pa.string()),  # {"key": value, ...}
    ("events", "JSON", pa.string()),  # [{"name", "time_ns", "attributes"}, ...]
    ("links", "JSON", pa.string()),  # [{"trace_id", "span_id", "trace_state", "attributes"}, ...]
    ("resource", "JSON", pa.string()),  # resource attributes {"service.name": ..., ...}
    ("scope_name", "VARCHAR", pa.string()),
    ("scope_version", "VARCHAR", pa.string()),
    ("session_id", "VARCHAR", pa.string()),  # promoted: gen_ai.conversation.id or prunegate.session.id
    ("seq", "BIGINT", pa.int64()),  # promoted: prunegate.seq, the event index in its session
)

# The attributes the views and the dashboard's queries filter and aggregate on, promoted to typed
# columns (schema version 2): reading a column is a fraction of parsing the JSON attributes of every
# span. (column, DuckDB type, Arrow type, attribute key). Every writer fills them from the span's
# attributes (tracer.store.rows.promoted_values); the attribute stays in ``attributes`` as well.
# Segments and tables written before (version 1) have none: readers derive them from ``attributes``
# with :func:`derived` (the same values) and compaction upgrades what it rewrites.
PROMOTED: tuple[tuple[str, str, pa.DataType, str], ...] = (
    ("source", "VARCHAR", pa.string(), sn.SESSION_SOURCE),  # the session root's source (import, replay, ...)
    ("policy", "VARCHAR", pa.string(), sn.POLICY),  # session roots, budget checks, decisions
    ("gated", "BOOLEAN", pa.bool_(), sn.GATED),
    ("budget", "BIGINT", pa.int64(), sn.BUDGET),
    ("decision", "VARCHAR", pa.string(), sn.DECISION),  # budget checks: prune, defer, ...
    ("reason", "VARCHAR", pa.string(), sn.REASON),
    ("tokens_before", "BIGINT", pa.int64(), sn.TOKENS_BEFORE),
    ("tokens_after", "BIGINT", pa.int64(), sn.TOKENS_AFTER),
    ("violation", "VARCHAR", pa.string(), sn.VIOLATION_CODE),  # violation spans: the code
)
COLUMNS = COLUMNS + tuple((name, sql_type, arrow_type) for name, sql_type, arrow_type, _ in PROMOTED)
PROMOTED_NAMES: tuple[str, ...] = tuple(p[0] for p in PROMOTED)

COLUMN_NAMES: tuple[str, ...] = tuple(c[0] for c in COLUMNS)
JSON_COLUMNS: frozenset[str] = frozenset(c[0] for c in COLUMNS if c[1] == "JSON")
ARROW_SCHEMA: pa.Schema = pa.schema(
    [pa.field(name, arrow_type) for name, _, arrow_type in COLUMNS],
    metadata={b"prunegate.schema_version": str(SCHEMA_VERSION).encode()},
)

SESSION_ATTRIBUTES = sn.SESSION_ATTRIBUTES
SEQ_ATTRIBUTE = sn.SEQ

# Span names the views classify (the span contract: docs/spans.md).
SESSION_ROOT = sn.SESSION
BUDGET_CHECK = sn.BUDGET_CHECK
VIOLATION = sn.VIOLATION
TRACER_STATS = sn.TRACER_STATS
DECISION_NAMES = sn.DECISION_SPANS

MAIN_DDL = (
    "CREATE TABLE IF NOT EXISTS spans ("
    + ", ".join(f"{name} {sql_type}" for name, sql_type, _ in COLUMNS)
    + ")",
    # One row per segment file already moved into `spans`: readers skip those files, and a
    # compactor that died between COMMIT and unlink does not insert them twice.
    "CREATE TABLE IF NOT EXISTS compacted_segments ("
    "name VARCHAR PRIMARY KEY, row_count BIGINT, compacted_at_ns BIGINT)",
    "CREATE TABLE IF NOT EXISTS store_meta (key VARCHAR PRIMARY KEY, value VARCHAR)",
)


def select_list(alias: str = "", *, cast_json: bool = False, derive: bool | str = False) -> str:
    """The column list in schema order (optionally casting the JSON columns from strings). With
    ``derive`` the promoted columns are computed from ``attributes`` (a version 1 source); with
    ``derive="flag"``, only in rows whose boolean column ``flag`` is true (mixed sources)."""
    prefix = f"{alias}." if alias else ""
    parts = []
    promoted = {p[0] for p in PROMOTED} if derive else set()
    for name, sql_type, _ in COLUMNS:
        if name in promoted and isinstance(derive, str):
            parts.append(f"CASE WHEN {prefix}{derive} THEN {derived(name, prefix)} ELSE {prefix}{name} END AS {name}")
        elif name in promoted:
            parts.append(f"{derived(name, prefix)} AS {name}")
        elif cast_json and sql_type == "JSON":
            parts.append(f"{safe_json(prefix + name, JSON_DEFAULTS[name])} AS {name}")
        elif cast_json:
            parts.append(f"CAST({prefix}{name} AS {sql_type}) AS {name}")
        else:
            parts.append(f"{prefix}{name}")
    return ", ".join(parts)


# What a JSON column reads as when its text cannot be repaired (see safe_json).
JSON_DEFAULTS = {"attributes": "{}", "events": "[]", "links": "[]", "resource": "{}"}


def safe_json(expr: str, default: str) -> str:
    """SQL reading JSON text from a segment so that one bad value never fails a whole query: the text
    as JSON when it is valid; else with escaped lone surrogates (``\\ud800``, written by a version
    before tracer.store.text) replaced by U+FFFD; else ``default`` (a segment damaged inside)."""
    repaired = f"regexp_replace({expr}, '\\\\u[dD][89a-fA-F][0-9a-fA-F]{{2}}', '\uFFFD', 'g')"
    return (f"CASE WHEN {expr} IS NULL THEN NULL ELSE coalesce(TRY_CAST({expr} AS JSON), "
            f"TRY_CAST({repaired} AS JSON), '{default}'::JSON) END")


def empty_select() -> str:
    """A typed SELECT with no rows: stands in for a missing main table or an empty segment list."""
    cols = ", ".join(f"CAST(NULL AS {sql_type}) AS {name}" for name, sql_type, _ in COLUMNS)
    return f"SELECT {cols} WHERE false"


def derived(column: str, prefix: str = "") -> str:
    """SQL computing promoted ``column`` from the JSON attributes of a version 1 source: the value
    when the attribute has the column's type (text, integer, boolean), else NULL, exactly as
    :func:`tracer.store.rows.promoted_values` fills the column when a span is written."""
    _, sql_type, _, key = next(p for p in PROMOTED if p[0] == column)
    json_types = {"VARCHAR": "'VARCHAR'", "BIGINT": "'BIGINT', 'UBIGINT'", "BOOLEAN": "'BOOLEAN'"}[sql_type]
    value = f"{prefix}attributes->>'{key}'"
    if sql_type == "BIGINT":
        value = f"TRY_CAST({value} AS BIGINT)"
    elif sql_type == "BOOLEAN":
        value = f"{value} = 'true'"
    return f"CASE WHEN json_type({prefix}attributes->'{key}') IN ({json_types}) THEN {value} END"


def _names(names: tuple[str, ...]) -> str:
    # Constants of this module, never user input.
    return ", ".join("'" + n.replace("'", "''") + "'" for n in names)


def _int(attr: str) -> str:
    return f"TRY_CAST(attributes->>'{attr}' AS BIGINT)"


def _bool(attr: str) -> str:
    return f"TRY_CAST(attributes->>'{attr}' AS BOOLEAN)"


def _str(attr: str) -> str:
    return f"attributes->>'{attr}'"


# Views over the unified `spans` view, following the span contract in docs/spans.md. Each is a
# plain SELECT over `spans`, defined once in the readers' database (tracer.store.reader), where each
# reader's own temp view `spans` is the one a query binds them to.
VIEWS: tuple[tuple[str, str], ...] = (
    (
        "sessions",
        f"""
        SELECT session_id,
               min(start_time_ns) AS start_time_ns,
               max(end_time_ns) AS end_time_ns,
               count(*) AS span_count,
               count(DISTINCT trace_id) AS trace_count,
               max(seq) AS max_seq,
               any_value({_str(sn.SESSION_NAME)}) FILTER (WHERE name = '{SESSION_ROOT}') AS name,
               any_value(source) FILTER (WHERE name = '{SESSION_ROOT}') AS source,
               any_value(policy) FILTER (WHERE name = '{SESSION_ROOT}') AS policy,
               any_value(gated) FILTER (WHERE name = '{SESSION_ROOT}') AS gated,
               count(*) FILTER (WHERE name = '{BUDGET_CHECK}') AS budget_checks,
               count(*) FILTER (WHERE name IN ({_names(DECISION_NAMES)})) AS decisions,
               count(*) FILTER (WHERE name = '{VIOLATION}') AS violations,
               count(*) FILTER (WHERE status_code = 'ERROR') AS errors,
               any_value(resource->>'service.name') AS service_name
        FROM spans
        WHERE session_id IS NOT NULL
        GROUP BY session_id
        """,
    ),
    (
        "budget_checks",
        f"""
        SELECT session_id, seq, trace_id, span_id, parent_span_id, start_time_ns, end_time_ns,
               {_int(sn.CHECK)} AS check_index,
               decision, reason, tokens_before, tokens_after, budget,
               {_int(sn.HARD_CEILING)} AS hard_ceiling,
               {_int(sn.PENDING_CALLS)} AS pending_calls,
               {_int(sn.OPEN_MESSAGES)} AS open_messages,
               gated,
               attributes
        FROM spans
        WHERE name = '{BUDGET_CHECK}'
        """,
    ),
    (
        "decisions",
        f"""
        SELECT session_id, seq, trace_id, span_id, parent_span_id AS budget_check_span_id, name,
               start_time_ns, end_time_ns,
               replace(name, '{sn.PREFIX}', '') AS decision,
               policy, reason, tokens_before, tokens_after,
               {_bool(sn.BUDGET_MET)} AS budget_met,
               gated,
               status_code, attributes
        FROM spans
        WHERE name IN ({_names(DECISION_NAMES)})
        """,
    ),
    (
        "violations",
        f"""
        SELECT session_id, seq, trace_id, span_id, parent_span_id, start_time_ns,
               violation AS code,
               coalesce({_str(sn.VIOLATION_MESSAGE)}, status_message) AS message,
               {_int(sn.VIOLATION_INDEX)} AS message_index,
               links->0->>'trace_id' AS cause_trace_id,
               links->0->>'span_id' AS cause_span_id,
               attributes, links
        FROM spans
        WHERE name = '{VIOLATION}'
        """,
    ),
    (
        "span_events",
        """
        SELECT s.trace_id, s.span_id, s.session_id, s.seq, e.name AS event_name,
               e.time_ns AS time_ns, e.attributes AS attributes
        FROM spans s,
             unnest(from_json(s.events,
                    '[{"name":"VARCHAR","time_ns":"BIGINT","attributes":"JSON"}]')) AS t(e)
        WHERE s.events IS NOT NULL AND s.events <> '[]'
        """,
    ),
    (
        "tracer_stats",
        f"""
        SELECT trace_id, span_id, start_time_ns AS time_ns,
               {_int(sn.PROCESS_PID)} AS pid,
               {_str(sn.TRACER_SINK)} AS sink,
               {_int(sn.TRACER_RECEIVED)} AS received,
               {_int(sn.TRACER_STORED)} AS stored,
               {_int(sn.TRACER_SPOOLED)} AS spooled,
               {_int(sn.TRACER_RECOVERED)} AS recovered,
               {_int(sn.TRACER_FAILED)} AS failed,
               {_int(sn.TRACER_DROPPED)} AS dropped,
               {_str(sn.TRACER_LAST_ERROR)} AS last_error,
               resource->>'service.name' AS service_name
        FROM spans
        WHERE name = '{TRACER_STATS}'
        """,
    ),
)
