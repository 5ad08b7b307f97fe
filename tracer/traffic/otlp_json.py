"""OTLP JSON files <-> span rows.

The format is what the OpenTelemetry Collector's file exporter writes: one
``{"resourceSpans": [...]}`` object (an ExportTraceServiceRequest) per line; trace and span ids
as hex strings; times as (string) integer nanoseconds; enums as integers (names are accepted too);
attribute values as AnyValue objects (``{"stringValue": ...}``, ``{"intValue": "42"}``, ...).
A file holding a single pretty-printed request is accepted as well, and so is the file exporter's
compressed or framed output (:mod:`tracer.traffic.collector_files`).

- :func:`read_otlp_json` yields span rows (the decoded row form of :mod:`tracer.store.rows`);
  bad input raises :class:`OtlpJsonError` naming the file, the line and the span.
- :func:`write_otlp_json` writes span rows back as OTLP JSON lines (round trips are tested).
- :func:`import_otlp_json` reads a file into a store, all or nothing, skipping spans the store
  (or the file) already has.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from tracer.errors import CollectorFileError, OtlpJsonError
from tracer.store.rows import SpanRow, complete_row, dumps, rows_to_table
from tracer.traffic.collector_files import is_binary_otlp, requests

KINDS = ("INTERNAL", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER")  # index = OTLP enum
STATUS_CODES = ("UNSET", "OK", "ERROR")


class _Bad(Exception):
    """Internal: a problem at a JSON path, turned into OtlpJsonError with file and line."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(message)
        self.where = where
        self.message = message


# -- reading --------------------------------------------------------------------------------------
def _get(obj: Mapping[str, Any], camel: str, default: Any = None) -> Any:
    """Field by its OTLP JSON (lowerCamelCase) name, or its proto (snake_case) name."""
    if camel in obj:
        return obj[camel]
    snake = "".join("_" + c.lower() if c.isupper() else c for c in camel)
    return obj.get(snake, default)


def _id(value: Any, nbytes: int, where: str, *, required: bool = True) -> str | None:
    """A trace/span id: hex (the OTLP JSON rule) or base64 (protobuf JSON), as lowercase hex."""
    if value in (None, ""):
        _missing(where, required)
        return None
    if not isinstance(value, str):
        raise _Bad(where, f"id must be a string, got {type(value).__name__}")
    raw: bytes | None = None
    if len(value) == 2 * nbytes:
        try:
            raw = bytes.fromhex(value)
        except ValueError:
            raw = None
    if raw is None:
        try:
            decoded = base64.b64decode(value, validate=True)
            raw = decoded if len(decoded) == nbytes else None
        except (binascii.Error, ValueError):
            raw = None
    if raw is None:
        raise _Bad(where, f"{value!r} is not a {2 * nbytes}-hex-digit id")
    return _id_hex(raw, where, required)


def _missing(where: str, required: bool) -> None:
    """An absent id: an error when it is required, else None."""
    if required:
        raise _Bad(where, "missing id")


def _id_hex(raw: bytes, where: str, required: bool) -> str | None:
    """The id's bytes as lowercase hex; all zeros is an invalid id (None when it may be absent)."""
    if not any(raw):
        if required:
            raise _Bad(where, "id is all zeros (invalid)")
        return None
    return raw.hex()


_NANOS = range(0, 2**63)  # what the store's BIGINT time columns hold


def _nanos(value: Any, where: str, *, required: bool = True) -> int | None:
    """A time in Unix nanoseconds: an integer the store can hold, else refused naming ``where``."""
    n = _int(value, where, required=required)
    if n is not None and n not in _NANOS:
        raise _Bad(where, f"{n} is out of range (Unix nanoseconds from 0 to 2^63-1)")
    return n


def _int(value: Any, where: str, *, required: bool = True) -> int | None:
    if value is None or value == "":
        if required:
            raise _Bad(where, "missing")
        return None
    if isinstance(value, bool):
        raise _Bad(where, f"expected an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    raise _Bad(where, f"expected an integer (or a string of one), got {value!r}")


def _enum(value: Any, names: tuple[str, ...], prefix: str, where: str) -> str:
    if value is None:
        return names[0]
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(names):
        return names[value]
    if isinstance(value, str):
        name = value.upper().removeprefix(prefix)
        if name == "UNSPECIFIED" and names is KINDS:
            return "INTERNAL"
        if name in names:
            return name
    raise _Bad(where, f"unknown value {value!r}")


def any_value(value: Any, where: str) -> Any:
    """An OTLP AnyValue object -> a plain Python value (bytes stay base64 text)."""
    if not isinstance(value, Mapping):
        raise _Bad(where, f"AnyValue must be an object, got {type(value).__name__}")
    if not value:
        return None
    if len(value) != 1:
        raise _Bad(where, f"AnyValue must have exactly one field, got {sorted(value)}")
    kind, inner = next(iter(value.items()))
    if kind in ("stringValue", "string_value"):
        if not isinstance(inner, str):
            raise _Bad(where, "stringValue must be a string")
        return inner
    if kind in ("boolValue", "bool_value"):
        if not isinstance(inner, bool):
            raise _Bad(where, "boolValue must be true or false")
        return inner
    if kind in ("intValue", "int_value"):
        return _int(inner, where)
    if kind in ("doubleValue", "double_value"):
        if isinstance(inner, (int, float)) and not isinstance(inner, bool):
            return float(inner)
        if isinstance(inner, str):
            try:
                return float(inner)  # "NaN", "Infinity", "-Infinity", or a number in a string
            except ValueError:
                pass
        raise _Bad(where, f"doubleValue must be a number, got {inner!r}")
    if kind in ("bytesValue", "bytes_value"):
        if not isinstance(inner, str):
            raise _Bad(where, "bytesValue must be a base64 string")
        return inner
    if kind in ("arrayValue", "array_value"):
        values = _get(inner, "values", []) if isinstance(inner, Mapping) else None
        if not isinstance(values, list):
            raise _Bad(where, 'arrayValue must be {"values": [...]}')
        return [any_value(v, f"{where}[{i}]") for i, v in enumerate(values)]
    if kind in ("kvlistValue", "kvlist_value"):
        values = _get(inner, "values", []) if isinstance(inner, Mapping) else None
        if not isinstance(values, list):
            raise _Bad(where, 'kvlistValue must be {"values": [...]}')
        return _attributes(values, where)
    raise _Bad(where, f"unknown AnyValue field {kind!r}")


def _attributes(items: Any, where: str) -> dict[str, Any]:
    if items is None:
        return {}
    if not isinstance(items, list):
        raise _Bad(where, "attributes must be a list of {key, value}")
    out: dict[str, Any] = {}
    for i, item in enumerate(items):
        if not isinstance(item, Mapping) or not isinstance(item.get("key"), str):
            raise _Bad(f"{where}[{i}]", "attribute needs a string 'key'")
        out[item["key"]] = any_value(item.get("value") or {}, f"{where}[{i}] ({item['key']})")
    return out


def _list(obj: Mapping[str, Any], camel: str, where: str) -> list[Any]:
    value = _get(obj, camel, [])
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Bad(f"{where}.{camel}", "must be a list")
    return value


def _span_row(span: Any, resource: dict[str, Any], scope: Mapping[str, Any], where: str) -> SpanRow:
    if not isinstance(span, Mapping):
        raise _Bad(where, "span must be an object")
    name = span.get("name", "")
    if not isinstance(name, str):
        raise _Bad(f"{where}.name", "must be a string")
    status = span.get("status") or {}
    events = []
    for i, ev in enumerate(_list(span, "events", where)):
        w = f"{where}.events[{i}]"
        if not isinstance(ev, Mapping):
            raise _Bad(w, "event must be an object")
        events.append(
            {
                "name": ev.get("name", ""),
                "time_ns": _nanos(_get(ev, "timeUnixNano"), f"{w}.timeUnixNano"),
                "attributes": _attributes(ev.get("attributes"), f"{w}.attributes"),
            }
        )
    links = []
    for i, lk in enumerate(_list(span, "links", where)):
        w = f"{where}.links[{i}]"
        if not isinstance(lk, Mapping):
            raise _Bad(w, "link must be an object")
        links.append(
            {
                "trace_id": _id(_get(lk, "traceId"), 16, f"{w}.traceId"),
                "span_id": _id(_get(lk, "spanId"), 8, f"{w}.spanId"),
                "trace_state": _get(lk, "traceState") or None,
                "attributes": _attributes(lk.get("attributes"), f"{w}.attributes"),
            }
        )
    start = _nanos(_get(span, "startTimeUnixNano"), f"{where}.startTimeUnixNano")
    end = _nanos(_get(span, "endTimeUnixNano"), f"{where}.endTimeUnixNano")
    return complete_row(
        {
            "trace_id": _id(_get(span, "traceId"), 16, f"{where}.traceId"),
            "span_id": _id(_get(span, "spanId"), 8, f"{where}.spanId"),
            "parent_span_id": _id(_get(span, "parentSpanId"), 8, f"{where}.parentSpanId", required=False),
            "trace_state": _get(span, "traceState") or None,
            "name": name,
            "kind": _enum(span.get("kind"), KINDS, "SPAN_KIND_", f"{where}.kind"),
            "start_time_ns": start,
            "end_time_ns": end,
            "status_code": _enum(status.get("code"), STATUS_CODES, "STATUS_CODE_", f"{where}.status.code"),
            "status_message": status.get("message") or None,
            "attributes": _attributes(span.get("attributes"), f"{where}.attributes"),
            "events": events,
            "links": links,
            "resource": resource,
            "scope_name": scope.get("name") or None,
            "scope_version": scope.get("version") or None,
        }
    )


def rows_from_request(request: Any) -> Iterator[SpanRow]:
    """Span rows of one ExportTraceServiceRequest object (raises ``_Bad`` with a JSON path)."""
    if not isinstance(request, Mapping):
        raise _Bad("", f"expected an object with resourceSpans, got {type(request).__name__}")
    if "resourceSpans" not in request and "resource_spans" not in request:
        if "resourceLogs" in request or "resource_logs" in request:
            return  # a line of log records (GenAI events): read by read_otlp_logs
        raise _Bad("", f"no resourceSpans key (keys: {sorted(request)[:5]})")
    for r, rs in enumerate(_list(request, "resourceSpans", "")):
        w = f"resourceSpans[{r}]"
        if not isinstance(rs, Mapping):
            raise _Bad(w, "must be an object")
        resource = _attributes((rs.get("resource") or {}).get("attributes"), f"{w}.resource.attributes")
        for s, ss in enumerate(_list(rs, "scopeSpans", w)):
            ws = f"{w}.scopeSpans[{s}]"
            if not isinstance(ss, Mapping):
                raise _Bad(ws, "must be an object")
            scope = ss.get("scope") or {}
            for k, span in enumerate(_list(ss, "spans", ws)):
                yield _span_row(span, resource, scope, f"{ws}.spans[{k}]")


def rows_from_protobuf(request: Any) -> Iterator[SpanRow]:
    """Span rows of a parsed protobuf ExportTraceServiceRequest, read field by field: the rows
    :func:`rows_from_request` gives for ``MessageToDict`` of it (the same refusals, ``_Bad`` with the
    same path), without building the JSON form first (that and reading it back took two thirds of
    ``serve``'s time on GenAI spans)."""
    for r, rs in enumerate(request.resource_spans):
        w = f"resourceSpans[{r}]"
        resource = _pb_attributes(rs.resource.attributes, f"{w}.resource.attributes")
        for s, ss in enumerate(rs.scope_spans):
            ws = f"{w}.scopeSpans[{s}]"
            scope = {"name": ss.scope.name, "version": ss.scope.version}
            for k, span in enumerate(ss.spans):
                yield _pb_span_row(span, resource, scope, f"{ws}.spans[{k}]")


def _pb_id(raw: bytes, nbytes: int, where: str, *, required: bool = True) -> str | None:
    if not raw:
        _missing(where, required)
        return None
    if len(raw) != nbytes:
        raise _Bad(where, f"{base64.b64encode(raw).decode()!r} is not a {2 * nbytes}-hex-digit id")
    return _id_hex(raw, where, required)


def _pb_time(value: int, where: str) -> int:
    if not value:  # omitted by the JSON mapping, so missing there too
        raise _Bad(where, "missing")
    return _nanos(int(value), where) or 0


def _pb_value(value: Any, where: str) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "int_value":
        return int(value.int_value)
    if kind == "double_value":
        return float(value.double_value)
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    if kind == "array_value":
        return [_pb_value(v, f"{where}[{i}]") for i, v in enumerate(value.array_value.values)]
    return _pb_attributes(value.kvlist_value.values, where)


def _pb_attributes(items: Any, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, item in enumerate(items):
        out[item.key] = _pb_value(item.value, f"{where}[{i}] ({item.key})")
    return out


def _pb_span_row(span: Any, resource: dict[str, Any], scope: Mapping[str, Any], where: str) -> SpanRow:
    events = [{"name": ev.name, "time_ns": _pb_time(ev.time_unix_nano, f"{where}.events[{i}].timeUnixNano"),
               "attributes": _pb_attributes(ev.attributes, f"{where}.events[{i}].attributes")}
              for i, ev in enumerate(span.events)]
    links = [{"trace_id": _pb_id(lk.trace_id, 16, f"{where}.links[{i}].traceId"),
              "span_id": _pb_id(lk.span_id, 8, f"{where}.links[{i}].spanId"),
              "trace_state": lk.trace_state or None,
              "attributes": _pb_attributes(lk.attributes, f"{where}.links[{i}].attributes")}
             for i, lk in enumerate(span.links)]
    kind = span.kind
    if not 0 <= kind < len(KINDS):
        raise _Bad(f"{where}.kind", f"unknown value {kind!r}")
    code = span.status.code
    if not 0 <= code < len(STATUS_CODES):
        raise _Bad(f"{where}.status.code", f"unknown value {code!r}")
    return complete_row(
        {
            "trace_id": _pb_id(span.trace_id, 16, f"{where}.traceId"),
            "span_id": _pb_id(span.span_id, 8, f"{where}.spanId"),
            "parent_span_id": _pb_id(span.parent_span_id, 8, f"{where}.parentSpanId", required=False),
            "trace_state": span.trace_state or None,
            "name": span.name,
            "kind": KINDS[kind],
            "start_time_ns": _pb_time(span.start_time_unix_nano, f"{where}.startTimeUnixNano"),
            "end_time_ns": _pb_time(span.end_time_unix_nano, f"{where}.endTimeUnixNano"),
            "status_code": STATUS_CODES[code],
            "status_message": span.status.message or None,
            "attributes": _pb_attributes(span.attributes, f"{where}.attributes"),
            "events": events,
            "links": links,
            "resource": resource,
            "scope_name": scope.get("name") or None,
            "scope_version": scope.get("version") or None,
        }
    )


def log_records_from_request(request: Any) -> Iterator[dict[str, Any]]:
    """Log records of one ExportLogsServiceRequest object: ``{"trace_id", "span_id", "event_name",
    "time_ns", "attributes", "body"}`` (raises ``_Bad`` with a JSON path)."""
    if not isinstance(request, Mapping):
        return
    for r, rl in enumerate(_list(request, "resourceLogs", "")):
        w = f"resourceLogs[{r}]"
        if not isinstance(rl, Mapping):
            raise _Bad(w, "must be an object")
        for s, sl in enumerate(_list(rl, "scopeLogs", w)):
            ws = f"{w}.scopeLogs[{s}]"
            if not isinstance(sl, Mapping):
                raise _Bad(ws, "must be an object")
            for k, rec in enumerate(_list(sl, "logRecords", ws)):
                wr = f"{ws}.logRecords[{k}]"
                if not isinstance(rec, Mapping):
                    raise _Bad(wr, "log record must be an object")
                attrs = _attributes(rec.get("attributes"), f"{wr}.attributes")
                body = rec.get("body")
                yield {
                    "trace_id": _id(_get(rec, "traceId"), 16, f"{wr}.traceId", required=False),
                    "span_id": _id(_get(rec, "spanId"), 8, f"{wr}.spanId", required=False),
                    "event_name": _get(rec, "eventName") or attrs.get("event.name") or None,
                    "time_ns": _nanos(_get(rec, "timeUnixNano"), f"{wr}.timeUnixNano", required=False),
                    "attributes": attrs,
                    "body": any_value(body, f"{wr}.body") if isinstance(body, Mapping) else None,
                }


def read_otlp_logs(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Log records (GenAI events) of an OTLP JSON file's ``resourceLogs`` requests, in file order.

    Raises :class:`OtlpJsonError`; call after :func:`read_otlp_json` has accepted the file."""
    path = Path(path)
    with open(path, "rb") as raw:
        head = raw.read(8)
        size = os.fstat(raw.fileno()).st_size
    if is_binary_otlp(head, size):  # a Collector file exporter's compressed or framed output
        try:
            for record, request in requests(path):
                try:
                    yield from log_records_from_request(request)
                except _Bad as bad:
                    raise OtlpJsonError(path, record, bad.where, bad.message) from None
        except CollectorFileError as exc:
            raise OtlpJsonError(path, exc.record, "", str(exc)) from None
        return
    whole = _whole_file(path)
    if whole is not None:
        numbered: Iterable[tuple[int, str]] = [(1, "")]
    else:
        numbered = enumerate(path.read_text(encoding="utf-8").split("\n"), 1)
    for lineno, text in numbered:
        if whole is None and ("resourceLogs" not in text and "resource_logs" not in text):
            continue
        try:
            request = whole if whole is not None else json.loads(text)
            yield from log_records_from_request(request)
        except json.JSONDecodeError as exc:
            raise OtlpJsonError(path, lineno, "", f"invalid JSON: {exc.msg} (column {exc.colno})") from None
        except _Bad as bad:
            raise OtlpJsonError(path, lineno, bad.where, bad.message) from None


def read_otlp_json(path: str | os.PathLike[str]) -> Iterator[SpanRow]:
    """Span rows from an OTLP JSON file, in file order. Raises :class:`OtlpJsonError`."""
    path = Path(path)
    try:
        handle = open(path, encoding="utf-8")
        with open(path, "rb") as raw:
            head = raw.read(8)
            size = os.fstat(raw.fileno()).st_size
    except OSError as exc:
        raise OtlpJsonError(path, 0, "", f"cannot open: {exc.strerror or exc}") from exc
    if is_binary_otlp(head, size):  # a Collector file exporter's compressed or framed output
        handle.close()
        yield from _collector_rows(path)
        return
    with handle:
        for lineno, text in enumerate(handle, 1):
            if not text.strip():
                continue
            try:
                request = json.loads(text)
            except json.JSONDecodeError as exc:
                if lineno == 1:
                    whole = _whole_file(path)
                    if whole is not None:
                        yield from _rows(path, 1, whole)
                        return
                raise OtlpJsonError(
                    path, lineno, "", f"invalid JSON: {exc.msg} (column {exc.colno})"
                ) from None
            except UnicodeDecodeError as exc:
                raise OtlpJsonError(path, lineno, "", f"not UTF-8 text: {exc.reason}") from None
            yield from _rows(path, lineno, request)


def _collector_rows(path: Path) -> Iterator[SpanRow]:
    try:
        for record, request in requests(path):
            yield from _rows(path, record, request)
    except CollectorFileError as exc:
        raise OtlpJsonError(path, exc.record, "", str(exc)) from None
    except OSError as exc:
        raise OtlpJsonError(path, 0, "", f"cannot read: {exc.strerror or exc}") from exc


def _whole_file(path: Path) -> Any:
    """A file holding one pretty-printed request, or None."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, OSError):
        return None
    return value if isinstance(value, Mapping) else None


def _rows(path: Path, lineno: int, request: Any) -> Iterator[SpanRow]:
    try:
        yield from rows_from_request(request)
    except _Bad as bad:
        raise OtlpJsonError(path, lineno, bad.where, bad.message) from None


# -- writing --------------------------------------------------------------------------------------
def to_any_value(value: Any) -> dict[str, Any]:
    """A plain Python value -> an OTLP AnyValue object."""
    if value is None:
        return {}
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        if math.isfinite(value):
            return {"doubleValue": value}
        return {"doubleValue": "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, Mapping):
        return {"kvlistValue": {"values": _kv(value)}}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [to_any_value(v) for v in value]}}
    return {"stringValue": str(value)}


def _kv(attributes: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    return [{"key": k, "value": to_any_value(v)} for k, v in (attributes or {}).items()]


def _otlp_span(row: SpanRow) -> dict[str, Any]:
    out: dict[str, Any] = {
        "traceId": row["trace_id"],
        "spanId": row["span_id"],
        "parentSpanId": row.get("parent_span_id") or "",
        "name": row["name"],
        "kind": KINDS.index(row.get("kind") or "INTERNAL", 1),
        "startTimeUnixNano": str(row["start_time_ns"]),
        "endTimeUnixNano": str(row["end_time_ns"]),
        "attributes": _kv(row.get("attributes")),
        "status": {"code": STATUS_CODES.index(row.get("status_code") or "UNSET")},
    }
    if row.get("trace_state"):
        out["traceState"] = row["trace_state"]
    if row.get("status_message"):
        out["status"]["message"] = row["status_message"]
    if row.get("events"):
        out["events"] = [
            {"timeUnixNano": str(e["time_ns"]), "name": e["name"], "attributes": _kv(e.get("attributes"))}
            for e in row["events"]
        ]
    if row.get("links"):
        out["links"] = [
            {
                "traceId": lk["trace_id"],
                "spanId": lk["span_id"],
                **({"traceState": lk["trace_state"]} if lk.get("trace_state") else {}),
                "attributes": _kv(lk.get("attributes")),
            }
            for lk in row["links"]
        ]
    return out


Group = tuple[Mapping[str, Any], str | None, str | None, list[SpanRow]]  # resource, scope name/version, spans


def request_groups(rows: Iterable[SpanRow], *, spans_per_request: int = 2048,
                   bytes_per_request: int = 4 << 20) -> Iterator[list[Group]]:
    """Span rows cut into requests by size alone (at most ``spans_per_request`` spans, about
    ``bytes_per_request`` bytes of attributes), never at a change of resource: each request is a list
    of (resource, scope name, scope version, spans) groups in order of first appearance. (Cutting at
    every change of resource sent 13.5 spans per request from a store of many sessions.)"""
    groups: dict[tuple[str, Any, Any], list[SpanRow]] = {}
    count = size = 0

    def request() -> list[Group]:
        return [(g[0].get("resource") or {}, key[1], key[2], g) for key, g in groups.items()]

    for row in rows:
        row_size = _size(row)
        if count and (count >= spans_per_request or size + row_size > bytes_per_request):
            yield request()
            groups, count, size = {}, 0, 0
        key = (dumps(row.get("resource") or {}), row.get("scope_name"), row.get("scope_version"))
        groups.setdefault(key, []).append(row)
        count += 1
        size += row_size
    if count:
        yield request()


def otlp_requests(rows: Iterable[SpanRow], *, spans_per_request: int = 2048,
                  bytes_per_request: int = 4 << 20) -> Iterator[tuple[dict[str, Any], int]]:
    """Span rows as OTLP JSON ExportTraceServiceRequest objects, with the number of spans in each:
    cut by :func:`request_groups`, one ``resourceSpans`` per resource and one ``scopeSpans`` per scope inside."""
    for groups in request_groups(rows, spans_per_request=spans_per_request, bytes_per_request=bytes_per_request):
        yield otlp_request(groups), sum(len(g[3]) for g in groups)


def otlp_request(groups: list[Group]) -> dict[str, Any]:
    """One request of :func:`request_groups` as an OTLP JSON object (one ``resourceSpans`` per resource)."""
    by_resource: dict[str, dict[str, Any]] = {}
    for resource, scope_name, scope_version, spans in groups:
        entry = by_resource.setdefault(dumps(resource), {"resource": {"attributes": _kv(resource)}, "scopeSpans": []})
        scope = {k: v for k, v in (("name", scope_name), ("version", scope_version)) if v}
        entry["scopeSpans"].append({"scope": scope, "spans": [_otlp_span(r) for r in spans]})
    return {"resourceSpans": list(by_resource.values())}


def _size(row: SpanRow) -> int:
    """About how many bytes a span takes in a request (its attribute and event values, plus framing)."""
    n = 160
    for k, v in (row.get("attributes") or {}).items():
        n += len(k) + (len(v) if isinstance(v, str) else 16)
    for e in row.get("events") or []:
        n += 48 + sum(len(k) + (len(v) if isinstance(v, str) else 16) for k, v in (e.get("attributes") or {}).items())
    return n


def write_otlp_json(
    rows: Iterable[SpanRow], out: str | os.PathLike[str] | IO[str], *, spans_per_line: int = 512
) -> int:
    """Write span rows as OTLP JSON lines (one request of at most ``spans_per_line`` spans each,
    grouped by resource and scope inside: :func:`otlp_requests`). Returns the number of spans written."""
    if isinstance(out, (str, os.PathLike)):
        with open(out, "w", encoding="utf-8") as handle:
            return write_otlp_json(rows, handle, spans_per_line=spans_per_line)
    written = 0
    for request, n in otlp_requests(rows, spans_per_request=spans_per_line):
        out.write(json.dumps(request, separators=(",", ":"), ensure_ascii=False) + "\n")
        written += n
    return written


# -- importing into a store -----------------------------------------------------------------------
@dataclass
class OtlpImportResult:
    """What :func:`import_otlp_json` did with one file."""

    path: str
    spans: int = 0  # spans read from the file
    imported: int = 0  # new spans written to the store
    duplicates: int = 0  # spans already in the store or repeated in the file

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def import_otlp_json(
    store: Any, path: str | os.PathLike[str], *, chunk_rows: int = 50_000
) -> OtlpImportResult:
    """Read an OTLP JSON file into ``store`` (a :class:`tracer.store.Store` or a path).

    All or nothing: the whole file is parsed before anything is written, so a bad line leaves the
    store untouched (the :class:`OtlpJsonError` names the file and line). Spans whose
    ``(trace_id, span_id)`` the store already holds are skipped, so importing twice is harmless.
    """
    from tracer.store import Store

    store = store if isinstance(store, Store) else Store(store)
    result = OtlpImportResult(str(path))
    rows = list(read_otlp_json(path))
    result.spans = len(rows)
    existing = _existing_keys(store, {r["trace_id"] for r in rows})
    fresh = []
    for row in rows:
        key = (row["trace_id"], row["span_id"])
        if key in existing:
            result.duplicates += 1
            continue
        existing.add(key)
        fresh.append(row)
    for start in range(0, len(fresh), chunk_rows):
        store.write_table(rows_to_table(fresh[start : start + chunk_rows]))
    result.imported = len(fresh)
    return result


def _existing_keys(store: Any, trace_ids: set[str]) -> set[tuple[str, str]]:
    if not trace_ids or not store.path.exists():
        return set()
    from tracer.store import lookups

    with store.reader() as reader:
        return lookups.span_keys(reader, trace_ids)
