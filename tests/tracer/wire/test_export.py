"""``prunegate export`` and ``--otlp-endpoint``: stored spans to a real OTLP/HTTP receiver on 127.0.0.1.

The receiver decodes what arrives with the OpenTelemetry proto types (protobuf, or JSON through
protobuf's JSON mapping), as a collector does, and can be told to refuse requests.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.paths import SESSIONS, TEST_DATA
from tracer.cli import main
from tracer.store import Store

WEATHER = TEST_DATA / "otel" / "openllmetry-anthropic.jsonl"


class Receiver:
    """An OTLP/HTTP traces endpoint: decodes every request; ``answer`` picks the status to reply."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, ExportTraceServiceRequest]] = []
        self.status = 200
        self.reject = 0  # spans to report as rejected in partial_success
        self.busy = 0  # requests to answer 429 with Retry-After: 1 first
        self.attempts: list[float] = []  # monotonic time of every POST
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.attempts.append(time.monotonic())
                if outer.busy:
                    outer.busy -= 1
                    self.send_response(429)
                    self.send_header("Retry-After", "1")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                kind = self.headers.get("Content-Type", "")
                request = ExportTraceServiceRequest()
                if kind == "application/json":
                    json_format.Parse(body, request)
                else:
                    request.ParseFromString(body)
                outer.requests.append((kind, request))
                answer = ExportTraceServiceResponse()
                if outer.reject:
                    answer.partial_success.rejected_spans = outer.reject
                    answer.partial_success.error_message = "too old"
                data = answer.SerializeToString() if outer.status == 200 else b"no"
                self.send_response(outer.status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def spans(self) -> list[dict[str, Any]]:
        out = []
        for _, req in self.requests:
            for rs in req.resource_spans:
                resource = {kv.key: _value(kv.value) for kv in rs.resource.attributes}
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        out.append({"trace_id": s.trace_id.hex(), "span_id": s.span_id.hex(), "name": s.name,
                                    "attributes": {kv.key: _value(kv.value) for kv in s.attributes},
                                    "links": [(lk.trace_id.hex(), lk.span_id.hex()) for lk in s.links],
                                    "resource": resource})
        return out


def _value(v: Any) -> Any:
    return json_format.MessageToDict(v).popitem()[1] if v.ListFields() else None


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.server.shutdown()
    r.server.server_close()


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    """Two imported sessions and their ungated replay (violations linked to their evictions)."""
    path = tmp_path_factory.mktemp("export") / "store"
    assert main(["import", str(SESSIONS / "anthropic-parallel.jsonl"), str(WEATHER), "--store", str(path)]) == 0
    assert main(["replay", "--policy", "salience", "--ungated", "--budget", "1500", "--store", str(path)]) == 0
    return Store(path)


def _stored(store: Store) -> set[tuple[str, str]]:
    return {(r["trace_id"], r["span_id"]) for r in store.query("SELECT trace_id, span_id FROM spans")}


def test_a_store_arrives_whole_with_span_kinds_session_io_and_violation_causes(store, receiver, capsys) -> None:
    code = main(["export", "--store", str(store.path), "--otlp-endpoint", receiver.url, "--project", "lab", "--json"])
    out = json.loads(capsys.readouterr().out)
    got = receiver.spans()
    assert code == 0 and out["failed"] == 0 and out["sent"] == len(got) == store.count()
    assert {(s["trace_id"], s["span_id"]) for s in got} == _stored(store)  # every span, once
    assert {k for k, _ in receiver.requests} == {"application/x-protobuf"}
    kinds = {s["name"].split(" ")[0]: s["attributes"].get("openinference.span.kind") for s in got}
    assert kinds["prunegate.session"] == kinds["prunegate.prune"] == kinds["prunegate.budget_check"] == "CHAIN"
    assert kinds["chat"] == "LLM"
    assert all(s["resource"]["openinference.project.name"] == "lab" for s in got)
    roots = [s for s in got if s["name"] == "prunegate.session"]
    weather = next(s for s in roots if "Paris" in s["attributes"].get("input.value", ""))
    assert weather["attributes"]["input.value"] == "What is the weather in Paris and in Rome?"
    assert weather["attributes"]["output.value"] == "Paris is sunny at 18C and Rome is cloudy at 21C."
    assert all(s["attributes"]["session.id"] == s["attributes"]["prunegate.session.id"] for s in roots)
    violations = [s for s in got if s["name"] == "prunegate.violation" and s["links"]]
    assert violations
    for v in violations:
        assert (v["attributes"]["prunegate.violation.cause_trace_id"], v["attributes"]["prunegate.violation.cause_span_id"]) == v["links"][0]


def test_violations_are_status_error_in_the_store(store) -> None:
    rows = store.query("SELECT status_code, status_message, attributes->>'prunegate.violation.message' AS m "
                       "FROM spans WHERE name = 'prunegate.violation'")
    assert rows and all(r["status_code"] == "ERROR" and r["status_message"] == r["m"] for r in rows)


def test_chosen_sessions_as_json_encoding(store, receiver, capsys) -> None:
    sid = [r["session_id"] for r in store.query(
        "SELECT session_id FROM spans WHERE name = 'prunegate.session' AND attributes->>'prunegate.session.source' = 'replay' "
        "AND attributes->>'prunegate.session.name' LIKE 'openllmetry%'")][0]
    code = main(["export", "--store", str(store.path), "--otlp-endpoint", receiver.url + "/v1/traces",
                 "--session", sid, "--json-encoding"])
    assert code == 0
    got = receiver.spans()
    assert {k for k, _ in receiver.requests} == {"application/json"}
    assert len(got) == len(store.spans(sid)) and f"otlp: sent {len(got)} spans of 1 sessions" in capsys.readouterr().out
    assert main(["export", "--store", str(store.path), "--otlp-endpoint", receiver.url, "--session", "nope"]) == 2


@pytest.mark.parametrize("status,reject", [(400, 0), (200, 3)])
def test_refused_spans_are_counted_and_the_exit_is_non_zero(store, receiver, capsys, status: int, reject: int) -> None:
    receiver.status, receiver.reject = status, reject
    code = main(["export", "--store", str(store.path), "--otlp-endpoint", receiver.url, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    if status == 400:
        assert out["sent"] == 0 and out["failed"] == store.count() and "HTTP 400" in out["errors"][0]
    else:
        assert out["failed"] == reject * len(receiver.requests) and out["sent"] + out["failed"] == store.count()
        assert "too old" in out["errors"][0]


def test_an_unreachable_endpoint_fails_every_span(store, capsys) -> None:
    code = main(["export", "--store", str(store.path), "--otlp-endpoint", "http://127.0.0.1:9", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["sent"] == 0 and out["failed"] == store.count() and "cannot reach" in out["errors"][0]


def test_import_and_replay_send_what_they_recorded_and_print_the_counters(tmp_path, receiver, capsys) -> None:
    path = tmp_path / "s"
    assert main(["import", str(WEATHER), "--store", str(path), "--otlp-endpoint", receiver.url]) == 0
    lines = capsys.readouterr().out.splitlines()
    store = Store(path)
    # the file's own spans are stored as they are; the 2 sessions recorded from them are sent
    imported = store.query("SELECT count(*) AS n FROM spans WHERE session_id LIKE 'imp-%'")[0]["n"]
    assert lines[0].startswith("imported 2 sessions") and lines[-1].startswith(f"otlp: sent {imported} spans of 2 sessions")
    assert len(receiver.spans()) == imported
    before = len(receiver.spans())
    assert main(["replay", "--policy", "recency", "--store", str(path), "--otlp-endpoint", receiver.url]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    replayed = store.query("SELECT count(*) AS n FROM spans WHERE session_id LIKE 'replay-%'")[0]["n"]
    assert re.fullmatch(rf"otlp: sent {replayed} spans of 2 sessions to {receiver.url}/v1/traces, 0 failed "
                        r"\(\d+ requests, [\d,]+ spans/s\)", last), last
    assert len(receiver.spans()) - before == replayed
    assert main(["replay", "--policy", "recency", "--store", str(path), "--otlp-endpoint", receiver.url, "--no-trace"]) == 2


def _fleet_rows(n: int, hosts: int) -> list[dict[str, Any]]:
    """``n`` spans whose resource changes at every span (``hosts`` agent hosts taking turns)."""
    return [{"trace_id": f"{i:032x}", "span_id": f"{i + 1:016x}", "parent_span_id": None, "name": f"s{i}",
             "kind": "INTERNAL", "start_time_ns": i, "end_time_ns": i + 5, "status_code": "ERROR" if i % 7 == 0 else "UNSET",
             "scope_name": "lib" if i % 2 else "prunegate", "resource": {"service.instance.id": f"host-{i % hosts}"},
             "attributes": {"n": i, "x": 0.5, "ok": True, "tags": ["a", "b"], "text": "y" * 50},
             "events": [{"time_ns": i + 1, "name": "e", "attributes": {"k": "v"}}]} for i in range(n)]


def test_chat_spans_carry_the_request_they_sent(tmp_path, receiver, capsys) -> None:
    """Import and replay (with --capture-content) chat spans: the request's messages, as GenAI JSON
    in the store and as OpenInference's input.value and llm.input_messages.* once exported."""
    path = tmp_path / "s"
    assert main(["import", str(WEATHER), "--store", str(path)]) == 0
    assert main(["replay", "--policy", "recency", "--budget", "100000", "--capture-content", "--store", str(path)]) == 0
    stored = [decode(r) for r in Store(path).query("SELECT * FROM spans WHERE name LIKE 'chat%'")]
    assert {r["session_id"][:4] for r in stored} == {"imp-", "repl"}
    for r in stored:
        a = r["attributes"]
        inp = json.loads(a["gen_ai.input.messages"])
        assert len(inp) == len(a["prunegate.request.message_ids"]) and inp[0]["role"] in ("system", "user")
    capsys.readouterr()
    assert main(["export", "--store", str(path), "--otlp-endpoint", receiver.url]) == 0
    chats = [s for s in receiver.spans() if s["name"].startswith("chat")]
    assert len(chats) == len(stored)
    for s in chats:
        a = s["attributes"]
        inp = json.loads(a["input.value"])
        assert a["input.mime_type"] == "application/json" and a["llm.input_messages.0.message.role"] == inp[0]["role"]
        assert f"llm.input_messages.{len(inp) - 1}.message.role" in a
        for i, m in enumerate(inp):
            text = "\n".join(p["content"] for p in m["parts"] if p["type"] == "text")
            if text:
                assert a[f"llm.input_messages.{i}.message.content"] == text
    assert any("Paris" in v for s in chats for k, v in s["attributes"].items() if k.startswith("llm.input_messages."))


def test_protobuf_ids_are_the_stored_hex_ids() -> None:
    from tracer.traffic.otlp_json import request_groups
    from tracer.wire.export import to_protobuf

    row = {"trace_id": "ab" * 16, "span_id": "cd" * 8, "parent_span_id": "ef" * 8, "name": "x", "kind": "INTERNAL",
           "start_time_ns": 1, "end_time_ns": 2, "attributes": {"n": 1}}
    [groups] = list(request_groups([row]))
    span = ExportTraceServiceRequest.FromString(to_protobuf(groups)).resource_spans[0].scope_spans[0].spans[0]
    assert (span.trace_id.hex(), span.span_id.hex(), span.parent_span_id.hex()) == ("ab" * 16, "cd" * 8, "ef" * 8)
    assert base64.b64encode(span.span_id).decode() != "cd" * 8


def test_requests_are_cut_by_size_not_at_each_resource(receiver) -> None:
    from tracer.wire.export import send_rows

    result = send_rows(_fleet_rows(300, hosts=30), receiver.url, batch=100)
    assert (result.sent, result.failed, result.requests) == (300, 0, 3) and len(receiver.requests) == 3
    for _, req in receiver.requests:  # grouped by resource inside: each resource once per request
        hosts = [kv.value.string_value for rs in req.resource_spans for kv in rs.resource.attributes]
        assert len(hosts) == len(set(hosts)) == 30
    got = {s["span_id"]: s["resource"]["service.instance.id"] for s in receiver.spans()}
    assert got == {f"{i + 1:016x}": f"host-{i % 30}" for i in range(300)}  # every span once, with its resource
    assert result.rate > 0 and re.search(r"\(3 requests, [\d,]+ spans/s\)", result.summary())
    small = send_rows(_fleet_rows(300, hosts=30), receiver.url, batch=1000, max_bytes=20_000)
    assert small.sent == 300 and small.requests >= 4  # the byte bound cuts too


def test_protobuf_and_json_encodings_carry_the_same_spans(receiver) -> None:
    from tracer.wire.export import send_rows

    rows = _fleet_rows(40, hosts=3)
    assert send_rows(rows, receiver.url, batch=16).sent == 40
    as_protobuf, receiver.requests = receiver.requests, []
    assert send_rows(rows, receiver.url, batch=16, json_encoding=True).sent == 40
    def first(request: ExportTraceServiceRequest) -> str:
        return request.resource_spans[0].scope_spans[0].spans[0].name  # requests arrive in any order

    def without_ids(request: ExportTraceServiceRequest) -> ExportTraceServiceRequest:
        out = ExportTraceServiceRequest()
        out.CopyFrom(request)  # OTLP JSON ids are hex; protobuf's JSON mapping (this receiver) reads base64
        for rs in out.resource_spans:
            for ss in rs.scope_spans:
                for sp in ss.spans:
                    sp.ClearField("trace_id")
                    sp.ClearField("span_id")
        return out

    assert [without_ids(r) for r in sorted((r for _, r in as_protobuf), key=first)] == \
        [without_ids(r) for r in sorted((r for _, r in receiver.requests), key=first)]
    span = next(r for _, r in as_protobuf if first(r) == "s0").resource_spans[0].scope_spans[0].spans[0]
    assert (span.trace_id.hex(), span.span_id.hex(), span.status.code, span.events[0].name) == ("0" * 32, f"{1:016x}", 2, "e")


def test_429_is_retried_after_what_retry_after_says(receiver) -> None:
    from tracer.wire.export import send_rows

    receiver.busy = 1
    result = send_rows(_fleet_rows(10, hosts=2), receiver.url, concurrency=1)
    assert (result.sent, result.failed) == (10, 0) and len(receiver.attempts) == 2
    assert receiver.attempts[1] - receiver.attempts[0] >= 0.95  # Retry-After: 1, not the 0.5 s back-off


def test_concurrent_requests_are_bounded(receiver) -> None:
    from tracer.wire import export as otlp_export

    inside, peak, lock = [0], [0], threading.Lock()
    post = otlp_export._post

    def counting(*args: Any, **kw: Any) -> Any:
        with lock:
            inside[0] += 1
            peak[0] = max(peak[0], inside[0])
        try:
            time.sleep(0.05)
            return post(*args, **kw)
        finally:
            with lock:
                inside[0] -= 1

    otlp_export._post = counting
    try:
        result = otlp_export.send_rows(_fleet_rows(200, hosts=4), receiver.url, batch=10, concurrency=3)
    finally:
        otlp_export._post = post
    assert result.sent == 200 and result.requests == 20 and peak[0] == 3


def test_compare_sends_every_replay_it_recorded(tmp_path, receiver, capsys) -> None:
    path = tmp_path / "s"
    assert main(["import", str(WEATHER), "--store", str(path)]) == 0
    capsys.readouterr()
    assert main(["compare", "--policies", "recency,salience", "--gated", "on", "--budget", "200",
                 "--store", str(path), "--otlp-endpoint", receiver.url, "--project", "ab", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    store = Store(path)
    replayed = store.query("SELECT count(*) AS n FROM spans WHERE session_id LIKE 'replay-%'")[0]["n"]
    assert out["otlp"]["sessions"] == 4 and out["otlp"]["sent"] == replayed == len(receiver.spans())
    assert {s["resource"]["openinference.project.name"] for s in receiver.spans()} == {"ab"}


def test_recorded_session_roots_carry_kind_session_and_first_input_last_output(tmp_path) -> None:
    path = tmp_path / "s"
    assert main(["import", str(WEATHER), "--store", str(path)]) == 0
    assert main(["import", str(WEATHER), "--store", str(tmp_path / "bare"), "--no-content"]) == 0
    roots = {r["attributes"]["session.id"]: r["attributes"] for r in
             [decode(r) for r in Store(path).query("SELECT * FROM spans WHERE name = 'prunegate.session'")]}
    assert all(a["openinference.span.kind"] == "CHAIN" and a["session.id"] == a["prunegate.session.id"]
               for a in roots.values())
    weather = next(a for a in roots.values() if "Paris" in a.get("input.value", ""))
    assert weather["output.value"] == "Paris is sunny at 18C and Rome is cloudy at 21C."
    bare = [decode(r)["attributes"] for r in Store(tmp_path / "bare").query("SELECT * FROM spans WHERE name = 'prunegate.session'")]
    assert bare and not any("input.value" in a or "output.value" in a for a in bare)  # content is opt-in
    kinds = {r["name"].split(" ")[0]: decode(r)["attributes"].get("openinference.span.kind")
             for r in Store(path).query("SELECT * FROM spans WHERE session_id LIKE 'imp-%'")}
    assert kinds == {"prunegate.session": "CHAIN", "prunegate.message": "CHAIN", "prunegate.unit.close": "CHAIN",
                     "chat": "LLM"}


def decode(row: dict) -> dict:
    from tracer.store.rows import decode_row

    return decode_row(row)
