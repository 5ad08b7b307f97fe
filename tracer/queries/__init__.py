"""Every query the dashboard runs (and its two writes), against the store's ``spans`` view (docs/spans.md), one module per concern.

Why a package of its own: the dashboard renders and never writes SQL, so the queries can be tested
and benchmarked without a browser, and the span contract has exactly one reader-side translation.
Import from here: ``from tracer import queries; queries.sessions(reader)``.

| module | what it answers |
|---|---|
| :mod:`~tracer.queries.listing` | the one session list (Sessions page, pickers, ``prunegate sessions``), one session's summary, root, bounds |
| :mod:`~tracer.queries.steps` | the replay step engine: the context (messages, units) at step k, the event log, the decision, jumps |
| :mod:`~tracer.queries.timeline` | a session's tokens over its steps, its decision marks, budget |
| :mod:`~tracer.queries.causal` | violations with the prune that caused them, the evicted partners, repeated side effects |
| :mod:`~tracer.queries.compare` | per-session metrics of the stored replays, per-arm intervals, per-session differences (:mod:`tracer.lab.metrics`) |
| :mod:`~tracer.queries.live` | sessions active right now |
| :mod:`~tracer.queries.access` | the dashboard's door: the store's location, a snapshot, its version, an annotation or a saved comparison written, conversations to replay |
| :mod:`~tracer.queries.trace` | one session's span tree (depth, start, duration, status), for the trace view |
| :mod:`~tracer.queries.lost` | a replay's lost references and the prune that took each one |
| :mod:`~tracer.queries.annotations` | annotations and saved comparisons read back |
| :mod:`~tracer.queries.writes` | the two writes the dashboard makes: an annotation, a saved comparison |
"""

from __future__ import annotations

from tracer.errors import AnnotationError
from tracer.queries import access  # noqa: F401 - the dashboard's door, a submodule (not in __all__)
from tracer.queries._sql import (
    BUDGET_CHECK,
    DEFER,
    FAIL,
    MESSAGE,
    PRUNE,
    REINJECT,
    SESSION,
    SPILL,
    UNIT_CLOSE,
    VIOLATION,
    Source,
    scratch,
)
from tracer.queries.annotations import (
    annotation_labels,
    annotation_list,
    labelled_sessions,
    saved_comparison,
    saved_comparisons,
)
from tracer.queries.causal import causal_eviction, partners, retries, violation_codes, violations
from tracer.queries.compare import (
    METRICS,
    SPAN_METRICS,
    arm_summary,
    difference_summary,
    session_differences,
    session_metrics,
)
from tracer.queries.listing import (
    LIST_COLUMNS,
    list_sessions,
    policy_choices,
    session_bounds,
    session_filter_options,
    session_info,
    session_root,
    sessions,
    store_totals,
    summary_sql,
)
from tracer.queries.live import live_sessions
from tracer.queries.lost import at_step, lost_references
from tracer.queries.steps import (
    JUMP_TARGETS,
    check_at,
    context_at,
    event_log,
    message_detail,
    next_from_tables,
    next_step,
    on_session_rows,
    session_rows,
    session_tables,
    step_from_tables,
    tables_from_rows,
    units_at,
)
from tracer.queries.timeline import (
    bounds_from_tables,
    budget_at,
    budget_from_tables,
    markers,
    markers_from_tables,
    series_from_tables,
    token_series,
)
from tracer.queries.trace import TRACE_COLUMNS, span_tree, trace_size
from tracer.queries.writes import AnnotationTarget, annotate, save_comparison

__all__ = [
    "BUDGET_CHECK", "DEFER", "FAIL", "JUMP_TARGETS", "LIST_COLUMNS", "MESSAGE", "METRICS", "PRUNE", "REINJECT",
    "SESSION", "SPAN_METRICS", "SPILL", "UNIT_CLOSE", "VIOLATION", "Source", "annotate", "annotation_labels",
    "annotation_list", "arm_summary", "at_step", "lost_references", "save_comparison", "labelled_sessions",
    "saved_comparison", "saved_comparisons", "bounds_from_tables",
    "budget_at", "budget_from_tables", "causal_eviction", "check_at", "context_at", "difference_summary",
    "event_log", "list_sessions", "live_sessions", "markers", "markers_from_tables", "message_detail",
    "next_from_tables", "next_step", "partners", "policy_choices", "retries", "scratch",
    "series_from_tables", "session_bounds", "session_differences", "session_filter_options", "session_info", "session_metrics",
    "on_session_rows", "session_root", "session_rows", "session_tables", "tables_from_rows", "sessions", "step_from_tables", "store_totals", "summary_sql",
    "token_series", "units_at", "violation_codes", "violations", "TRACE_COLUMNS", "span_tree", "trace_size",
    "AnnotationError", "AnnotationTarget",
]
