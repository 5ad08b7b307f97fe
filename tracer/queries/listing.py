"""Sessions: the one session-listing query, and what is known about one session.

Why one query: the Sessions page, the pickers of the Replay and Compare pages and ``prunegate
sessions`` list the same sessions with the same filters; :func:`sessions` is that list. With
``summary`` it aggregates every span of each session (counts, tokens); without, it reads only the
root spans plus each session's first and last span time, which is what a picker needs and stays
cheap on a large store. A session still recording has no root span yet: it is listed from its
other spans (``complete`` leaves it out).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Literal

import pandas as pd

from tracer.contract import names as sn
from tracer.queries._sql import (
    _AFTERWARDS,
    SESSION,
    Source,
    _con,
    _df,
    _first_row,
    _list,
    _one,
    _struct,
)
from tracer.store import Store, StoreReader
from tracer.store import catalog as store_catalog

Order = Literal["recent", "started", "oldest"]
_ORDER: dict[str, str] = {  # constants only: never user text in SQL
    "recent": "last_ns DESC NULLS LAST, session_id",
    "started": "first_ns DESC NULLS LAST, session_id",
    "oldest": "first_ns NULLS LAST, session_id",
}

# Root attributes that are not columns (source, policy, gated and budget are: tracer.store.schema.PROMOTED).
_ROOT_FIELDS = {
    sn.SESSION_NAME: "VARCHAR", sn.SESSION_SOURCE_ID: "VARCHAR", sn.PROVIDER: "VARCHAR",
    sn.POLICY_PARAMS: "VARCHAR", sn.HARD_CEILING: "BIGINT", sn.CONTENT_CAPTURED: "BOOLEAN",
    sn.REPLAY_LABEL: "VARCHAR",
}

# One row per session from its root span (None for every column while it is still recording).
_ROOTS = f"""
roots AS (
    SELECT session_id,
           any_value(a."{sn.SESSION_NAME}") AS label,
           any_value(source) AS source,
           any_value(a."{sn.SESSION_SOURCE_ID}") AS source_id,
           any_value(a."{sn.PROVIDER}") AS provider,
           any_value(policy) AS policy,
           any_value(a."{sn.POLICY_PARAMS}") AS policy_params,
           any_value(a."{sn.REPLAY_LABEL}") AS replay_label,
           any_value(gated) AS gated,
           any_value(budget) AS budget,
           any_value(a."{sn.HARD_CEILING}") AS hard_ceiling,
           any_value(a."{sn.CONTENT_CAPTURED}") AS content_captured
    FROM (SELECT session_id, source, policy, gated, budget, from_json(attributes, '{_struct(_ROOT_FIELDS)}') AS a
          FROM {{roots}}) r
    GROUP BY session_id
)"""


def roots_relation(*, kept: bool, where: str = "true") -> str:
    """Every session's root spans (session id, promoted columns, attributes): a store reader's
    ``catalog_roots`` (kept by compaction) with ``kept``, else picked out of ``spans``."""
    return "catalog_roots" if kept else f"({store_catalog.roots_sql('spans', where)})"


# Per session: what its spans add up to (the Sessions page's columns; the definitions of docs/replay.md).
_COUNTS = f"agg AS ({store_catalog.counts_sql('spans', '{where}')})"

# Per session: only when it was active (no attribute is parsed).
_TIMES = """
agg AS (
    SELECT session_id, min(start_time_ns) AS first_ns, max(coalesce(end_time_ns, start_time_ns)) AS last_ns
    FROM spans WHERE session_id IS NOT NULL AND name NOT IN """ + _AFTERWARDS + """ AND {where} GROUP BY session_id
)"""


def summary_sql(*, summary: bool = True, where: str = "true", kept: bool = False) -> str:
    """The listing's relation: one row per session, root columns (``label``, ``source``,
    ``source_id``, ``provider``, ``policy``, ``policy_params``, ``replay_label``, ``gated``,
    ``budget``, ``hard_ceiling``, ``content_captured``), ``complete`` (its root is stored),
    ``first_ns``/``last_ns`` and, with ``summary``, the span counts. ``where`` is a constant filter
    on spans (``session_id = $sid``), never user text. ``kept``: roots, counts and times come from
    what compaction keeps (a store reader's ``catalog_roots``, ``catalog_counts`` and
    ``catalog_sessions``, :mod:`tracer.store.catalog`) instead of a pass over every span (only for
    the whole store: no ``where``). Other query modules build on it."""
    if kept and where != "true":
        raise ValueError("kept rows are for the whole store's summary")
    if kept:
        agg = ("agg AS (SELECT * FROM catalog_counts)" if summary
               else "agg AS (SELECT session_id, first_ns, last_ns FROM catalog_sessions)")
    else:
        agg = (_COUNTS if summary else _TIMES).replace("{where}", where)
    return f"""
WITH {_ROOTS.replace("{roots}", roots_relation(kept=kept, where=where))},
{agg}
SELECT agg.session_id, roots.label, roots.source, roots.source_id, roots.provider, roots.policy,
       roots.policy_params, roots.replay_label, roots.gated, roots.budget, roots.hard_ceiling,
       roots.content_captured, roots.session_id IS NOT NULL AS complete,
       agg.* EXCLUDE (session_id)
FROM agg LEFT JOIN roots USING (session_id)
"""


def reads_kept(src: Source) -> bool:
    """Whether ``src`` is a store reader over a store whose catalog compaction keeps (then its
    ``catalog_*`` views serve the kept rows plus those of pending segments); any other source
    computes everything from ``spans``."""
    return isinstance(src, StoreReader) and src.catalog and src.catalog_views


_SUMMARY = {k: summary_sql(kept=k) for k in (False, True)}
_ONE_SUMMARY = summary_sql(where="session_id = $sid")
_ROOTS_ONLY = {k: summary_sql(summary=False, kept=k) for k in (False, True)}


def _listing(
    *,
    sources: Sequence[str] | None,
    exclude_sources: Sequence[str] | None,
    policies: Sequence[str] | None,
    gated: bool | None,
    text: str | None,
    only_with_violations: bool,
    complete: bool,
    summary: bool,
    order: Order,
    limit: int | None,
    kept: bool = False,
) -> tuple[str, dict[str, Any]]:
    if order not in _ORDER:
        raise ValueError(f"unknown order {order!r}; expected one of {sorted(_ORDER)}")
    if only_with_violations and not summary:
        raise ValueError("only_with_violations needs summary=True (violations are counted from spans)")
    sql = f"""
    SELECT * FROM ({(_SUMMARY if summary else _ROOTS_ONLY)[kept]}) t
    WHERE (len(CAST($sources AS VARCHAR[])) = 0
           OR list_contains(CAST($sources AS VARCHAR[]), coalesce(source, '')))
      AND NOT list_contains(CAST($exclude AS VARCHAR[]), coalesce(source, ''))
      AND (len(CAST($policies AS VARCHAR[])) = 0
           OR list_contains(CAST($policies AS VARCHAR[]), coalesce(policy, '')))
      AND (CAST($gated AS BOOLEAN) IS NULL OR gated = CAST($gated AS BOOLEAN))
      AND (CAST($text AS VARCHAR) IS NULL OR contains(lower(session_id), lower(CAST($text AS VARCHAR)))
           OR contains(lower(coalesce(label, '')), lower(CAST($text AS VARCHAR))))
      {"AND violations > 0" if only_with_violations else ""}
      AND (NOT $complete OR complete)
    ORDER BY {_ORDER[order]}
    LIMIT $limit
    """
    params = {
        "sources": _list(sources),
        "exclude": _list(exclude_sources),
        "policies": _list(policies),
        "gated": gated,
        "text": text or None,
        "complete": bool(complete),
        "limit": int(limit) if limit is not None else 2**62,
    }
    return sql, params


def sessions(
    src: Source,
    *,
    sources: Sequence[str] | None = None,
    exclude_sources: Sequence[str] | None = None,
    policies: Sequence[str] | None = None,
    gated: bool | None = None,
    text: str | None = None,
    only_with_violations: bool = False,
    complete: bool = False,
    summary: bool = True,
    order: Order = "recent",
    limit: int | None = 5000,
) -> pd.DataFrame:
    """The sessions of the store, one row each, filtered in DuckDB: by source (``sources`` /
    ``exclude_sources``), policy, gating, a text in the id or name, violations; ``complete`` keeps
    only sessions whose root span is stored. With ``summary`` (default) each row has the span
    counts (messages, tool_calls, peak/final tokens, checks, violations, prunes, deferrals, spills,
    failures, retries, model calls, invalid requests, ...); without, the root columns and times
    only (cheap). ``order``: ``recent`` (latest activity first), ``started`` (newest first),
    ``oldest`` (oldest first)."""
    sql, params = _listing(sources=sources, exclude_sources=exclude_sources, policies=policies, gated=gated,
                           text=text, only_with_violations=only_with_violations, complete=complete,
                           summary=summary, order=order, limit=limit, kept=reads_kept(src))
    return _df(src, sql, params)


LIST_COLUMNS = ("id", "name", "source", "provider", "policy", "gated", "messages", "tool_calls", "peak_tokens",
                "violations")


def list_sessions(store: Store | str | os.PathLike[str] | None = None, sources: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """:func:`sessions` as plain rows for ``prunegate sessions`` and scripts: complete sessions,
    oldest first, with :data:`LIST_COLUMNS` (``id`` and ``name`` are the session id and label;
    messages and tool calls count arrivals, not re-injections or summaries)."""
    store = store if isinstance(store, Store) else Store(store)
    with store.reader() as r:
        sql, params = _listing(sources=sources, exclude_sources=None, policies=None, gated=None, text=None,
                               only_with_violations=False, complete=True, summary=True, order="oldest", limit=None,
                               kept=reads_kept(r))
        cur = _con(r).execute(sql, params)
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
    return [{"id": r["session_id"], "name": r["label"], **{k: r[k] for k in LIST_COLUMNS[2:]}} for r in rows]


def session_filter_options(src: Source) -> dict[str, list[str]]:
    """Distinct sources and policies, for the filter widgets."""
    rows = _one(
        src,
        f"""
        SELECT list(DISTINCT source) FILTER (WHERE source IS NOT NULL),
               list(DISTINCT policy) FILTER (WHERE policy IS NOT NULL)
        FROM spans WHERE name = '{SESSION}'
        """,
        {},
    )
    assert rows is not None  # an aggregate always returns one row
    return {"sources": sorted(rows[0] or []), "policies": sorted(rows[1] or [])}


def session_info(src: Source, session_id: str) -> dict[str, Any] | None:
    """The summary row of one session (as :func:`sessions`), or None when it has no spans."""
    df = _df(src, _ONE_SUMMARY, {"sid": session_id})
    if df.empty:
        return None
    return _first_row(df)


def session_bounds(src: Source, session_id: str) -> tuple[int, int] | None:
    """The first and last step (``prunegate.seq``) of a session, or None when it has none."""
    row = _one(
        src,
        "SELECT min(seq), max(seq) FROM spans WHERE session_id = $sid AND seq IS NOT NULL",
        {"sid": session_id},
    )
    if row is None or row[0] is None:
        return None
    return int(row[0]), int(row[1])


_ROOT_STRUCT = _struct({k: v for k, v in _ROOT_FIELDS.items() if k not in (sn.POLICY_PARAMS,
                                                                           sn.REPLAY_LABEL)})


def session_root(src: Source, session_id: str) -> dict[str, Any] | None:
    """A session's root attributes (name as ``label``, source, policy, gated, budget, ...) and the
    root's ``trace_id`` and ``span_id`` (what an annotation on the session hangs on): cheap,
    reads the root span only. None while the session is still recording (no root yet) or unknown."""
    row = _one(src, f"""
        SELECT j."{sn.SESSION_NAME}", source, j."{sn.SESSION_SOURCE_ID}",
               j."{sn.PROVIDER}", policy, gated, budget,
               j."{sn.HARD_CEILING}", j."{sn.CONTENT_CAPTURED}", trace_id, span_id
        FROM (SELECT source, policy, gated, budget, trace_id, span_id,
                     from_json(attributes, '{_ROOT_STRUCT}') AS j FROM spans
              WHERE session_id = $sid AND name = '{SESSION}' LIMIT 1) x
        """, {"sid": session_id})
    if row is None:
        return None
    keys = ("label", "source", "source_id", "provider", "policy", "gated", "budget", "hard_ceiling",
            "content_captured", "trace_id", "span_id")
    return {"session_id": session_id, **dict(zip(keys, row, strict=True))}


def store_totals(src: Source) -> dict[str, int]:
    """Span and session counts, and the newest span time (Unix ns; 0 when empty)."""
    row = _one(src, "SELECT count(*), count(DISTINCT session_id), coalesce(max(start_time_ns), 0) FROM spans", {})
    assert row is not None
    return {"spans": int(row[0]), "sessions": int(row[1]), "last_ns": int(row[2])}


def policy_choices(src: Source) -> list[str]:
    """Policy names a comparison can run: the registry's built-ins and any seen in the store."""
    from policies.registry import available

    row = _one(src, f"SELECT list(DISTINCT policy) FROM spans WHERE name = '{SESSION}'", {})
    seen = {p for p in ((row[0] if row else None) or []) if p}
    return sorted(set(available()) | {p.split("@", 1)[0] for p in seen})


__all__ = [
    "LIST_COLUMNS", "list_sessions", "policy_choices", "session_bounds", "session_filter_options", "session_info",
    "session_root", "sessions", "store_totals", "summary_sql",
]
