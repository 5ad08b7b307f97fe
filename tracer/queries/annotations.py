"""Annotations and saved comparisons read back from the store (written by :mod:`tracer.queries.writes`).

An annotation row names what it is on: its session, the target kind (session, decision, violation),
the annotated span and, for a decision or violation, that span's name and step (``seq``), so a list
can link to the replay at that step.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pandas as pd
import pyarrow as pa

from tracer.contract import names as sn
from tracer.queries._sql import Source, _con, _df, _list

__all__ = ["annotation_labels", "annotation_list", "labelled_sessions", "saved_comparison", "saved_comparisons"]

_ANNOTATIONS = f"""
WITH a AS (
    SELECT session_id, span_id AS annotation_span_id, start_time_ns AS time_ns,
           attributes->>'{sn.ANNOTATION_ID}' AS id,
           attributes->>'{sn.ANNOTATION_TARGET}' AS target,
           attributes->>'{sn.ANNOTATION_SPAN_ID}' AS span_id,
           attributes->>'{sn.ANNOTATION_LABEL}' AS label,
           attributes->>'{sn.ANNOTATION_NOTE}' AS note,
           attributes->>'{sn.ANNOTATION_AUTHOR}' AS author
    FROM spans
    WHERE name = '{sn.ANNOTATION}' {{sessions}}
      AND (len(CAST($labels AS VARCHAR[])) = 0
           OR list_contains(CAST($labels AS VARCHAR[]), attributes->>'{sn.ANNOTATION_LABEL}'))
)
SELECT a.id, a.session_id, a.target, a.label, a.note, a.author, a.time_ns, a.span_id,
       t.name AS span_name, t.seq AS step,
       CASE WHEN t.name = '{sn.VIOLATION}' THEN t.attributes->>'{sn.VIOLATION_CODE}'
            WHEN t.name = '{sn.BUDGET_CHECK}' THEN t.attributes->>'{sn.DECISION}'
            WHEN t.name = '{sn.SESSION}' THEN t.attributes->>'{sn.SESSION_NAME}'
            ELSE replace(t.name, '{sn.PREFIX}', '') END AS what
FROM a LEFT JOIN (SELECT session_id, span_id, name, seq, attributes FROM spans
                  WHERE {{targets}}) t
       ON t.session_id = a.session_id AND t.span_id = a.span_id
ORDER BY a.time_ns DESC, a.id
"""
_ONE_SESSION = _ANNOTATIONS.format(sessions="AND session_id = $session", targets="session_id = $session")
"""One session's: its id compared as such (not ``$session IS NULL OR ...``), so DuckDB skips the row
groups of other sessions by their statistics (a session without annotations: 0.06 -> 0.02 s at 10,024)."""
_EVERY_SESSION = _ANNOTATIONS.format(sessions="", targets="session_id IN (SELECT session_id FROM a)")


def annotation_list(src: Source, session_id: str | None = None, labels: Sequence[str] | None = None) -> pd.DataFrame:
    """Every annotation (of one session, with one of ``labels``), newest first: id, session, target
    kind, label, note, author, time, the annotated span with its name, step and what it is (the
    violation code, the decision, the session name)."""
    if session_id is None:
        return _df(src, _EVERY_SESSION, {"labels": _list(labels)})
    return _df(src, _ONE_SESSION, {"session": session_id, "labels": _list(labels)})


def annotation_labels(src: Source) -> list[str]:
    """Every label in use, sorted (the Sessions page's filter)."""
    rows = _con(src).execute(
        f"SELECT DISTINCT attributes->>'{sn.ANNOTATION_LABEL}' FROM spans WHERE name = '{sn.ANNOTATION}' "
        "ORDER BY 1").fetchall()
    return [str(r[0]) for r in rows if r[0]]


def labelled_sessions(src: Source, labels: Sequence[str]) -> pa.Table:
    """The sessions holding an annotation with one of ``labels`` (a table of ``session_id``)."""
    return _con(src).sql(
        f"SELECT DISTINCT session_id FROM spans WHERE name = '{sn.ANNOTATION}' "
        f"AND list_contains(CAST($labels AS VARCHAR[]), attributes->>'{sn.ANNOTATION_LABEL}')",
        params={"labels": _list(labels)}).to_arrow_table()


_SAVED = f"""
SELECT attributes->>'{sn.COMPARISON_ID}' AS id, attributes->>'{sn.COMPARISON_TITLE}' AS title,
       start_time_ns AS time_ns, attributes->>'{sn.COMPARISON_PARAMS}' AS params,
       attributes->>'{sn.COMPARISON_RESULTS}' AS results
FROM spans WHERE name = '{sn.COMPARISON}'
"""  # saved comparisons of stores from before they were records


def _saved_records(src: Source) -> list[dict[str, Any]]:
    """The saved comparisons stored as records (:mod:`tracer.store.records`) of the store ``src``
    reads (none for a bare connection, which has no store)."""
    from tracer.store import records

    layout = getattr(src, "layout", None)
    if layout is None:
        return []
    out = []
    for path in records.record_paths(layout.root, records.COMPARISONS, "saved-"):
        rec = records.read_record(path)
        if isinstance(rec, dict) and rec.get("kind") == "saved":
            out.append(rec)
    return out


def saved_comparisons(src: Source) -> pd.DataFrame:
    """Saved comparisons, newest first: id, title, time and parameters (JSON text)."""
    old = _df(src, f"SELECT id, title, time_ns, params FROM ({_SAVED})")
    new = pd.DataFrame([{"id": r["id"], "title": r["title"], "time_ns": r["time_ns"],
                         "params": json.dumps(r.get("params", {}))} for r in _saved_records(src)],
                       columns=["id", "title", "time_ns", "params"])
    frames = [f for f in (new, old) if not f.empty]
    both = pd.concat(frames, ignore_index=True) if frames else old
    return both.sort_values(["time_ns", "id"], ascending=[False, True], ignore_index=True)


def saved_comparison(src: Source, ident: str) -> dict[str, Any] | None:
    """One saved comparison: id, title, time_ns, ``params`` and ``results`` decoded; None when unknown."""
    for rec in _saved_records(src):
        if rec["id"] == ident:
            return {k: rec.get(k) for k in ("id", "title", "time_ns", "params", "results")}
    rows = _con(src).execute(f"SELECT * FROM ({_SAVED}) WHERE id = $id LIMIT 1", {"id": ident}).fetchall()
    if not rows:
        return None
    ident, title, time_ns, params, results = rows[0]
    return {"id": ident, "title": title, "time_ns": time_ns, "params": json.loads(params or "{}"),
            "results": json.loads(results or "{}")}
