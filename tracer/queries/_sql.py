"""What every query module shares: the source type, the span names it reads, a scratch DuckDB, small helpers.

Rules for every query (docs/dashboard.md): values travel as parameters (``$name``), never formatted
into SQL; grouping, windowing and "which message is in context at step k" run in DuckDB, not in
Python loops. Each query takes an open :class:`~tracer.store.StoreReader` (or a DuckDB connection
that has a ``spans`` view) and returns a pandas DataFrame or a plain dict.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import duckdb
import pandas as pd
import pyarrow as pa

from tracer.contract import names as sn
from tracer.store import StoreReader

Source = StoreReader | duckdb.DuckDBPyConnection
T = TypeVar("T")

# Span names of the contract (docs/spans.md).
SESSION = sn.SESSION
MESSAGE = sn.MESSAGE
UNIT_CLOSE = sn.UNIT_CLOSE
BUDGET_CHECK = sn.BUDGET_CHECK
PRUNE = sn.PRUNE
DEFER = sn.DEFER
SPILL = sn.SPILL
REINJECT = sn.REINJECT
FAIL = sn.FAIL
VIOLATION = sn.VIOLATION


def records(name: str) -> str:
    """A relation (session_id, seq, start_time_ns, attributes) of every ``name`` record: the spans
    of that name, and the span events of that name that sessions recorded below full detail carry
    (docs/spans.md "Detail levels": message events and unit closures ride on check spans)."""
    return f"""
    SELECT session_id, seq, start_time_ns, attributes FROM spans WHERE name = '{name}' AND seq IS NOT NULL
    UNION ALL
    SELECT session_id, CAST(attributes->>'$."{sn.SEQ}"' AS BIGINT), time_ns, attributes FROM span_events
    WHERE event_name = '{name}'"""


# spans added afterwards (annotations, saved comparisons): never a session's activity or counts
_AFTERWARDS = "(" + ", ".join(f"'{n}'" for n in sn.AFTERWARDS_SPANS) + ")"

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


def _isna(v: Any) -> bool:
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def _first_row(df: pd.DataFrame) -> dict[str, Any]:
    """The first row of ``df`` by column name, pandas' missing values (NaN, NaT, NA) as None."""
    return {str(k): (None if _isna(v) else v) for k, v in df.iloc[0].to_dict().items()}


def _struct(fields: dict[str, Any]) -> str:
    """A ``from_json`` structure for these attribute keys: one JSON parse per span, not one per key."""
    return json.dumps(fields).replace("'", "''")


def _on_tables(tables: dict[str, pa.Table], fn: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
    """Run ``fn`` on a scratch connection where each Arrow table is registered under its name."""
    con = scratch()
    try:
        for name, table in tables.items():
            con.register(name, table)
        return fn(con)
    finally:
        con.close()
