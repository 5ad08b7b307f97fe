"""Conversion between spans and store rows.

Three directions, all columnar:
- ``records_to_table``: span *records* (plain tuples, ``tracer.contract.records.RECORD_FIELDS``) -> an Arrow table. Spans
  written by prunegate's own sessions on its own pipeline travel as records, not span objects
  (tracer.spans.direct): the agent's thread appends a tuple, and cleaning the attributes, encoding
  them as JSON and building the columns happen here, in bulk, once per chunk.
- ``spans_to_table``: finished SDK spans (``ReadableSpan``) -> an Arrow table in the store schema.
  The pipeline runs it once per chunk of spans (256 by default) on the thread that ended the
  chunk's last span, while the spans are still in that CPU's cache (see tracer.spans.pipeline).
- ``rows_to_table`` / ``decode_row``: plain *span rows* (dicts keyed by the store's column names,
  with ``attributes``/``events``/``links``/``resource`` as Python objects) <-> Arrow / query results.
  OTLP JSON import and the stats record use these.
"""

from __future__ import annotations

import importlib
import json
import logging
import math
import operator
import os
from collections.abc import Iterable, Mapping, Sequence
from operator import methodcaller
from types import ModuleType
from typing import Any

import pyarrow as pa

from tracer.contract.names import TEXT_REPLACED
from tracer.contract.records import E_ATTRS, E_NAME, E_TIME, R_KIND, R_LINKS, R_META, RecordMeta
from tracer.contract.settings import NO_ACCELERATOR_ENV
from tracer.store.arrow import (
    column,
    fixed_width_array,
    fixed_width_from,
    from_buffers,
    same_string,
    utf8_array,
)
from tracer.store.schema import (
    ARROW_SCHEMA,
    COLUMN_NAMES,
    JSON_COLUMNS,
    PROMOTED,
    SEQ_ATTRIBUTE,
    SESSION_ATTRIBUTES,
)
from tracer.store.text import scrub

_orjson: ModuleType | None
try:  # optional speed-up: about 5x faster than json for attribute dicts
    import orjson as _orjson
except ImportError:  # pragma: no cover - depends on the environment
    _orjson = None


ACCELERATOR_API = 2  # the shape of record_columns' result this module reads (2: span events converted in C)


def _accelerator() -> ModuleType | None:
    """The C accelerator of the record conversion (tracer/store/_columns.c, built at install when a
    C compiler is there), unless ``PRUNEGATE_NO_ACCELERATOR`` is set; None: the Python path only.
    Both give the same tables (tests/tracer/store/test_columns.py). A build older than this module
    (another ``API``) is not used: scripts/setup.sh builds it again."""
    if os.environ.get(NO_ACCELERATOR_ENV):
        return None
    try:
        module = importlib.import_module("tracer.store._columns")
    except ImportError:
        return None
    if getattr(module, "API", 1) != ACCELERATOR_API:
        log.warning("prunegate: tracer/store/_columns is an older build; converting span records in Python "
                    "until scripts/setup.sh builds it again")
        return None
    return module


log = logging.getLogger(__name__)
ACCELERATOR: ModuleType | None = _accelerator()

SpanRow = dict[str, Any]
_EMPTY_LIST = "[]"
_EMPTY_OBJ = "{}"


def _sanitize(value: Any) -> Any:
    """Make a value JSON-safe: NaN/inf -> None, tuples -> lists, unknown -> str."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if isinstance(value, Mapping):
        return {str(k): _sanitize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_sanitize(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def dumps(value: Any) -> str:
    """Compact JSON text that DuckDB's JSON type accepts (no NaN, no Infinity, no lone surrogate:
    replaced by U+FFFD, see :mod:`tracer.store.text`)."""
    return dumps_counted(value)[0]


def dumps_counted(value: Any) -> tuple[str, int]:
    """:func:`dumps`, and how many lone surrogates it replaced (0 on the usual, fast path)."""
    if _orjson is not None:
        try:
            return _orjson.dumps(value).decode(), 0
        except (TypeError, _orjson.JSONEncodeError):
            pass
    value, replaced = scrub(value)
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False, ensure_ascii=False), replaced
    except (TypeError, ValueError):
        value, more = scrub(_sanitize(value))
        return json.dumps(value, separators=(",", ":"), allow_nan=False, ensure_ascii=False), replaced + more


def attributes_json(attributes: Mapping[str, Any], replaced: int = 0) -> str:
    """A span's attributes as :func:`dumps` text; when text of the span had to be scrubbed (``replaced``
    code points elsewhere, or in the attributes themselves), the count is added as
    ``prunegate.text.replaced`` so the store says where text was changed."""
    text, n = dumps_counted(attributes)
    if not (n or replaced):
        return text
    counted = dict(scrub(dict(attributes))[0])
    counted[TEXT_REPLACED] = int(counted.get(TEXT_REPLACED) or 0) + n + replaced
    return dumps(counted)


def loads(text: str | None) -> Any:
    """Inverse of :func:`dumps` (``None`` stays ``None``)."""
    if text is None:
        return None
    if _orjson is not None:
        return _orjson.loads(text)
    return json.loads(text)


def session_of(attributes: Mapping[str, Any]) -> str | None:
    """The promoted ``session_id``: gen_ai.conversation.id, else prunegate.session.id."""
    for key in SESSION_ATTRIBUTES:
        value = attributes.get(key)
        if value is not None:
            return str(value)
    return None


def seq_of(attributes: Mapping[str, Any]) -> int | None:
    """The promoted ``seq``: prunegate.seq when it is an integer."""
    value = attributes.get(SEQ_ATTRIBUTE)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


_INT64 = range(-(2**63), 2**63)
_PYTHON_TYPE = {"VARCHAR": str, "BIGINT": int, "BOOLEAN": bool}
_NONE = type(None)


def _typed(values: list[Any], want: type) -> list[Any]:
    """``values`` with every value that is not of type ``want`` (exactly: a bool is no int) as None."""
    if values.count(None) == len(values):
        return values
    if set(map(type, values)) <= {want, _NONE}:
        if want is not int:
            return values
        present = [v for v in values if v is not None]
        if _INT64.start <= min(present) and max(present) < _INT64.stop:
            return values
    return [v if type(v) is want and (want is not int or v in _INT64) else None for v in values]


_PROMOTED_KEYS = frozenset(key for *_, key in PROMOTED)
_PROMOTED_TYPES = [typ for _, _, typ, _ in PROMOTED]
_PROMOTED_SPEC = tuple((key, {"VARCHAR": "s", "BIGINT": "i", "BOOLEAN": "b"}[sql]) for _, sql, _, key in PROMOTED)
_PROMOTED_GETTERS = [(methodcaller("get", key), _PYTHON_TYPE[sql_type]) for _, sql_type, _, key in PROMOTED]


def promoted_values(dicts: Sequence[Mapping[str, Any]]) -> list[list[Any]]:
    """The promoted columns (schema.PROMOTED) of spans with these attribute dicts, one list per column:
    the attribute when it has the column's type (str, int within int64, bool), else None. The same
    rule as ``schema.derived`` applies to segments written before the columns existed.

    On the agent's thread (tracer.spans.pipeline): most spans (messages, tool calls) carry none of
    these keys, so one C-level test per span finds the few that do before any value is read."""
    n = len(dicts)
    hits = [i for i, none in enumerate(map(_PROMOTED_KEYS.isdisjoint, dicts)) if not none]
    if len(hits) == n:
        return [_typed(list(map(get, dicts)), want) for get, want in _PROMOTED_GETTERS]
    columns: list[list[Any]] = [[None] * n for _ in PROMOTED]
    if hits:
        picked = [dicts[i] for i in hits]
        for column, (get, want) in zip(columns, _PROMOTED_GETTERS, strict=True):
            for i, v in zip(hits, _typed(list(map(get, picked)), want), strict=True):
                column[i] = v
    return columns


def _attr_dict(holder: Any) -> dict[str, Any]:
    """The attribute dict of an SDK span/event/link without copying when we can.

    The SDK keeps attributes in ``BoundedAttributes`` whose plain dict is ``_dict``; reading it
    directly saves a copy per span. Any other mapping is copied.
    """
    attrs = getattr(holder, "_attributes", None)
    if type(attrs) is dict:  # a held span event's attributes (tracer.spans.session.hold): already plain
        return attrs
    raw = getattr(attrs, "_dict", None)
    if isinstance(raw, dict):
        return raw
    attrs = holder.attributes
    return dict(attrs) if attrs else {}


def _hex_span(span_id: int) -> str:
    return f"{span_id:016x}"


def _event_dict(event: Any) -> dict[str, Any]:
    if type(event) is tuple:  # a held event (tracer.contract.records.HeldEvent)
        return {"name": event[E_NAME], "time_ns": event[E_TIME], "attributes": event[E_ATTRS]}
    return {"name": event.name, "time_ns": event.timestamp, "attributes": _attr_dict(event)}


def _events_json(events: Sequence[Any]) -> str:
    """A span's events as JSON text (what :func:`_json_list` with :func:`_event_dict` gives), reading
    a held event's items or the SDK event's slots directly: below ``full`` detail every message event is one of these, and
    the property reads were most of a chunk's conversion (docs/performance.md, round 8). The C
    accelerator writes the same text (``json_events`` in tracer/store/_columns.c, round 9)."""
    if not events:
        return _EMPTY_LIST
    try:
        return dumps([{"name": e[E_NAME], "time_ns": e[E_TIME], "attributes": e[E_ATTRS]} if type(e) is tuple else
                      {"name": e._name, "time_ns": e._timestamp,
                       "attributes": a if type(a := e._attributes) is dict else _attr_dict(e)} for e in events])
    except AttributeError:  # not the SDK's Event: its public properties
        return _json_list(events, _event_dict)


def _link_dict(link: Any) -> dict[str, Any]:
    ctx = link.context
    state = ctx.trace_state.to_header() if ctx.trace_state else None
    return {
        "trace_id": f"{ctx.trace_id:032x}",
        "span_id": _hex_span(ctx.span_id),
        "trace_state": state or None,
        "attributes": _attr_dict(link),
    }


def _json_list(items: Sequence[Any], convert: Any) -> str:
    return dumps([convert(item) for item in items]) if items else _EMPTY_LIST


_FIELDS = (
    "context", "parent", "name", "kind", "start_time", "end_time", "status",
    "attributes", "events", "links", "resource", "instrumentation_scope",
)  # fmt: skip
# The SDK's ReadableSpan keeps each property in a same-named slot with a leading underscore.
_SLOT_GETTERS = [operator.attrgetter("_" + f) for f in _FIELDS]
_PUBLIC_GETTERS = [operator.attrgetter(f) for f in _FIELDS]


def _columns(spans: Sequence[Any]) -> list[list[Any]]:
    """One list per field, read column by column with C-level ``map`` (no per-span tuples)."""
    try:
        return [list(map(get, spans)) for get in _SLOT_GETTERS]
    except AttributeError:
        return [list(map(get, spans)) for get in _PUBLIC_GETTERS]


def _plain(attrs: Any) -> dict[str, Any]:
    if type(attrs) is dict:  # a direct span's attributes (tracer.spans.direct)
        return attrs
    raw = getattr(attrs, "_dict", None)
    if isinstance(raw, dict):
        return raw
    return dict(attrs) if attrs else {}


def _seq_items(items: Any) -> Any:
    """The SDK's BoundedList keeps its items in a deque ``_dq`` (C-level truthiness)."""
    return getattr(items, "_dq", items)


def _attribute_columns(dicts: list[dict[str, Any]]) -> tuple[Any, list[Any], list[Any], list[list[Any]]]:
    """From cleaned attribute dicts: their JSON, the promoted session_id and seq, the schema's
    other promoted columns."""
    k1, k2 = SESSION_ATTRIBUTES
    sessions = [
        a if a is not None else b
        for a, b in zip(map(methodcaller("get", k1), dicts), map(methodcaller("get", k2), dicts), strict=True)
    ]
    if not all(v is None or type(v) is str for v in sessions):
        sessions = [v if v is None or type(v) is str else str(v) for v in sessions]
    seqs = [v if type(v) is int else None for v in map(methodcaller("get", SEQ_ATTRIBUTE), dicts)]
    return _attributes_json(dicts), sessions, seqs, promoted_values(dicts)


def spans_to_table(spans: Sequence[Any]) -> pa.Table:
    """Finished SDK spans -> one Arrow table in :data:`ARROW_SCHEMA`.

    Column-at-a-time with C-level ``map`` where possible: it runs on the agent's thread once per
    chunk (about 3.5 us per span), so it avoids per-span Python calls and per-span container
    objects wherever it can, and builds Arrow buffers directly (see tracer.store.arrow).
    """
    if not spans:
        return empty_table()
    ctx, parent, name, kind, start, end, status, attrs, events, links, resource, scope = _columns(spans)
    n = len(ctx)
    # %-formatting is several times faster than str.format/f-strings for this (measured).
    trace_ids = ["%032x" % t for t in map(_TRACE_ID, ctx)]  # noqa: UP031
    span_ids = ["%016x" % t for t in map(_SPAN_ID, ctx)]  # noqa: UP031
    parents = [None if p is None else "%016x" % p.span_id for p in parent]  # noqa: UP031
    states = _trace_states(ctx)
    kind_names = member_names(kind[0])
    kinds = [
        k if k is not None else kd.name
        for k, kd in zip(map(kind_names.get, map(id, kind)), kind, strict=True)
    ]
    code_objs = list(map(_STATUS_CODE, status))
    code_names = member_names(code_objs[0])
    codes = [
        c if c is not None else o.name
        for c, o in zip(map(code_names.get, map(id, code_objs)), code_objs, strict=True)
    ]
    messages = list(map(_DESCRIPTION, status))
    dicts = list(map(_plain, attrs))
    attrs_json, sessions, seqs, promoted = _attribute_columns(dicts)
    events_json = _json_lists(list(map(_seq_items, events)), _event_dict)
    links_json = _json_lists(list(map(_seq_items, links)), _link_dict)
    res_col = _same_or_each(resource, n, _resource_json)
    scope_names = _same_or_each(scope, n, lambda sc: sc.name if sc is not None else None)
    scope_versions = _same_or_each(scope, n, lambda sc: sc.version if sc is not None else None)
    columns = (
        trace_ids, span_ids, parents, states, name, kinds, start, end, codes, messages,
        attrs_json, events_json, links_json, res_col, scope_names, scope_versions, sessions, seqs, *promoted,
    )  # fmt: skip
    arrays = [
        _array(col, field.type, n, nullable)
        for col, field, nullable in zip(columns, ARROW_SCHEMA, _NULLABLE_FROM_SDK, strict=True)
    ]
    return pa.Table.from_arrays(arrays, schema=ARROW_SCHEMA)


# Columns an SDK span can leave empty; the others are always set (no null check needed).
_NULLABLE_FROM_SDK = tuple(
    name
    in (
        "parent_span_id",
        "trace_state",
        "status_message",
        "scope_name",
        "scope_version",
        "session_id",
        "seq",
        *(p[0] for p in PROMOTED),
        "start_time_ns",
        "end_time_ns",
        "name",
    )
    for name in COLUMN_NAMES
)


class _Utf8:
    """A column already encoded: UTF-8 bytes back to back, and where each value ends."""

    __slots__ = ("data", "ends")

    def __init__(self, data: bytearray, ends: list[int]) -> None:
        self.data = data
        self.ends = ends


def _attributes_json(dicts: list[dict[str, Any]]) -> Any:
    """Attribute dicts -> JSON, straight from orjson into one buffer when it can do them all.

    Each orjson result is appended and dropped at once: keeping hundreds of them alive as
    separate bytes objects costs several times more (measured: ~1.5 us vs ~0.2 us per span).
    """
    if _orjson is not None:
        try:
            data, ends = bytearray(), list[int]()
            dump, end = _orjson.dumps, ends.append
            for d in dicts:
                data += dump(d) if d else b"{}"
                end(len(data))
            return _Utf8(data, ends)
        except (TypeError, _orjson.JSONEncodeError):
            pass
    return [attributes_json(d) if d else _EMPTY_OBJ for d in dicts]


class _Same:
    """A column whose every value is ``value`` (built by Arrow in C, not from a Python list)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _array(col: Any, typ: pa.DataType, n: int, nullable: bool) -> pa.Array:
    if isinstance(col, _Same):
        return same_string(col.value, n)
    if isinstance(col, _Utf8):
        return utf8_array(col.data, col.ends)
    if isinstance(col, _Fixed):
        return fixed_width_array(col.values, col.width)
    return column(col, typ, nullable=nullable)


def _json_lists(items: list[Any], convert: Any) -> Any:
    """Events or links as JSON text per span; usually every span has none."""
    if not any(items):
        return _Same(_EMPTY_LIST)
    if convert is _event_dict:
        return [_events_json(e) if e else _EMPTY_LIST for e in items]
    return [_json_list(e, convert) if e else _EMPTY_LIST for e in items]


def _trace_states(ctx: list[Any]) -> list[str | None]:
    """W3C tracestate headers; almost always empty, so test the SDK's inner dict in C first."""
    try:
        inner = list(map(_TRACE_STATE_DICT, ctx))
    except AttributeError:
        return [(c.trace_state.to_header() or None) if c.trace_state else None for c in ctx]
    if not any(inner):
        return [None] * len(ctx)
    return [(c.trace_state.to_header() or None) if d else None for c, d in zip(ctx, inner, strict=True)]


def _resource_json(resource: Any) -> str:
    return dumps(dict(resource.attributes)) if resource is not None else _EMPTY_OBJ


def _same_or_each(objs: list[Any], n: int, convert: Any) -> Any:
    """``convert`` applied per element, once when every element is the same object (the usual)."""
    first = objs[0]
    if len(set(map(id, objs))) == 1:
        return _Same(convert(first))
    cache: dict[int, Any] = {}
    out = []
    for o in objs:
        key = id(o)
        if key not in cache:
            cache[key] = convert(o)
        out.append(cache[key])
    return out


_TRACE_STATE_DICT = operator.attrgetter("trace_state._dict")
_STATUS_CODE = operator.attrgetter("status_code")
_TRACE_ID = operator.attrgetter("trace_id")
_SPAN_ID = operator.attrgetter("span_id")
_DESCRIPTION = operator.attrgetter("description")
_MEMBER_NAMES: dict[type, dict[int, str]] = {}


def member_names(member: Any) -> dict[int, str]:
    """``{id(m): m.name}`` for every member of ``member``'s enum (OTel's SpanKind, StatusCode), made
    once per enum: Enum.name is a Python-level descriptor, and looking members up by id() keeps it in
    C. Taken from a value rather than imported, so the store needs no OpenTelemetry import."""
    cls = type(member)
    names = _MEMBER_NAMES.get(cls)
    if names is None:
        names = _MEMBER_NAMES[cls] = {id(m): m.name for m in cls}
    return names


def kind_pairs(kind: Any) -> tuple[tuple[Any, str], ...]:
    """``(member, name)`` for every member of ``kind``'s enum: what the C accelerator matches kinds with."""
    pairs = _KIND_PAIRS.get(type(kind))
    if pairs is None:
        pairs = _KIND_PAIRS[type(kind)] = tuple((k, k.name) for k in type(kind))
    return pairs


_KIND_PAIRS: dict[type, tuple[tuple[Any, str], ...]] = {}


# ------------------------------------------------------------------------------ span records
# (the record layout: tracer.contract.records; the cleaning rule comes with each record's meta)
def records_to_table(records: Sequence[Any]) -> pa.Table:
    """Span records (and any SDK ``ReadableSpan`` among them) -> one Arrow table in the store schema."""
    spans = [r for r in records if type(r) is not tuple]
    if spans:
        recs = [r for r in records if type(r) is tuple]
        tables = [spans_to_table(spans)] + ([_records_table(recs)] if recs else [])
        return tables[0] if len(tables) == 1 else pa.concat_tables(tables)
    return _records_table(records) if records else empty_table()


def _records_table(recs: Sequence[tuple]) -> pa.Table:
    table = _accelerated_table(recs)
    if table is not None:
        return table
    n = len(recs)
    name, span, parent, kind, attrs, clean, start, end, status, links, events, ctx, meta = map(list, zip(*recs, strict=True))
    per_ctx: dict[int, tuple[str, str | None]] = {}
    for c in ctx:  # one root context per session: format its trace id and state once
        if id(c) not in per_ctx:
            per_ctx[id(c)] = _context_of(c)
    tids = [per_ctx[i] for i in map(id, ctx)]
    trace_ids = [t[0] for t in tids]
    states = [t[1] for t in tids]
    span_ids = ["%016x" % s for s in span]  # noqa: UP031
    parents = [None if p is None else "%016x" % p for p in parent]  # noqa: UP031
    kind_names = member_names(kind[0])
    kinds = [k if k is not None else kd.name for k, kd in zip(map(kind_names.get, map(id, kind)), kind, strict=True)]
    per_status: dict[int, tuple[str, str | None]] = {}
    for st in status:  # a few Status objects (mostly the one UNSET): read their properties once each
        if id(st) not in per_status:
            per_status[id(st)] = _status_of(st)
    if len(per_status) == 1:
        code, message = next(iter(per_status.values()))
        codes: Any = _Same(code)
        messages: Any = _Same(message)
    else:
        pairs = [per_status[i] for i in map(id, status)]
        codes, messages = [p[0] for p in pairs], [p[1] for p in pairs]
    dicts = attrs if all(clean) else _cleaned(attrs, clean, meta)
    attrs_json, sessions, seqs, promoted = _attribute_columns(dicts)
    events_json = _json_lists(events, _event_dict)
    links_json = _json_lists(links, _link_dict)
    res_col = _same_or_each([m.resource for m in meta], n, _resource_json)
    scopes = [m.scope for m in meta]
    scope_names = _same_or_each(scopes, n, lambda sc: sc.name if sc is not None else None)
    scope_versions = _same_or_each(scopes, n, lambda sc: sc.version if sc is not None else None)
    columns = (
        _Fixed(trace_ids, 32), _Fixed(span_ids, 16), _Fixed(parents, 16), states, name, kinds, start, end, codes,
        messages, attrs_json, events_json, links_json, res_col, scope_names, scope_versions, sessions, seqs,
        *promoted,
    )  # fmt: skip
    arrays = [
        _array(col, field.type, n, nullable)
        for col, field, nullable in zip(columns, ARROW_SCHEMA, _NULLABLE_FROM_SDK, strict=True)
    ]
    return pa.Table.from_arrays(arrays, schema=ARROW_SCHEMA)


_accelerator_failed = False


def _context_of(ctx: Any) -> tuple[str, str | None]:
    """A root span context's trace id as 32 hex digits and its W3C tracestate header (None when empty)."""
    state = ctx.trace_state.to_header() if ctx.trace_state else None
    return "%032x" % ctx.trace_id, state or None  # noqa: UP031


def _status_of(status: Any) -> tuple[str, str | None]:
    return status.status_code.name, status.description


def _accelerated_table(recs: Sequence[tuple]) -> pa.Table | None:
    """The chunk's table built by the C accelerator from the records themselves; None when it is not
    there or leaves the chunk to the Python path (records of several providers, an odd value...)."""
    global _accelerator_failed
    if ACCELERATOR is None or _orjson is None or type(recs) is not list:
        return None
    try:
        got = ACCELERATOR.record_columns(recs, kind_pairs(recs[0][R_KIND]), SESSION_ATTRIBUTES, SEQ_ATTRIBUTE, _PROMOTED_SPEC,
                                         _orjson.dumps, _context_of, _status_of)
    except Exception as exc:  # noqa: BLE001 - a fault there costs speed, never spans: Python takes the chunk
        if not _accelerator_failed:
            _accelerator_failed = True
            log.warning("prunegate: the C accelerator failed (%r); converting span records in Python", exc)
        return None
    if got is None:
        return None
    trace_ids, span_ids, parents, states, names, kinds, starts, ends, codes, messages, events, attributes, links = got
    n = len(recs)
    string = pa.string()
    (data, offsets), sessions, seqs, promoted = attributes
    meta = recs[0][R_META]
    scope = meta.scope
    events_json = from_buffers(string, n, events)
    if links:
        links_json = _array(_json_lists([r[R_LINKS] for r in recs], _link_dict), string, n, False)
    else:
        links_json = same_string(_EMPTY_LIST, n)
    arrays = [
        fixed_width_from(trace_ids, 32, n), fixed_width_from(span_ids, 16, n), fixed_width_from(parents, 16, n),
        from_buffers(string, n, states), from_buffers(string, n, names), from_buffers(string, n, kinds),
        from_buffers(pa.int64(), n, starts), from_buffers(pa.int64(), n, ends), from_buffers(string, n, codes),
        from_buffers(string, n, messages), from_buffers(string, n, (None, 0, offsets, data)), events_json, links_json,
        same_string(_resource_json(meta.resource), n),
        same_string(scope.name if scope is not None else None, n),
        same_string(scope.version if scope is not None else None, n),
        from_buffers(string, n, sessions), from_buffers(pa.int64(), n, seqs),
        *(from_buffers(typ, n, col) for typ, col in zip(_PROMOTED_TYPES, promoted, strict=True)),
    ]  # fmt: skip
    return pa.Table.from_arrays(arrays, schema=ARROW_SCHEMA)


def _cleaned(attrs: list[Any], clean: list[bool], meta: list[RecordMeta]) -> list[Any]:
    """The records' attribute dicts, those not clean yet cleaned by their writer's rule
    (``meta.clean_chunk``, the SDK's; a clean dict stays as it is: ``set_attribute`` may have kept
    a list of ints the cleaning rule would turn into strings)."""
    todo = [i for i, c in enumerate(clean) if not c]
    clean_chunk = meta[todo[0]].clean_chunk  # one rule for every writer (tracer.spans.records)
    if len(todo) == len(attrs):
        return clean_chunk(attrs)
    out = list(attrs)
    for i, d in zip(todo, clean_chunk([attrs[i] for i in todo]), strict=True):
        out[i] = d
    return out


class _Fixed:
    """A column of ASCII strings of one width (hex ids), or None."""

    __slots__ = ("values", "width")

    def __init__(self, values: list[Any], width: int) -> None:
        self.values = values
        self.width = width


def empty_table() -> pa.Table:
    """A table with the store's columns and no rows."""
    return pa.Table.from_arrays([pa.nulls(0, f.type) for f in ARROW_SCHEMA], schema=ARROW_SCHEMA)


def complete_row(row: Mapping[str, Any]) -> SpanRow:
    """Fill the defaults and the promoted columns of a span row (a copy; the input is not changed).
    The schema.PROMOTED columns always come from the attributes (one source of truth)."""
    out: SpanRow = {name: row.get(name) for name in COLUMN_NAMES}
    attrs = out["attributes"] or {}
    out["attributes"] = attrs
    out["events"] = out["events"] or []
    out["links"] = out["links"] or []
    out["resource"] = out["resource"] or {}
    out["kind"] = out["kind"] or "INTERNAL"
    out["status_code"] = out["status_code"] or "UNSET"
    if out["session_id"] is None:
        out["session_id"] = session_of(attrs)
    if out["seq"] is None:
        out["seq"] = seq_of(attrs)
    for (name, *_), (value,) in zip(PROMOTED, promoted_values([attrs]), strict=True):
        out[name] = value
    return out


def rows_to_table(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Span rows (decoded form) -> an Arrow table in :data:`ARROW_SCHEMA`. Text that is not valid
    Unicode (lone surrogates) is replaced and counted on the span (:func:`attributes_json`)."""
    columns: dict[str, list[Any]] = {name: [] for name in COLUMN_NAMES}
    for row in rows:
        full = complete_row(row)
        replaced = 0
        for name in COLUMN_NAMES:
            value = full[name]
            if name in JSON_COLUMNS and name != "attributes":
                value, n = dumps_counted(value)
                replaced += n
            elif isinstance(value, str):
                value, n = scrub(value)
                replaced += n
            columns[name].append(value)
        columns["attributes"][-1] = attributes_json(full["attributes"], replaced)
    arrays = [column(columns[f.name], f.type) for f in ARROW_SCHEMA]
    return pa.Table.from_arrays(arrays, schema=ARROW_SCHEMA)


def decode_row(row: Mapping[str, Any]) -> SpanRow:
    """A query result row with JSON text columns -> the decoded span row form."""
    out = dict(row)
    for name in JSON_COLUMNS:
        if name in out and isinstance(out[name], str):
            out[name] = loads(out[name])
    return out
