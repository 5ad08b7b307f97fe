"""Stored spans → any OpenTelemetry backend over OTLP/HTTP (protobuf, or JSON on request).

``prunegate export`` (and ``--otlp-endpoint`` on import/replay/compare) reads spans back from the
store, fills in what LLM-trace backends read (:func:`tracer.spans.openinference.enrich_rows`) and
POSTs them to ``{endpoint}/v1/traces`` in requests of at most ``batch`` spans. Each request that
is not answered 2xx (after retries on 429/502/503/504 and connection errors) counts its spans as
failed; a 2xx answer's ``partial_success.rejected_spans`` counts as failed too. The result says
what was sent and what failed, and why.
"""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tracer.spans import names as sn
from tracer.spans.openinference import enrich_rows
from tracer.spans.setup import otlp_traces_endpoint
from tracer.store import Store
from tracer.store.rows import SpanRow, decode_row
from tracer.traffic.otlp_json import otlp_requests

RETRY_STATUS = (429, 502, 503, 504)
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

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def summary(self) -> str:
        line = f"otlp: sent {self.sent} spans of {self.sessions} sessions to {self.endpoint}, {self.failed} failed"
        return line + (f" ({'; '.join(dict.fromkeys(self.errors))})" if self.errors else "")


def select_rows(store: Store, session_ids: Iterable[str] | None = None) -> tuple[list[SpanRow], int]:
    """The spans to send (each span once) and the number of sessions they belong to.

    ``session_ids``: sessions by id or name; None for every span in the store (spans of no
    session included). Raises ``KeyError`` naming the ids that match no session.
    """
    with store.reader() as r:
        if session_ids is None:
            raw = r.query("SELECT * FROM spans ORDER BY session_id NULLS LAST, trace_id, start_time_ns, span_id")
        else:
            wanted = list(dict.fromkeys(session_ids))
            roots = r.query(
                f"SELECT DISTINCT session_id, attributes->>'{sn.SESSION_NAME}' AS name FROM spans "
                f"WHERE name = '{sn.SESSION}' AND (list_contains(?::VARCHAR[], session_id) "
                f"OR list_contains(?::VARCHAR[], attributes->>'{sn.SESSION_NAME}'))", [wanted, wanted])
            found = {row["session_id"] for row in roots}
            missing = [w for w in wanted if w not in found and w not in {row["name"] for row in roots}]
            if missing:
                raise KeyError(", ".join(map(repr, missing)))
            raw = r.query("SELECT * FROM spans WHERE list_contains(?::VARCHAR[], session_id) "
                          "ORDER BY session_id, trace_id, start_time_ns, span_id", [sorted(found)])
    rows: list[SpanRow] = []
    seen: set[tuple[str, str]] = set()
    for row in raw:
        key = (row["trace_id"], row["span_id"])
        if key not in seen:  # a span recovered twice is stored once per segment; send it once
            seen.add(key)
            rows.append(decode_row(row))
    sessions = {r["session_id"] for r in rows if r.get("name") == sn.SESSION and r.get("session_id")}
    return rows, len(sessions)


def to_protobuf(request: Mapping[str, Any]) -> bytes:
    """An OTLP JSON request (hex ids) as protobuf bytes."""
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    return json_format.ParseDict(_b64_ids(request), ExportTraceServiceRequest()).SerializeToString()


def _b64_ids(obj: Any) -> Any:
    """OTLP JSON writes ids in hex; protobuf's JSON mapping reads bytes as base64."""
    if isinstance(obj, dict):
        return {k: (base64.b64encode(bytes.fromhex(v)).decode() if k in ("traceId", "spanId", "parentSpanId") and v
                    else _b64_ids(v)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_b64_ids(v) for v in obj]
    return obj


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
              project: str | None = None, headers: Mapping[str, str] | None = None, batch: int = 256,
              timeout: float = 30.0, retries: int = 3) -> ExportResult:
    """POST ``rows`` (enriched for backends) to the OTLP/HTTP ``endpoint``; count sent and failed."""
    url = otlp_traces_endpoint(endpoint)
    result = ExportResult(url, sessions=sessions, spans=len(rows))
    content_type = JSON if json_encoding else PROTOBUF
    unreachable = ""
    for request, n in otlp_requests(enrich_rows(rows, project), spans_per_request=batch):
        if unreachable:  # retried already: the rest fails at once rather than waiting out each retry
            result.failed += n
            continue
        data = json.dumps(request).encode() if json_encoding else to_protobuf(request)
        error = _post(url, data, {"Content-Type": content_type, **(headers or {})}, timeout, retries)
        if isinstance(error, str) and error.startswith("cannot reach"):
            unreachable = error
        if isinstance(error, str):
            result.failed += n
            result.errors.append(error)
            continue
        rejected, message = _rejected(*error)
        result.sent += n - rejected
        result.failed += rejected
        if rejected:
            result.errors.append(f"{rejected} spans rejected: {message or 'no reason given'}")
    return result


def _post(url: str, data: bytes, headers: dict[str, str], timeout: float, retries: int) -> tuple[bytes, str] | str:
    """(answer body, its content type) on 2xx; else the reason the request failed."""
    reason = ""
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(min(0.5 * 2 ** (attempt - 1), 4.0))
        req = urllib.request.Request(url, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - the user's endpoint
                return resp.read(), resp.headers.get("Content-Type", "")
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:200].decode("utf-8", "replace").strip()
            reason = f"HTTP {exc.code}" + (f": {detail}" if detail else "")
            if exc.code not in RETRY_STATUS:
                return reason
        except (urllib.error.URLError, OSError) as exc:
            reason = f"cannot reach {url}: {getattr(exc, 'reason', exc)}"
    return reason


def export_store(store: Store, endpoint: str, session_ids: Iterable[str] | None = None, **options: Any) -> ExportResult:
    """Send a store (or the chosen sessions) to ``endpoint``; see :func:`send_rows` for ``options``."""
    rows, sessions = select_rows(store, session_ids)
    return send_rows(rows, endpoint, sessions=sessions, **options)
