"""The Sessions page's one query: search, filter and page every session in DuckDB.

At 10,000 sessions the page must answer in under a second, first render, every filter and the
first search. So nothing here summarises the whole store per span: the one row per session and the
searched texts are kept by compaction (:mod:`tracer.store.catalog`; a reader adds what the segments
not compacted yet hold), every filter and page is a query over the rows per session, and message
counts and peak tokens are computed for the page's rows only. Every value is a parameter.

Search looks at what a user remembers: message text, tool names, decisions, their reasons,
violation codes, annotation labels and notes, and the session's id and name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from tracer.contract import names as sn
from tracer.queries._sql import (
    SESSION,
    Source,
    _con,
    _list,
    scratch,
)
from tracer.queries.annotations import labelled_sessions
from tracer.store import StoreReader
from tracer.store import catalog as store_catalog

__all__ = ["KINDS", "changes_since", "page_detail", "page_of", "policies_seen", "search_hits", "session_index",
           "session_page"]

KINDS = ("recorded", "replay")  # recorded traffic (import, live, shadow, ...) vs replays through a policy

_PAGE_SQL = """
WITH picked AS (
    SELECT * FROM idx
    WHERE (CAST($kind AS VARCHAR) IS NULL OR kind = CAST($kind AS VARCHAR))
      AND (len(CAST($policies AS VARCHAR[])) = 0 OR list_contains(CAST($policies AS VARCHAR[]), policy))
      AND (CAST($gated AS BOOLEAN) IS NULL OR gated = CAST($gated AS BOOLEAN))
      AND (NOT $only_v OR violations > 0)
      AND (CAST($since AS BIGINT) IS NULL OR last_ns >= CAST($since AS BIGINT))
      AND (CAST($until AS BIGINT) IS NULL OR first_ns < CAST($until AS BIGINT))
      AND (CAST($q AS VARCHAR) IS NULL
           OR contains(lower(session_id), CAST($q AS VARCHAR))
           OR contains(lower(coalesce(label, '')), CAST($q AS VARCHAR))
           OR session_id IN (SELECT session_id FROM hits))
      AND (NOT $by_label OR session_id IN (SELECT session_id FROM labelled))
)
SELECT *, count(*) OVER () AS total,
       count(*) FILTER (WHERE kind = 'recorded') OVER () AS total_recorded,
       sum(violations) OVER () AS total_violations
FROM picked
ORDER BY last_ns DESC NULLS LAST, session_id
LIMIT $limit OFFSET $offset
"""

_PAGE_DETAIL = f"""
SELECT session_id,
       count(DISTINCT attributes->>'{sn.MESSAGE_ID}')
           FILTER (WHERE attributes->>'{sn.EVENT}' IN ('append', 'open')) AS messages,
       max(TRY_CAST(attributes->>'{sn.CONTEXT_TOKENS}' AS BIGINT)) AS peak_tokens
FROM ({store_catalog.message_records("spans", "session_id IN (SELECT unnest(CAST($ids AS VARCHAR[])))")})
GROUP BY session_id
"""

_PAGE_LABELS = f"""
SELECT session_id, string_agg(DISTINCT attributes->>'{sn.ANNOTATION_LABEL}', ', '
                              ORDER BY attributes->>'{sn.ANNOTATION_LABEL}') AS labels
FROM spans WHERE name = '{sn.ANNOTATION}' AND session_id IN (SELECT unnest(CAST($ids AS VARCHAR[])))
GROUP BY session_id
"""

_NO_HITS = pa.table({"session_id": pa.array([], pa.string())})


def session_index(src: Source) -> pa.Table:
    """One row per session: root attributes (name, source, source id, policy, gated, budget), kind
    (recorded or replay), span counts by decision and violation, first and last span time. A store
    reader serves the catalog compaction keeps (:mod:`tracer.store.catalog`) plus what its pending
    segments add; any other connection computes it from ``spans``. The dashboard keeps it per store
    state; every filter and page then runs over it."""
    if isinstance(src, StoreReader) and src.catalog_views:
        return src.con.sql("SELECT * FROM catalog_sessions").to_arrow_table()
    return _con(src).sql(store_catalog.index_sql("spans", messages=False)).to_arrow_table()


def search_hits(src: Source, q: str) -> pa.Table:
    """The sessions whose searchable text (message text, tool names, decisions, reasons, violation
    codes, annotations) contains ``q`` (case-insensitive): a scan of the texts compaction extracted,
    plus those of the pending segments."""
    rel = "catalog_search" if isinstance(src, StoreReader) and src.catalog_views else f"({store_catalog.search_sql('spans')})"
    return _con(src).sql(f"SELECT DISTINCT session_id FROM {rel} WHERE contains(text, $q)",
                         params={"q": q.strip().lower()}).to_arrow_table()


def page_of(index: pa.Table, hits: pa.Table | None = None, *, q: str | None = None, kind: str | None = None,
            policies: Sequence[str] | None = None, gated: bool | None = None, only_with_violations: bool = False,
            since_ns: int | None = None, until_ns: int | None = None, offset: int = 0,
            limit: int = 50, labelled: pa.Table | None = None) -> dict[str, Any]:
    """Filter and page :func:`session_index` in DuckDB; ``q`` matches session ids and names, or any
    session of ``hits`` (:func:`search_hits` of the same ``q``); ``labelled`` (when given) keeps
    those sessions only (:func:`tracer.queries.annotations.labelled_sessions`)."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS} or None; got {kind!r}")
    con = scratch()
    try:
        con.register("idx", index)
        con.register("hits", hits if hits is not None else _NO_HITS)
        con.register("labelled", labelled if labelled is not None else _NO_HITS)
        rows = con.execute(_PAGE_SQL, {
            "q": q, "kind": kind, "policies": _list(policies), "gated": gated, "only_v": bool(only_with_violations),
            "since": since_ns, "until": until_ns, "limit": int(limit), "offset": max(0, int(offset)),
            "by_label": labelled is not None,
        }).df()
        if rows.empty and offset > 0:  # past the end: still say how many match
            again = page_of(index, hits, q=q, kind=kind, policies=policies, gated=gated,
                            only_with_violations=only_with_violations, since_ns=since_ns, until_ns=until_ns,
                            offset=0, limit=1, labelled=labelled)
            return {**again, "rows": rows.drop(columns=["total", "total_recorded", "total_violations"])}
    finally:
        con.close()
    total = int(rows["total"].iloc[0]) if len(rows) else 0
    recorded = int(rows["total_recorded"].iloc[0]) if len(rows) else 0
    violations = int(rows["total_violations"].iloc[0] or 0) if len(rows) else 0
    return {"rows": rows.drop(columns=["total", "total_recorded", "total_violations"]), "total": total,
            "recorded": recorded, "replays": total - recorded, "violations": violations}


def page_detail(src: Source, rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with annotation ``labels`` of those sessions (and ``messages`` and ``peak_tokens``
    when the index did not carry them: a store without a catalog), read from the store."""
    ids = {"ids": [str(s) for s in rows["session_id"]]}
    labels = _con(src).execute(_PAGE_LABELS, ids).df()
    if "messages" not in rows:  # an index without them (no catalog yet): read them for this page
        rows = rows.merge(_con(src).execute(_PAGE_DETAIL, ids).df(), on="session_id", how="left")
    return rows.merge(labels, on="session_id", how="left")


def session_page(
    src: Source,
    *,
    search: str | None = None,
    kind: str | None = None,
    policies: Sequence[str] | None = None,
    gated: bool | None = None,
    only_with_violations: bool = False,
    since_ns: int | None = None,
    until_ns: int | None = None,
    offset: int = 0,
    limit: int = 50,
    labels: Sequence[str] = (),
) -> dict[str, Any]:
    """One page of sessions, newest activity first, and how many match (indexes built on the spot;
    the dashboard keeps them per store state and calls :func:`page_of` and :func:`page_detail`).

    ``search`` matches (case-insensitive substring) message text, tool names, decisions, reasons,
    violation codes, annotations, session ids and names; ``labels`` keeps sessions annotated with
    one of them; ``kind`` is ``recorded`` (any source but replay) or
    ``replay``; ``since_ns``/``until_ns`` keep sessions active in that window (Unix ns).
    Returns ``rows`` (a frame: id, name, kind, source, source id, policy, gated, budget, counts of
    violations, prunes, deferrals, spills, failures, first/last span time, messages, peak tokens),
    ``total``, ``recorded`` and ``replays`` (of the matching sessions) and ``violations``.
    """
    q = (search or "").strip().lower() or None
    out = page_of(session_index(src), search_hits(src, q) if q else None, q=q, kind=kind, policies=policies,
                  gated=gated, only_with_violations=only_with_violations, since_ns=since_ns, until_ns=until_ns,
                  offset=offset, limit=limit, labelled=labelled_sessions(src, labels) if labels else None)
    out["rows"] = page_detail(src, out["rows"])
    return out


def policies_seen(src: Source) -> list[str]:
    """Policies of the sessions in the store (the filter's choices)."""
    rows = _con(src).execute(
        f"SELECT DISTINCT policy FROM spans WHERE name = '{SESSION}' AND policy IS NOT NULL ORDER BY 1").fetchall()
    return [str(r[0]) for r in rows]


def changes_since(index: pa.Table, time_ns: int) -> dict[str, int]:
    """What a session index (:func:`session_index`) gained after ``time_ns``: sessions begun since, by
    kind (``recorded``, ``replay``), and ``grown``, sessions begun before that had spans after it
    (annotations left out). A saved comparison shows it: its numbers are the store as it was then."""
    first, last = index.column("first_ns"), index.column("last_ns")
    new = pc.fill_null(pc.greater(first, time_ns), False)
    grown = pc.fill_null(pc.and_(pc.less_equal(first, time_ns), pc.greater(last, time_ns)), False)
    kinds = index.filter(new).column("kind").to_pylist()
    return {"recorded": kinds.count("recorded"), "replay": kinds.count("replay"),
            "grown": int(pc.sum(pc.cast(grown, pa.int64())).as_py() or 0)}

