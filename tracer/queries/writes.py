"""Annotations and saved comparisons: what a person adds to the store after the fact.

Both go through the store, so they live wherever the store does (a directory or a bucket) and need
no second database:

- an **annotation** (``prunegate.annotation``) is a label and a note on a session, a decision or a
  violation: a child span of the annotated span, in its trace and session, with no ``seq`` (it is not
  an event of the session; the catalog leaves it out of counts and activity times);
- a **saved comparison** holds a comparison's parameters and results as JSON, under an id a URL can
  carry (``/compare?saved=<id>``), so it reopens with the same numbers without re-running. It is a
  record in the sweeps' format and place (:mod:`tracer.store.records`), not a span; stores from
  before kept it as a ``prunegate.comparison`` span, which :mod:`tracer.queries.annotations` still reads.

Reading them back: :mod:`tracer.queries.annotations`.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from typing import Any, NamedTuple, Protocol

import pyarrow as pa

from tracer.contract import names as sn
from tracer.errors import AnnotationError

MAX_LABEL = 80
MAX_NOTE = 4000
KINDS_OF = {sn.SESSION: "session", sn.VIOLATION: "violation", sn.BUDGET_CHECK: "decision",
            **{name: "decision" for name in sn.DECISION_SPANS}}


class AnnotationTarget(NamedTuple):
    """The span an annotation hangs on (its trace, id and name), as its caller already read it from the
    store: the Replay page holds the session's root and its step's spans, so it passes them and a
    save reads nothing (the lookups scan every root and the session's spans)."""

    trace_id: str
    span_id: str
    name: str


class Writable(Protocol):
    """A store that takes a table of spans: :class:`~tracer.store.Store` or the bucket store."""

    def write_table(self, table: pa.Table) -> Any: ...


def _row(name: str, attributes: dict[str, Any], *, trace_id: str, parent: str | None,
         session_id: str | None) -> dict[str, Any]:
    now = time.time_ns()
    return {"trace_id": trace_id, "span_id": secrets.token_hex(8), "parent_span_id": parent, "name": name,
            "kind": "INTERNAL", "start_time_ns": now, "end_time_ns": now, "status_code": "UNSET",
            "attributes": attributes, "scope_name": sn.SCOPE, "session_id": session_id,
            "resource": {"service.name": "prunegate"}}


def _write(store: Writable, row: dict[str, Any]) -> None:
    from tracer.store.rows import rows_to_table

    store.write_table(rows_to_table([row]))


def _clean(label: str, note: str) -> tuple[str, str]:
    label, note = (label or "").strip(), (note or "").strip()
    if not label:
        raise AnnotationError("an annotation needs a label (a word or two: bug, expected, flaky, ...)")
    if "," in label:
        raise AnnotationError(f"a label cannot hold a comma ({label!r}): labels are listed comma-separated in URLs")
    if len(label) > MAX_LABEL:
        raise AnnotationError(f"the label is {len(label)} characters; at most {MAX_LABEL} (put the rest in the note)")
    if len(note) > MAX_NOTE:
        raise AnnotationError(f"the note is {len(note)} characters; at most {MAX_NOTE}")
    return label, note


def annotate(store: Any, session_id: str, *, label: str, note: str = "", span_id: str | None = None,
             author: str | None = None, target: AnnotationTarget | None = None) -> dict[str, Any]:
    """Store a label and a note on session ``session_id`` (id or name), or on one of its decision
    or violation spans (``span_id``). Returns the stored annotation (id, target, label, ...).
    Raises :class:`AnnotationError` when the session or span does not exist or is not annotatable.
    ``target``: the span, read from the store by the caller (then ``session_id`` is the session's
    id and ``span_id`` is not used): nothing is looked up."""
    label, note = _clean(label, note)
    if target is None:
        sid, target = _lookup(store, session_id, span_id)
    else:
        sid = session_id
    kind = KINDS_OF.get(target.name)
    if kind is None:
        raise AnnotationError(f"span {target.span_id} is a {target.name}: annotate a session, a decision "
                              f"({', '.join(sorted(k for k, v in KINDS_OF.items() if v == 'decision'))}) "
                              "or a violation")
    ident = secrets.token_hex(6)
    attrs = {sn.ANNOTATION_ID: ident, sn.ANNOTATION_TARGET: kind, sn.ANNOTATION_SPAN_ID: target.span_id,
             sn.ANNOTATION_LABEL: label, sn.ANNOTATION_NOTE: note, sn.SESSION_ID: sid,
             sn.ANNOTATION_AUTHOR: author or os.environ.get("USER") or ""}
    _write(store, _row(sn.ANNOTATION, attrs, trace_id=target.trace_id, parent=target.span_id, session_id=sid))
    return {"id": ident, "session_id": sid, "target": kind, "span_id": target.span_id, "label": label,
            "note": note}


def _lookup(store: Any, session_id: str, span_id: str | None) -> tuple[str, AnnotationTarget]:
    """The session's id and the span to annotate: its root, or its span ``span_id``."""
    with store.reader() as r:
        sid = _session(r, session_id)
        if span_id is None:
            rows = r.query("SELECT trace_id, span_id, name FROM spans WHERE session_id = ? AND name = ? LIMIT 1",
                           [sid, sn.SESSION])
            if not rows:
                raise AnnotationError(f"session {session_id} has no root span yet (still recording?); "
                                      "annotate one of its spans with --span")
        else:
            rows = r.query("SELECT trace_id, span_id, name FROM spans WHERE session_id = ? AND span_id = ? LIMIT 1",
                           [sid, span_id.strip().lower()])
            if not rows:
                raise AnnotationError(f"no span {span_id} in session {sid}")
    return sid, AnnotationTarget(str(rows[0]["trace_id"]), str(rows[0]["span_id"]), str(rows[0]["name"]))


def _session(r: Any, session_id: str) -> str:
    rows = r.query(f"SELECT DISTINCT session_id FROM spans WHERE name = ? AND (session_id = ? "
                   f"OR attributes->>'{sn.SESSION_NAME}' = ?) LIMIT 2", [sn.SESSION, session_id, session_id])
    if not rows:
        rows = r.query("SELECT DISTINCT session_id FROM spans WHERE session_id = ? LIMIT 1", [session_id])
    if not rows:
        raise AnnotationError(f"no session {session_id} in the store")
    if len(rows) > 1:
        raise AnnotationError(f"{session_id} names several sessions; give its id")
    return str(rows[0]["session_id"])


def save_comparison(store: Any, title: str, params: dict[str, Any], results: dict[str, Any]) -> str:
    """Store a comparison's ``params`` (what was run) and ``results`` (what came out), both plain JSON,
    as a record beside the sweeps (:mod:`tracer.store.records`, one format for both; ``store`` is a
    store or its location); returns its id (``/compare?saved=<id>`` reopens it)."""
    from tracer.store import records

    title = (title or "").strip()
    if not title:
        raise AnnotationError("a saved comparison needs a title")
    rec = {**records.stamp("saved", title[:200]), "params": json.loads(json.dumps(params, default=str)),
           "results": json.loads(json.dumps(results, default=str))}
    records.put_record(getattr(store, "path", store), records.COMPARISONS, rec["id"], rec)
    return str(rec["id"])
