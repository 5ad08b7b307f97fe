"""Store access for the pages: one short-lived reader per bundle of queries, short TTL caches.

A :class:`~tracer.store.StoreReader` is a snapshot; holding one open makes compaction wait, so
every call here opens one, runs its queries and closes it. Results are cached for a few seconds
only (``FAST_TTL`` for the Live page, ``TTL`` elsewhere): sessions recorded while the dashboard
runs show up on the next rerun after that, never hidden by a cache.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import streamlit as st

from tracer import queries
from tracer.store import ENV_STORE, Store, default_store_path

TTL = 5.0  # seconds
FAST_TTL = 1.0


def store_path() -> Path:
    """The store this dashboard shows: ``$PRUNEGATE_STORE`` (set by ``prunegate dashboard``)."""
    env = os.environ.get(ENV_STORE)
    return Path(env) if env else default_store_path()


def key() -> str:
    """The resolved store path: the cache key of every query."""
    return _key()


def _key() -> str:
    return str(store_path().resolve())


def run(name: str, *args: Any, **kwargs: Any) -> Any:
    """Call ``tracer.queries.<name>(reader, *args, **kwargs)`` on a fresh snapshot, cached TTL s."""
    return _cached(_key(), name, args, tuple(sorted(kwargs.items())))


def run_fresh(name: str, *args: Any, **kwargs: Any) -> Any:
    """Like :func:`run`, cached only ``FAST_TTL`` seconds (the Live page)."""
    return _cached_fast(_key(), name, args, tuple(sorted(kwargs.items())))


def local(name: str, *args: Any, **kwargs: Any) -> Any:
    """Call ``tracer.queries.<name>`` on a private in-memory DuckDB (queries over a DataFrame)."""
    con = duckdb.connect(":memory:")
    try:
        return getattr(queries, name)(con, *args, **kwargs)
    finally:
        con.close()


def _call(path: str, name: str, args: tuple, kwargs: tuple) -> Any:
    fn = getattr(queries, name)
    with Store(path).reader() as r:
        return fn(r, *args, **dict(kwargs))


@st.cache_data(ttl=TTL, show_spinner=False, max_entries=512)
def _cached(path: str, name: str, args: tuple, kwargs: tuple) -> Any:
    return _call(path, name, args, kwargs)


@st.cache_data(ttl=FAST_TTL, show_spinner=False, max_entries=64)
def _cached_fast(path: str, name: str, args: tuple, kwargs: tuple) -> Any:
    return _call(path, name, args, kwargs)


@st.cache_data(ttl=TTL, show_spinner=False, max_entries=256)
def replay_step(path: str, session_id: str, seq: int) -> dict[str, Any]:
    """Everything the replay page draws for one step, from one snapshot."""
    with Store(path).reader() as r:
        return {
            "units": queries.units_at(r, session_id, seq),
            "messages": queries.context_at(r, session_id, seq, with_content=True),
            "events": queries.event_log(r, session_id, seq),
            "check": queries.check_at(r, session_id, seq),
        }


@st.cache_data(ttl=TTL, show_spinner=False, max_entries=64)
def replay_session(path: str, session_id: str) -> dict[str, Any]:
    """What does not change from step to step: the summary, token series, markers and bounds."""
    with Store(path).reader() as r:
        return {
            "info": queries.session_info(r, session_id),
            "bounds": queries.session_bounds(r, session_id),
            "series": queries.token_series(r, session_id),
            "markers": queries.markers(r, session_id),
            "budget": queries.budget_at(r, session_id),
        }


@st.cache_data(ttl=TTL, show_spinner=False, max_entries=128)
def violation_detail(path: str, violation_span_id: str) -> dict[str, Any] | None:
    """A violation, its causal prune, the partners and the context just before and after it."""
    with Store(path).reader() as r:
        detail = queries.causal_eviction(r, violation_span_id)
        if detail is None:
            return None
        seq = detail.get("prune_seq")
        if seq is not None:
            sid = detail["session_id"]
            detail["before"] = queries.units_at(r, sid, int(seq) - 1)
            detail["after"] = queries.units_at(r, sid, int(seq))
        else:
            detail["before"] = detail["after"] = pd.DataFrame()
        return detail


@st.cache_data(ttl=FAST_TTL, show_spinner=False, max_entries=8)
def overview(path: str) -> dict[str, Any]:
    """Store totals, and why the snapshot may be incomplete (locked database, missing directory)."""
    with Store(path).reader() as r:
        return {**queries.store_totals(r), "warnings": list(r.warnings)}


def now_ns() -> int:
    return time.time_ns()
