"""Store access for the pages: short-lived readers, caches keyed by the store's fingerprint.

A :class:`~tracer.store.StoreReader` is a snapshot; holding one open makes compaction wait, so
every call here opens one, runs its queries and closes it. Cached results are keyed by the store's
:func:`fingerprint` (segment names and the database file's mtime/size, a directory listing): a
segment written by a recording agent changes it, so new data shows on the next rerun and no cache
ever hides it. TTLs only bound memory.

A replayed session is read once per fingerprint (:func:`_bundle`: its spans with attributes
extracted, as Arrow tables); every step is then computed by DuckDB over those tables, without
opening the store again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import pandas as pd
import pyarrow as pa
import streamlit as st

from dashboard.components.widgets import session_label
from tracer import queries
from tracer.contract import names as sn
from tracer.queries import access, explain
from tracer.queries import catalog as session_catalog
from tracer.queries.access import StoreLocation

TTL = 300.0  # seconds; keys also carry the store's fingerprint, so new data shows at once (TTLs bound memory)
FAST_TTL = 1.0


def store_path() -> StoreLocation:
    """The store this dashboard shows: ``$PRUNEGATE_STORE`` (set by ``prunegate dashboard``)."""
    return access.store_location()


def key() -> str:
    """The resolved store path: the first part of every cache key."""
    return str(store_path().resolve())


def fingerprint(path: str) -> str:
    """Changes whenever the store does (a segment written or compacted away, the database rewritten):
    caches keyed by it are exact, never stale (:func:`tracer.queries.access.version`: a listing, no data read)."""
    return access.version(path)


def activity(path: str) -> str:
    """Like :func:`fingerprint`, but unchanged by an annotation or a saved comparison: the key of
    caches of what sessions did (spans, violations, metrics), so saving an annotation re-reads only
    the annotations (:func:`tracer.queries.access.activity_version`)."""
    return access.activity_version(path)


# ----------------------------------------------------------------------------- any query
Query = Callable[..., Any]


def run(fn: Query, *args: Any, **kwargs: Any) -> Any:
    """Call ``fn(reader, *args, **kwargs)`` (a function of :mod:`tracer.queries`) on a fresh snapshot.
    Cached until the store changes (and at most ``TTL`` seconds)."""
    path = key()
    return _cached(path, fingerprint(path), _name(fn), args, tuple(sorted(kwargs.items())), fn)


def run_activity(fn: Query, *args: Any, **kwargs: Any) -> Any:
    """Like :func:`run`, for a query that never reads annotations or saved comparisons: cached until
    the sessions' spans change (:func:`activity`), not re-run after an annotation is saved."""
    path = key()
    return _cached(path, "activity:" + activity(path), _name(fn), args, tuple(sorted(kwargs.items())), fn)


def run_fresh(fn: Query, *args: Any, **kwargs: Any) -> Any:
    """Like :func:`run`, but also re-read at least every ``FAST_TTL`` seconds (the Live page)."""
    path = key()
    return _cached_fast(path, fingerprint(path), _name(fn), args, tuple(sorted(kwargs.items())), fn)


def _name(fn: Query) -> str:
    """The cache key of a query function (the function itself is not hashed: ``_fn`` below)."""
    return f"{fn.__module__}.{fn.__qualname__}"


def _call(path: str, fn: Query, args: tuple, kwargs: tuple) -> Any:
    with access.snapshot(path) as r:
        return fn(r, *args, **dict(kwargs))


@st.cache_data(ttl=TTL, show_spinner=False, max_entries=512)
def _cached(path: str, fp: str, name: str, args: tuple, kwargs: tuple, _fn: Query) -> Any:
    return _call(path, _fn, args, kwargs)


@st.cache_data(ttl=FAST_TTL, show_spinner=False, max_entries=64)
def _cached_fast(path: str, fp: str, name: str, args: tuple, kwargs: tuple, _fn: Query) -> Any:
    return _call(path, _fn, args, kwargs)


# ----------------------------------------------------------------------------- the store at a glance
def catalog() -> dict[str, Any]:
    """Store totals and why the snapshot may be incomplete, in one read (every page's sidebar)."""
    path = key()
    return _catalog(path, fingerprint(path))


@st.cache_data(ttl=TTL, show_spinner=False, max_entries=8)
def _catalog(path: str, fp: str) -> dict[str, Any]:
    with access.snapshot(path) as r:
        return {**queries.store_totals(r), "warnings": list(r.warnings)}


def session_list() -> Any:
    """The cheap list of session roots for pickers (newest first, at most 2,000)."""
    return run_activity(queries.sessions, summary=False, order="started", limit=2000)


def session_choices() -> tuple[tuple[str, ...], Mapping[str, str]]:
    """:func:`session_list`'s ids and their picker labels, made once per store activity: copying the
    cached list and labelling 2,000 sessions took about 30 ms of every Replay page run."""
    path = key()
    return _session_choices(path, activity(path))


@st.cache_resource(ttl=TTL, max_entries=4, show_spinner=False)
def _session_choices(path: str, fp: str) -> tuple[tuple[str, ...], Mapping[str, str]]:
    records = session_list().to_dict("records")
    ids = tuple(str(r["session_id"]) for r in records)
    return ids, MappingProxyType({str(r["session_id"]): session_label(r) for r in records})  # shared: read-only


# ----------------------------------------------------------------------------- compare
SOURCES_LISTED = 100  # more recorded sessions than this: "all of them" is a checkbox, not 2,500 chips in a picker


def compare_arms(metric: str, sources: tuple[str, ...] | None, arms: tuple[str, ...]) -> dict[str, Any]:
    """The Compare page's replays of ``sources`` (None: every recorded session) under ``arms``:
    ``chosen`` (their per-session metrics), ``side`` (every metric's mean per arm), ``n`` (sessions
    per arm) and ``summary`` (:func:`tracer.queries.arm_summary` of ``metric``). Kept per store
    activity and pick, so a second visit, or another user's, does not recompute them."""
    path = key()
    return _compare_arms(path, activity(path), metric, sources, arms)


@st.cache_data(ttl=TTL, show_spinner=False, max_entries=64)
def _compare_arms(path: str, fp: str, metric: str, sources: tuple[str, ...] | None,
                  arms: tuple[str, ...]) -> dict[str, Any]:
    frame = run_activity(queries.session_metrics)
    chosen = frame[(frame["source"] == "replay") & frame["arm"].isin(arms)]
    if sources is not None:
        chosen = chosen[chosen["source_id"].isin(sources)]
    chosen = chosen.reset_index(drop=True)
    if chosen.empty:
        return {"chosen": chosen}
    side = chosen.groupby("arm")[list(queries.METRICS)].mean().T
    side.insert(0, "metric", side.index)
    return {"chosen": chosen, "side": side, "n": chosen.groupby("arm")["session_id"].count(),
            "summary": queries.arm_summary(chosen, metric)}


def default_baseline(arms: list[str]) -> str:
    """The Compare page's baseline arm until one is picked: recency under the gate when it ran, else
    any recency, else the recorded sessions, else the first."""
    for wanted in ("recency · gated", "recency · ungated", "(recorded)"):
        if wanted in arms:
            return wanted
    return arms[0]


def compare_default() -> None:
    """Compute what the Compare page shows before anything is picked (every recorded session, every
    arm, the first metric, :func:`default_baseline`), so its first visit finds it cached: the paired
    differences alone took 0.15 s at 10,024 sessions."""
    metrics = run_activity(queries.session_metrics)
    replays = metrics[metrics["source"] == "replay"]
    if replays.empty:
        return
    arms = sorted({str(a) for a in replays["arm"]})
    metric = list(queries.METRICS)[0]
    chosen = compare_arms(metric, None, tuple(arms))["chosen"]
    if not chosen.empty:
        compare_pairs(metric, None, tuple(arms), default_baseline(sorted(chosen["arm"].unique())))


def compare_pairs(metric: str, sources: tuple[str, ...] | None, arms: tuple[str, ...],
                  baseline: str) -> dict[str, Any]:
    """The per-session differences against ``baseline`` of :func:`compare_arms`' replays:
    ``diff`` (:func:`tracer.queries.session_differences`) and ``diffs`` (their mean with its
    interval per arm, :func:`tracer.queries.difference_summary`; empty without pairs)."""
    path = key()
    return _compare_pairs(path, activity(path), metric, sources, arms, baseline)


@st.cache_data(ttl=TTL, show_spinner=False, max_entries=64)
def _compare_pairs(path: str, fp: str, metric: str, sources: tuple[str, ...] | None, arms: tuple[str, ...],
                   baseline: str) -> dict[str, Any]:
    chosen = _compare_arms(path, fp, metric, sources, arms)["chosen"]
    diff = queries.session_differences(chosen, metric, baseline)
    diffs = queries.difference_summary(chosen, metric, baseline) if not diff.empty else None
    return {"diff": diff, "diffs": diffs}


# ----------------------------------------------------------------------------- the sessions list
@st.cache_resource(ttl=600, max_entries=4, show_spinner=False)
def _session_index(path: str, fp: str) -> Any:
    with access.snapshot(path) as r:
        return session_catalog.session_index(r)


@st.cache_data(ttl=TTL, show_spinner=False, max_entries=64)
def _search_hits(path: str, fp: str, q: str) -> Any:
    with access.snapshot(path) as r:
        return session_catalog.search_hits(r, q)


def session_policies() -> list[str]:
    """The policies of the store's sessions (the filter's choices), from the cached index."""
    path = key()
    column = _session_index(path, activity(path)).column("policy").to_pylist()
    return sorted({str(p) for p in column if p})


def changes_since(time_ns: int) -> dict[str, int]:
    """Sessions the store gained after ``time_ns`` (:func:`tracer.queries.catalog.changes_since`)."""
    path = key()
    return session_catalog.changes_since(_session_index(path, activity(path)), time_ns)


def session_page(*, search: str | None = None, labels: tuple[str, ...] = (), **filters: Any) -> dict[str, Any]:
    """A page of the Sessions list (:func:`tracer.queries.catalog.session_page`) over indexes read once per
    store state: every filter and page is then a DuckDB query over 1 row per session, plus the
    page's own messages and peak tokens."""
    path = key()
    fp = fingerprint(path)
    return _session_page(path, fp, (search or "").strip().lower() or None, tuple(labels),
                         tuple(sorted(filters.items())))


@st.cache_data(ttl=TTL, show_spinner=False, max_entries=256)
def _session_page(path: str, fp: str, q: str | None, labels: tuple[str, ...], filters: tuple) -> dict[str, Any]:
    labelled = run(queries.labelled_sessions, labels) if labels else None
    out = session_catalog.page_of(_session_index(path, activity(path)), _search_hits(path, fp, q) if q else None, q=q,
                                  labelled=labelled, **dict(filters))
    with access.snapshot(path) as r:
        out["rows"] = session_catalog.page_detail(r, out["rows"])
    return out


# ----------------------------------------------------------------------------- one session, step by step
@st.cache_resource(ttl=600, max_entries=8, show_spinner=False)
def _bundle(path: str, fp: str, session_id: str) -> dict[str, Any]:
    # Shared, not copied, across reruns (cache_resource): callers treat it as read-only. ``fp`` is the
    # store's activity: an annotation saved does not re-read the session (its annotations: below).
    with access.snapshot(path, sessions=[session_id]) as r:  # on a bucket: only this session's row groups
        root = queries.session_root(r, session_id)
        rows = queries.session_rows(r, session_id)
    tables = queries.tables_from_rows(rows, session_id)
    return {
        "info": root,
        "rows": rows,  # the session's spans: its violations' causes are read from these (_violation_detail)
        "tables": tables,
        "bounds": queries.bounds_from_tables(tables),
        "series": queries.series_from_tables(tables),
        "markers": queries.markers_from_tables(tables),
        "budget": queries.budget_from_tables(tables, root),
    }


def replay_session(path: str, session_id: str) -> dict[str, Any]:
    """What does not change from step to step: ``info`` (the root's attributes and ids; None while
    the session is still recording), ``bounds``, the token ``series``, ``markers`` and ``budget``."""
    return _bundle(path, activity(path), session_id)


def session_annotations(session_id: str) -> pd.DataFrame:
    """The session's annotations (:func:`tracer.queries.annotation_list`), cached apart from the
    session: saving one re-reads only them."""
    return run(queries.annotation_list, session_id=session_id)


def replay_step(path: str, session_id: str, seq: int) -> dict[str, Any]:
    """Everything the replay page draws for one step: ``units``, ``messages``, ``events`` and
    ``check``, computed by DuckDB over the session's extracted tables."""
    return _replay_step(path, activity(path), session_id, int(seq))


@st.cache_data(ttl=600, show_spinner=False, max_entries=256)
def _replay_step(path: str, fp: str, session_id: str, seq: int) -> dict[str, Any]:
    return queries.step_from_tables(_bundle(path, fp, session_id)["tables"], seq)


def next_step(path: str, session_id: str, seq: int, target: str) -> int | None:
    """The next step after ``seq`` holding a ``target`` (violation, prune, deferral, ...)."""
    return queries.next_from_tables(_bundle(path, activity(path), session_id)["tables"], seq, target)


# ----------------------------------------------------------------------------- violations
def violation_detail(path: str, violation_span_id: str) -> dict[str, Any] | None:
    """A violation, its causal prune, the partners and the context just before and after it."""
    return _violation_detail(path, activity(path), violation_span_id, None)


@st.cache_data(ttl=600, show_spinner=False, max_entries=128)
def _violation_detail(path: str, fp: str, violation_span_id: str, session_id: str | None) -> dict[str, Any] | None:
    if session_id is None:  # the Violations page: the session is found by the query, read only if pruned
        with access.snapshot(path) as r:
            detail = queries.causal_eviction(r, violation_span_id)
    else:  # the Replay page, which holds the session's rows: its prune, check and partners read from them
        rows = _bundle(path, fp, session_id)["rows"]
        detail = queries.on_session_rows(rows, lambda con: queries.causal_eviction(
            con, violation_span_id, session_id=session_id))
    if detail is None:
        return None
    seq = detail.get("prune_seq")
    if seq is None:
        detail["before"] = detail["after"] = pd.DataFrame()
        return detail
    tables = _bundle(path, fp, detail["session_id"])["tables"]
    detail["before"] = queries.step_from_tables(tables, int(seq) - 1, with_content=False)["units"]
    detail["after"] = queries.step_from_tables(tables, int(seq), with_content=False)["units"]
    prune = json.loads(detail["prune"]) if isinstance(detail.get("prune"), str) else dict(detail.get("prune") or {})
    detail["evicted"] = explain.evicted_units(detail["before"], prune.get(sn.PRUNED_IDS) or [])
    return detail


VIOLATION_ROWS = 50  # a page of the Violations list; a million-span store holds tens of thousands of violations
RETRY_ROWS = 200  # the newest repeated side-effecting calls listed


def violation_page(scope: str | None, codes: tuple[str, ...], page: int) -> pd.DataFrame:
    """Page ``page`` (from 1) of the violations, newest first, of session ``scope`` (None: every
    session) with one of ``codes`` (none: every code) (:func:`tracer.queries.violations`)."""
    return run_activity(queries.violations, session_id=scope, codes=tuple(codes), limit=VIOLATION_ROWS,
                        offset=(page - 1) * VIOLATION_ROWS)


def first_violation(shown: pd.DataFrame) -> str:
    """The violation a page of :func:`violation_page` opens on: the first whose cause is known."""
    linked = [str(x) for x in shown.loc[shown["cause_span_id"].notna(), "span_id"]]
    return linked[0] if linked else str(shown["span_id"].iloc[0])


def repeated_calls(scope: str | None) -> pd.DataFrame:
    """The newest repeated side-effecting calls of session ``scope`` (None: every session)."""
    return run_activity(queries.retries, session_id=scope, limit=RETRY_ROWS)


# ----------------------------------------------------------------------------- why a request broke
@st.cache_resource(ttl=600, max_entries=8, show_spinner=False)
def _gated_twin(path: str, fp: str, session_id: str) -> tuple[str | None, pa.Table | None]:
    # The gated replay of an ungated session and its spans, in one reader, once per session: finding
    # it searches every session's root, so each violation step of the session then maps its step in
    # memory (shared, not copied: callers treat the rows as read-only).
    with access.snapshot(path) as r:
        twin = explain.gated_twin(r, session_id)
        return twin, (None if twin is None else queries.session_rows(r, twin))


def why(path: str, session_id: str, seq: int) -> dict[str, Any] | None:
    """The violations at step ``seq`` of a session and what caused them, for the Replay page:
    ``violations`` (a frame: span id, code, ids, message, the ids and message ids it names),
    ``causes`` (one :func:`violation_detail` per distinct causing prune, in step order) and
    ``gated`` (the same step of the gated replay of the same source and policy, or None).
    None when nothing was violated at this step."""
    return _why(path, activity(path), session_id, int(seq))


@st.cache_data(ttl=600, show_spinner=False, max_entries=128)
def _why(path: str, fp: str, session_id: str, seq: int) -> dict[str, Any] | None:
    bundle = _bundle(path, fp, session_id)
    found = explain.violations_at(bundle["tables"], seq)
    if found.empty:
        return None
    named_ids: list[list[str]] = []
    named_msgs: list[list[str]] = []
    causes: dict[str, dict[str, Any]] = {}
    for span_id in found["span_id"]:
        detail = _violation_detail(path, fp, str(span_id), session_id)
        if detail is None:
            named_ids.append([])
            named_msgs.append([])
            continue
        attrs = json.loads(detail["violation"]) if isinstance(detail.get("violation"), str) else {}
        named_ids.append([str(x) for x in attrs.get(sn.VIOLATION_IDS) or []])
        named_msgs.append([str(x) for x in attrs.get(sn.VIOLATION_MESSAGE_IDS) or []])
        cause = detail.get("prune_span_id")
        if cause and cause not in causes:
            causes[cause] = detail
    found = found.assign(named_ids=pd.Series(named_ids, index=found.index, dtype=object),
                         named_messages=pd.Series(named_msgs, index=found.index, dtype=object))
    gated = None
    info = bundle["info"] or {}
    if info.get("gated") is False:
        twin, twin_rows = _gated_twin(path, fp, session_id)
        if twin is not None:  # its step from the two sessions' rows, in memory
            both = pa.concat_tables([bundle["rows"], twin_rows], promote_options="default")
            gated = {"session_id": twin, "step": queries.on_session_rows(
                both, lambda con: explain.twin_step(con, session_id, seq, twin))}
    ordered = sorted(causes.values(), key=lambda d: (int(d.get("prune_seq") or 0), str(d["prune_span_id"])))
    return {"violations": found, "causes": ordered, "gated": gated}
