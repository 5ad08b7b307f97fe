"""``prunegate export`` and ``--otlp-endpoint``: stored spans to a real OTLP/HTTP receiver on 127.0.0.1.

The receiver decodes what arrives with the OpenTelemetry proto types (protobuf, or JSON through
protobuf's JSON mapping), as a collector does, and can be told to refuse requests.
"""

from __future__ import annotations

import base64
import json
import threading
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
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
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
    assert last == f"otlp: sent {replayed} spans of 2 sessions to {receiver.url}/v1/traces, 0 failed"
    assert len(receiver.spans()) - before == replayed
    assert main(["replay", "--policy", "recency", "--store", str(path), "--otlp-endpoint", receiver.url, "--no-trace"]) == 2


def test_protobuf_ids_are_the_stored_hex_ids() -> None:
    from tracer.traffic.otlp_export import to_protobuf
    from tracer.traffic.otlp_json import otlp_requests

    row = {"trace_id": "ab" * 16, "span_id": "cd" * 8, "parent_span_id": "ef" * 8, "name": "x", "kind": "INTERNAL",
           "start_time_ns": 1, "end_time_ns": 2, "attributes": {"n": 1}}
    [(request, n)] = list(otlp_requests([row]))
    assert n == 1
    span = ExportTraceServiceRequest.FromString(to_protobuf(request)).resource_spans[0].scope_spans[0].spans[0]
    assert (span.trace_id.hex(), span.span_id.hex(), span.parent_span_id.hex()) == ("ab" * 16, "cd" * 8, "ef" * 8)
    assert base64.b64encode(span.span_id).decode() != "cd" * 8


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
