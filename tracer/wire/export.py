"""Stored spans → any OpenTelemetry backend over OTLP/HTTP (protobuf, or JSON on request).

``prunegate export`` (and ``--otlp-endpoint`` on import/replay/compare) reads spans back from the
store, fills in what LLM-trace backends read (:func:`tracer.spans.openinference.enrich_rows`) and
POSTs them to ``{endpoint}/v1/traces``. Requests are cut by size (``batch`` spans or ``max_bytes``),
never at a change of resource (spans are grouped by resource inside a request), and up to
``concurrency`` are in flight at once (encoding included, so memory holds about that many requests).
Each request that is not answered 2xx (after retries on 429/502/503/504 and connection errors,
waiting what ``Retry-After`` says, else a doubling back-off) counts its spans as failed; a 2xx
answer's ``partial_success.rejected_spans`` counts as failed too. The result says what was sent and
what failed, and why, with the requests made and the rate.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from tracer.contract import names as sn
from tracer.spans.openinference import enrich_rows
from tracer.spans.setup import otlp_traces_endpoint
from tracer.store import Store, lookups
from tracer.store.rows import SpanRow, decode_row
from tracer.traffic.otlp_json import KINDS, STATUS_CODES, Group, otlp_request, request_groups

RETRY_STATUS = (429, 502, 503, 504)
MAX_RETRY_AFTER = 30.0  # seconds: a longer Retry-After is waited this long at most
PROTOBUF = "application/x-protobuf"
JSON = "application/json"


@dataclass
class ExportResult:
    """What an export did: spans sent (accepted by the endpoint) and failed, with the reasons."""

    endpoint: str
    sessions: int = 0
    spans: int = 0
    sent: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)
    requests: int = 0
    seconds: float = 0.0

    @property
    def rate(self) -> float:
        """Spans sent per second of the export (encoding and sending)."""
        return self.sent / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "seconds": round(self.seconds, 3), "spans_per_s": round(self.rate, 1)}

    def summary(self) -> str:
        line = (f"otlp: sent {self.sent} spans of {self.sessions} sessions to {self.endpoint}, {self.failed} failed "
                f"({self.requests} requests, {self.rate:,.0f} spans/s)")
        return line + (f" ({'; '.join(dict.fromkeys(self.errors))})" if self.errors else "")


def select_rows(store: Store, session_ids: Iterable[str] | None = None) -> tuple[list[SpanRow], int]:
    """The spans to send (each span once) and the number of sessions they belong to.

    ``session_ids``: sessions by id or name; None for every span in the store (spans of no
    session included). Raises ``KeyError`` naming the ids that match no session.
    """
    with store.reader() as r:
        if session_ids is None:
            raw = lookups.export_rows(r)
        else:
            wanted = list(dict.fromkeys(session_ids))
            roots = lookups.named_sessions(r, wanted)
            found = {row["session_id"] for row in roots}
            missing = [w for w in wanted if w not in found and w not in {row["name"] for row in roots}]
            if missing:
                raise KeyError(", ".join(map(repr, missing)))
            raw = lookups.export_rows(r, sorted(found))
    rows: list[SpanRow] = []
    seen: set[tuple[str, str]] = set()
    for row in raw:
        key = (row["trace_id"], row["span_id"])
        if key not in seen:  # a span recovered twice is stored once per segment; send it once
            seen.add(key)
            rows.append(decode_row(row))
    sessions = {r["session_id"] for r in rows if r.get("name") == sn.SESSION and r.get("session_id")}
    return rows, len(sessions)


def to_protobuf(groups: list[Group]) -> bytes:
    """One request of :func:`tracer.traffic.otlp_json.request_groups` as protobuf bytes, filled
    field by field from the span rows (the OTLP JSON form parsed by ``json_format.ParseDict`` took
    ~170 µs a span, most of an export's time)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    msg = ExportTraceServiceRequest()
    by_resource: dict[str, Any] = {}
    for resource, scope_name, scope_version, spans in groups:
        key = json.dumps(resource, sort_keys=True, default=str)
        out_rs = by_resource.get(key)
        if out_rs is None:
            out_rs = by_resource[key] = msg.resource_spans.add()
            _fill_kv(out_rs.resource.attributes, resource)
        out_ss = out_rs.scope_spans.add()
        out_ss.scope.name = scope_name or ""
        out_ss.scope.version = scope_version or ""
        for row in spans:
            _fill_span(out_ss.spans.add(), row)
    return msg.SerializeToString()


def _fill_span(out: Any, row: Mapping[str, Any]) -> None:
    out.trace_id = bytes.fromhex(row["trace_id"])
    out.span_id = bytes.fromhex(row["span_id"])
    if row.get("parent_span_id"):
        out.parent_span_id = bytes.fromhex(row["parent_span_id"])
    if row.get("trace_state"):
        out.trace_state = row["trace_state"]
    out.name = row["name"]
    out.kind = KINDS.index(row.get("kind") or "INTERNAL", 1)
    out.start_time_unix_nano = int(row["start_time_ns"])
    out.end_time_unix_nano = int(row["end_time_ns"])
    _fill_kv(out.attributes, row.get("attributes"))
    out.status.code = STATUS_CODES.index(row.get("status_code") or "UNSET")
    if row.get("status_message"):
        out.status.message = row["status_message"]
    for e in row.get("events") or []:
        ev = out.events.add()
        ev.time_unix_nano = int(e["time_ns"])
        ev.name = e["name"]
        _fill_kv(ev.attributes, e.get("attributes"))
    for lk in row.get("links") or []:
        link = out.links.add()
        link.trace_id = bytes.fromhex(lk["trace_id"])
        link.span_id = bytes.fromhex(lk["span_id"])
        if lk.get("trace_state"):
            link.trace_state = lk["trace_state"]
        _fill_kv(link.attributes, lk.get("attributes"))


def _fill_kv(out: Any, attributes: Mapping[str, Any] | None) -> None:
    for key, value in (attributes or {}).items():
        kv = out.add()
        kv.key = key
        _fill_value(kv.value, value)


def _fill_value(out: Any, value: Any) -> None:
    """A plain Python value into a protobuf AnyValue (the rules of ``otlp_json.to_any_value``)."""
    if value is None:
        return
    if isinstance(value, bool):
        out.bool_value = value
    elif isinstance(value, int):
        out.int_value = value
    elif isinstance(value, float):
        out.double_value = value
    elif isinstance(value, str):
        out.string_value = value
    elif isinstance(value, Mapping):
        out.kvlist_value.SetInParent()
        _fill_kv(out.kvlist_value.values, value)
    elif isinstance(value, (list, tuple)):
        out.array_value.SetInParent()
        for v in value:
            _fill_value(out.array_value.values.add(), v)
    else:
        out.string_value = str(value)


def _rejected(body: bytes, content_type: str) -> tuple[int, str]:
    """``partial_success`` of an OTLP answer: (rejected spans, error message)."""
    if not body:
        return 0, ""
    try:
        if JSON in content_type:
            part = json.loads(body).get("partialSuccess") or {}
            return int(part.get("rejectedSpans") or 0), str(part.get("errorMessage") or "")
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

        resp = ExportTraceServiceResponse.FromString(body)
        return int(resp.partial_success.rejected_spans), resp.partial_success.error_message
    except Exception:  # noqa: BLE001 - an answer we cannot read is not a rejection we can count
        return 0, ""


def send_rows(rows: list[SpanRow], endpoint: str, *, sessions: int = 0, json_encoding: bool = False,
              project: str | None = None, headers: Mapping[str, str] | None = None, batch: int = 2048,
              max_bytes: int = 4 << 20, concurrency: int = 4, timeout: float = 30.0,
              retries: int = 3) -> ExportResult:
    """POST ``rows`` (enriched for backends) to the OTLP/HTTP ``endpoint``; count sent and failed."""
    url = otlp_traces_endpoint(endpoint)
    result = ExportResult(url, sessions=sessions, spans=len(rows))
    content_type = JSON if json_encoding else PROTOBUF
    all_headers = {"Content-Type": content_type, **(headers or {})}
    unreachable = threading.Event()  # retried already: the rest fails at once rather than waiting out each retry
    start = time.perf_counter()

    def one(groups: list[Group]) -> tuple[bytes, str] | str:
        if unreachable.is_set():
            return "skipped: the endpoint was unreachable"
        data = json.dumps(otlp_request(groups)).encode() if json_encoding else to_protobuf(groups)
        answer = _post(url, data, all_headers, timeout, retries)
        if isinstance(answer, str) and answer.startswith("cannot reach"):
            unreachable.set()
        return answer

    def settle(future: Future[tuple[bytes, str] | str], n: int) -> None:
        answer = future.result()
        result.requests += 1
        if isinstance(answer, str):
            result.failed += n
            if not answer.startswith("skipped"):
                result.errors.append(answer)
            return
        rejected, message = _rejected(*answer)
        result.sent += n - rejected
        result.failed += rejected
        if rejected:
            result.errors.append(f"{rejected} spans rejected: {message or 'no reason given'}")

    pending: dict[Future[tuple[bytes, str] | str], int] = {}
    with ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="prunegate-export") as pool:
        for groups in request_groups(enrich_rows(rows, project), spans_per_request=batch, bytes_per_request=max_bytes):
            n = sum(len(g[3]) for g in groups)
            if len(pending) >= max(1, concurrency):  # bounded: at most `concurrency` requests held
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for f in done:
                    settle(f, pending.pop(f))
            pending[pool.submit(one, groups)] = n
        for f in list(pending):
            settle(f, pending.pop(f))
    result.seconds = time.perf_counter() - start
    return result


def _post(url: str, data: bytes, headers: dict[str, str], timeout: float, retries: int) -> tuple[bytes, str] | str:
    """(answer body, its content type) on 2xx; else the reason the request failed. Retries wait
    what the answer's ``Retry-After`` says (capped), else 0.5 s doubling to 4 s."""
    reason = ""
    wait_s = 0.0
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(wait_s or min(0.5 * 2 ** (attempt - 1), 4.0))
        wait_s = 0.0
        req = urllib.request.Request(url, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - the user's endpoint
                return resp.read(), resp.headers.get("Content-Type", "")
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:200].decode("utf-8", "replace").strip()
            reason = f"HTTP {exc.code}" + (f": {detail}" if detail else "")
            if exc.code not in RETRY_STATUS:
                return reason
            wait_s = retry_after(exc.headers.get("Retry-After"))
        except (urllib.error.URLError, OSError) as exc:
            reason = f"cannot reach {url}: {getattr(exc, 'reason', exc)}"
    return reason


def retry_after(value: str | None) -> float:
    """Seconds a ``Retry-After`` header asks for (delta-seconds or an HTTP date), capped; 0 when absent."""
    if not value:
        return 0.0
    value = value.strip()
    if value.isdigit():
        return min(float(value), MAX_RETRY_AFTER)
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return 0.0
    return max(0.0, min(when - time.time(), MAX_RETRY_AFTER))


def export_store(store: Store, endpoint: str, session_ids: Iterable[str] | None = None, **options: Any) -> ExportResult:
    """Send a store (or the chosen sessions) to ``endpoint``; see :func:`send_rows` for ``options``."""
    rows, sessions = select_rows(store, session_ids)
    return send_rows(rows, endpoint, sessions=sessions, **options)
