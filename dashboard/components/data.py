"""Store access for the pages: one short-lived reader per bundle of queries, short TTL caches.

A :class:`~tracer.store.StoreReader` is a snapshot; holding one open makes compaction wait, so
every call here opens one, runs its queries and closes it. Cached results are keyed by the store's
:func:`fingerprint` (segment names and the database file's mtime/size, a directory listing): a
segment written by a recording agent changes it, so new data shows on the next rerun and no cache
ever hides it. TTLs only bound memory (``FAST_TTL`` for the Live page).
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from tracer import queries
from tracer.store import ENV_STORE, Store, default_store_path
from tracer.store_segments import StoreLayout, list_segments

TTL = 30.0  # seconds; keys also carry the store's fingerprint, so new data shows at once
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
    """Call ``tracer.queries.<name>(reader, *args, **kwargs)`` on a fresh snapshot. Cached until the
    store changes (and at most ``TTL`` seconds)."""
    path = _key()
    return _cached(path, fingerprint(path), name, args, tuple(sorted(kwargs.items())))


def run_fresh(name: str, *args: Any, **kwargs: Any) -> Any:
    """Like :func:`run`, cached only ``FAST_TTL`` seconds (the Live page)."""
    return _cached_fast(_key(), name, args, tuple(sorted(kwargs.items())))


def local(name: str, *args: Any, **kwargs: Any) -> Any:
    """Call ``tracer.queries.<name>`` on a private in-memory DuckDB (queries over a DataFrame)."""
    con = queries.scratch()
    try:
        return getattr(queries, name)(con, *args, **kwargs)
    finally:
        con.close()


def _call(path: str, name: str, args: tuple, kwargs: tuple) -> Any:
    fn = getattr(queries, name)
    with Store(path).reader() as r:
        return fn(r, *args, **dict(kwargs))


@st.cache_data(ttl=TTL, show_spinner=False, max_entries=512)
def _cached(path: str, fp: str, name: str, args: tuple, kwargs: tuple) -> Any:
    return _call(path, name, args, kwargs)


@st.cache_data(ttl=FAST_TTL, show_spinner=False, max_entries=64)
def _cached_fast(path: str, name: str, args: tuple, kwargs: tuple) -> Any:
    return _call(path, name, args, kwargs)


def fingerprint(path: str) -> str:
    """Changes whenever the store does (a segment written or compacted away, the database rewritten):
    caches keyed by it are exact, never stale. Only stats the directory; reads no data."""
    layout = StoreLayout(Path(path))
    names = [p.name for p in list_segments(layout)]
    try:
        stat = layout.main.stat()
        main = f"{stat.st_mtime_ns}:{stat.st_size}"
    except OSError:
        main = "-"
    return hashlib.sha1("\n".join([main, *names]).encode()).hexdigest()


@st.cache_resource(ttl=600, max_entries=8, show_spinner=False)
def _session_tables(path: str, fp: str, session_id: str) -> dict[str, Any]:
    # Arrow tables are immutable: shared as they are (cache_resource), not copied per rerun.
    with Store(path).reader() as r:
        return queries.session_tables(r, session_id)


@st.cache_data(ttl=600, show_spinner=False, max_entries=256)
def _replay_step(path: str, fp: str, session_id: str, seq: int) -> dict[str, Any]:
    step = queries.step_from_tables(_session_tables(path, fp, session_id), seq)
    with Store(path).reader() as r:
        step["events"] = queries.event_log(r, session_id, seq)
        step["check"] = queries.check_at(r, session_id, seq)
    return step


def replay_step(path: str, session_id: str, seq: int) -> dict[str, Any]:
    """Everything the replay page draws for one step: ``units``, ``messages`` (computed by DuckDB
    over the session's extracted message events, cached until the store changes), ``events`` and
    ``check`` (from a fresh snapshot)."""
    return _replay_step(path, fingerprint(path), session_id, int(seq))


def replay_session(path: str, session_id: str) -> dict[str, Any]:
    """What does not change from step to step: the summary, token series, markers and bounds."""
    return _replay_session(path, fingerprint(path), session_id)


@st.cache_data(ttl=600, show_spinner=False, max_entries=64)
def _replay_session(path: str, fp: str, session_id: str) -> dict[str, Any]:
    with Store(path).reader() as r:
        return {
            "info": queries.session_info(r, session_id),
            "bounds": queries.session_bounds(r, session_id),
            "series": queries.token_series(r, session_id),
            "markers": queries.markers(r, session_id),
            "budget": queries.budget_at(r, session_id),
        }


def violation_detail(path: str, violation_span_id: str) -> dict[str, Any] | None:
    """A violation, its causal prune, the partners and the context just before and after it."""
    return _violation_detail(path, fingerprint(path), violation_span_id)


@st.cache_data(ttl=600, show_spinner=False, max_entries=128)
def _violation_detail(path: str, fp: str, violation_span_id: str) -> dict[str, Any] | None:
    with Store(path).reader() as r:
        detail = queries.causal_eviction(r, violation_span_id)
        if detail is None:
            return None
        seq = detail.get("prune_seq")
        if seq is not None:
            tables = queries.session_tables(r, detail["session_id"])
            detail["before"] = queries.step_from_tables(tables, int(seq) - 1, with_content=False)["units"]
            detail["after"] = queries.step_from_tables(tables, int(seq), with_content=False)["units"]
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
