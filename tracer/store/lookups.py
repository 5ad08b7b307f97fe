"""The store's reads that the wings writing into it or sending it out need, as named functions.

SQL on spans lives in ``tracer/queries/`` (what the dashboard and the commands show) and here, in
the store (what an importer, a recording command or the exporter must know about what is already
stored: which sessions are there, how many spans each has, which span ids a trace holds, the spans
of a session in the order they go out). Each function takes a reader (``store.reader()``, a
directory's or a bucket's) and passes values as parameters.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from tracer.contract import names as sn

__all__ = [
    "export_rows", "message_rows", "named_sessions", "rerun_session", "root_attributes", "root_session_ids",
    "session_roots", "span_counts", "span_keys", "stored_sessions",
]


class Reader(Protocol):
    """What these reads need of a reader: one query with parameters, rows as dicts."""

    def query(self, sql: str, params: Any = None) -> list[dict[str, Any]]: ...


def stored_sessions(r: Reader, session_ids: Iterable[str]) -> set[str]:
    """Which of ``session_ids`` have at least one span in the store."""
    rows = r.query("SELECT DISTINCT session_id FROM spans WHERE list_contains(?::VARCHAR[], session_id)",
                   [list(session_ids)])
    return {row["session_id"] for row in rows}


def span_counts(r: Reader, session_ids: Iterable[str]) -> dict[str, int]:
    """Spans stored per session, for ``session_ids`` (a session with none is left out)."""
    rows = r.query("SELECT session_id, count(*) AS n FROM spans WHERE list_contains(?::VARCHAR[], session_id) "
                   "GROUP BY session_id", [list(session_ids)])
    return {row["session_id"]: int(row["n"]) for row in rows}


def root_session_ids(r: Reader) -> set[str]:
    """Every session that has its root span (``prunegate.session``) in the store."""
    rows = r.query("SELECT DISTINCT session_id FROM spans WHERE name = ?", [sn.SESSION])
    return {row["session_id"] for row in rows if row["session_id"]}


def session_roots(r: Reader) -> list[dict[str, Any]]:
    """Every session root's ``session_id``, ``attributes`` (JSON text) and ``start_time_ns``, oldest first."""
    return r.query("SELECT session_id, attributes, start_time_ns FROM spans WHERE name = ? "
                   "ORDER BY start_time_ns, session_id", [sn.SESSION])


def root_attributes(r: Reader, session_id: str) -> str | None:
    """The root span's attributes (JSON text) of ``session_id``; None when the store has no root for it."""
    rows = r.query("SELECT attributes FROM spans WHERE name = ? AND session_id = ? LIMIT 1", [sn.SESSION, session_id])
    return str(rows[0]["attributes"]) if rows else None


def rerun_session(r: Reader, replay_id: str) -> str | None:
    """The oldest stored re-run at full detail of the replay ``replay_id`` (its root names it), if any."""
    rows = r.query(f"SELECT session_id FROM spans WHERE name = ? AND attributes->>'{sn.REPLAY_RERUN_OF}' = ? "
                   "ORDER BY start_time_ns, session_id LIMIT 1", [sn.SESSION, replay_id])
    return str(rows[0]["session_id"]) if rows else None


def message_rows(r: Reader, session_ids: list[str]) -> list[dict[str, Any]]:
    """The message events of ``session_ids`` in session and event order (``session_id``, ``attributes``):
    message spans, and the message span events of sessions recorded below full detail."""
    return r.query(
        "SELECT session_id, attributes FROM ("
        "SELECT session_id, seq, start_time_ns AS t, attributes FROM spans WHERE name = ? "
        "AND list_contains(?::VARCHAR[], session_id) UNION ALL "
        f"SELECT session_id, CAST(attributes->>'$.\"{sn.SEQ}\"' AS BIGINT), time_ns, attributes "
        "FROM span_events WHERE event_name = ? AND list_contains(?::VARCHAR[], session_id)"
        ") ORDER BY session_id, seq, t",
        [sn.MESSAGE, session_ids, sn.MESSAGE, session_ids],
    )


def span_keys(r: Reader, trace_ids: Iterable[str]) -> set[tuple[str, str]]:
    """(trace id, span id) of every stored span of ``trace_ids``."""
    rows = r.query("SELECT trace_id, span_id FROM spans WHERE trace_id IN (SELECT unnest(?::VARCHAR[]))",
                   [sorted(trace_ids)])
    return {(row["trace_id"], row["span_id"]) for row in rows}


def named_sessions(r: Reader, wanted: list[str]) -> list[dict[str, Any]]:
    """The sessions whose id or name is in ``wanted``: ``session_id`` and ``name`` of each root."""
    return r.query(
        f"SELECT DISTINCT session_id, attributes->>'{sn.SESSION_NAME}' AS name FROM spans "
        f"WHERE name = ? AND (list_contains(?::VARCHAR[], session_id) "
        f"OR list_contains(?::VARCHAR[], attributes->>'{sn.SESSION_NAME}'))", [sn.SESSION, wanted, wanted])


def export_rows(r: Reader, session_ids: list[str] | None = None) -> list[dict[str, Any]]:
    """Every stored span (or those of ``session_ids``) in the order they are sent out: by session
    (spans of no session last), trace, start time."""
    if session_ids is None:
        return r.query("SELECT * FROM spans ORDER BY session_id NULLS LAST, trace_id, start_time_ns, span_id")
    return r.query("SELECT * FROM spans WHERE list_contains(?::VARCHAR[], session_id) "
                   "ORDER BY session_id, trace_id, start_time_ns, span_id", [session_ids])
