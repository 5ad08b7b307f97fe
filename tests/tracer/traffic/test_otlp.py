"""OTLP: JSON files in and out of the store, and export to a real OTLP/HTTP endpoint on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from tracer.spans import otlp_traces_endpoint, setup_tracing
from tracer.store import Store
from tracer.traffic import import_otlp_json, read_otlp_json, write_otlp_json
from tracer.traffic.otlp_json import OtlpJsonError

# Two lines as the Collector's file exporter writes them: hex ids, string nanos, int enums.
COLLECTOR_LINES = [
    {
        "resourceSpans": [{
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "agent"}},
                                        {"key": "host.cpus", "value": {"intValue": "8"}}]},
            "scopeSpans": [{
                "scope": {"name": "prunegate", "version": "0.1"},
                "spans": [{
                    "traceId": "5B8EFFF798038103D269B633813FC60C", "spanId": "EEE19B7EC3C1B174",
                    "parentSpanId": "", "name": "prunegate.session", "kind": 1,
                    "startTimeUnixNano": "1544712660000000000", "endTimeUnixNano": "1544712661000000000",
                    "attributes": [
                        {"key": "gen_ai.conversation.id", "value": {"stringValue": "sess-1"}},
                        {"key": "prunegate.seq", "value": {"intValue": "0"}},
                        {"key": "prunegate.gated", "value": {"boolValue": True}},
                        {"key": "ratio", "value": {"doubleValue": 0.25}},
                        {"key": "ids", "value": {"arrayValue": {"values": [{"stringValue": "m1"},
                                                                          {"stringValue": "m2"}]}}},
                        {"key": "nested", "value": {"kvlistValue": {"values": [
                            {"key": "a", "value": {"intValue": 1}}]}}},
                        {"key": "raw", "value": {"bytesValue": "aGVsbG8="}},
                        {"key": "nothing", "value": {}},
                    ],
                    "status": {},
                }],
            }],
        }],
    },
    {
        "resourceSpans": [{
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "agent"}}]},
            "scopeSpans": [{
                "scope": {"name": "prunegate"},
                "spans": [{
                    "traceId": "5b8efff798038103d269b633813fc60c", "spanId": "0000000000000001",
                    "parentSpanId": "eee19b7ec3c1b174", "name": "prunegate.violation", "kind": "SPAN_KIND_CLIENT",
                    "startTimeUnixNano": 1544712660500000000, "endTimeUnixNano": "1544712660600000000",
                    "attributes": [{"key": "prunegate.session.id", "value": {"stringValue": "sess-1"}},
                                   {"key": "prunegate.seq", "value": {"intValue": "7"}}],
                    "events": [{"timeUnixNano": "1544712660550000000", "name": "exception",
                                "attributes": [{"key": "exception.message", "value": {"stringValue": "400"}}]}],
                    "links": [{"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174",
                               "attributes": [{"key": "prunegate.link", "value": {"stringValue": "caused_by"}}]}],
                    "status": {"code": 2, "message": "tool_result without tool_use"},
                }],
            }],
        }],
    },
]


def _write_lines(path: Path, objects: list) -> Path:
    path.write_text("".join(json.dumps(o) + "\n" for o in objects))
    return path


def test_reads_the_collector_file_format(tmp_path: Path) -> None:
    rows = list(read_otlp_json(_write_lines(tmp_path / "traces.jsonl", COLLECTOR_LINES)))
    assert [r["name"] for r in rows] == ["prunegate.session", "prunegate.violation"]
    root, violation = rows
    assert root["trace_id"] == "5b8efff798038103d269b633813fc60c" and root["span_id"] == "eee19b7ec3c1b174"
    assert root["parent_span_id"] is None and root["kind"] == "INTERNAL" and root["status_code"] == "UNSET"
    assert root["start_time_ns"] == 1544712660000000000
    assert root["attributes"] == {"gen_ai.conversation.id": "sess-1", "prunegate.seq": 0, "prunegate.gated": True,
                                  "ratio": 0.25, "ids": ["m1", "m2"], "nested": {"a": 1}, "raw": "aGVsbG8=",
                                  "nothing": None}
    assert root["resource"] == {"service.name": "agent", "host.cpus": 8}
    assert (root["scope_name"], root["scope_version"], root["session_id"], root["seq"]) == ("prunegate", "0.1", "sess-1", 0)
    assert violation["parent_span_id"] == "eee19b7ec3c1b174" and violation["kind"] == "CLIENT"
    assert (violation["status_code"], violation["status_message"]) == ("ERROR", "tool_result without tool_use")
    assert violation["events"] == [{"name": "exception", "time_ns": 1544712660550000000,
                                    "attributes": {"exception.message": "400"}}]
    assert violation["links"] == [{"trace_id": root["trace_id"], "span_id": root["span_id"], "trace_state": None,
                                   "attributes": {"prunegate.link": "caused_by"}}]
    assert (violation["session_id"], violation["seq"]) == ("sess-1", 7)


def test_a_pretty_printed_single_request_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "one.json"
    path.write_text(json.dumps(COLLECTOR_LINES[1], indent=2))
    assert [r["name"] for r in read_otlp_json(path)] == ["prunegate.violation"]


@pytest.mark.parametrize(
    ("mutate", "line", "expected"),
    [
        (lambda objs: objs.insert(1, "{not json"), 2, "invalid JSON"),
        (lambda objs: objs.__setitem__(1, {"resourceMetrics": []}), 2, "no resourceSpans"),  # logs lines are read (GenAI events)
        (lambda objs: objs[1]["resourceSpans"][0]["scopeSpans"][0]["spans"][0].__setitem__("traceId", "xyz"), 2,
         "resourceSpans[0].scopeSpans[0].spans[0].traceId: 'xyz' is not a 32-hex-digit id"),
        (lambda objs: objs[0]["resourceSpans"][0]["scopeSpans"][0]["spans"][0].__setitem__("startTimeUnixNano", "soon"),
         1, "spans[0].startTimeUnixNano: expected an integer"),
        (lambda objs: objs[0]["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"][0].__setitem__(
            "value", {"stringValue": "a", "intValue": "1"}), 1, "attributes[0] (gen_ai.conversation.id): AnyValue must have exactly one field"),
        (lambda objs: objs[1]["resourceSpans"][0]["scopeSpans"][0]["spans"][0].__setitem__("kind", 9), 2,
         "spans[0].kind: unknown value 9"),
        (lambda objs: objs[1]["resourceSpans"][0]["scopeSpans"][0]["spans"][0].__setitem__("spanId", "0" * 16), 2,
         "spanId: id is all zeros"),
    ],
)
def test_bad_input_names_file_line_and_place(tmp_path: Path, mutate, line: int, expected: str) -> None:
    objects = json.loads(json.dumps(COLLECTOR_LINES))
    mutate(objects)
    path = tmp_path / "bad.jsonl"
    path.write_text("".join((o if isinstance(o, str) else json.dumps(o)) + "\n" for o in objects))
    with pytest.raises(OtlpJsonError) as err:
        list(read_otlp_json(path))
    assert err.value.line == line and err.value.path == str(path)
    assert str(err.value).startswith(f"{path}:{line}: ")
    assert expected in str(err.value)


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(OtlpJsonError, match="nope.jsonl:0: cannot open"):
        list(read_otlp_json(tmp_path / "nope.jsonl"))


def _sdk_spans() -> list:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "rt", "deploy": 3}), shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("roundtrip", "2.0")
    with tracer.start_as_current_span("prunegate.session", attributes={"gen_ai.conversation.id": "rt", "prunegate.seq": 0}):
        with tracer.start_as_current_span("prunegate.prune", kind=SpanKind.PRODUCER,
                                          attributes={"prunegate.session.id": "rt", "prunegate.seq": 1, "f": 1.5,
                                                      "flags": [True, False], "n": [1, 2, 3]}) as prune:
            prune.add_event("grow", {"unit": "u1"})
        with tracer.start_as_current_span("prunegate.violation", links=[Link(prune.get_span_context(), {"k": "v"})],
                                          attributes={"prunegate.session.id": "rt", "prunegate.seq": 2}) as v:
            v.set_status(Status(StatusCode.ERROR, "orphan"))
    return list(memory.get_finished_spans())


def test_store_rows_round_trip_through_otlp_json(tmp_path: Path) -> None:
    from tracer.store.rows import spans_to_table

    spans = _sdk_spans()
    store = Store(tmp_path / "store")
    store.write_table(spans_to_table(spans))
    rows = store.spans("rt")
    path = tmp_path / "out.jsonl"
    assert write_otlp_json(rows, path, spans_per_line=2) == 3
    assert len(path.read_text().splitlines()) == 2
    back = list(read_otlp_json(path))
    drop = ("duration_ns",)
    assert [{k: v for k, v in r.items() if k not in drop} for r in rows] == back


def test_reads_what_the_sdk_otlp_encoder_produces_as_protobuf_json(tmp_path: Path) -> None:
    """The protobuf JSON mapping of the SDK's own OTLP encoding (base64 ids, enum names) reads the same."""
    from tracer.store.rows import spans_to_table

    spans = _sdk_spans()
    request = encode_spans(spans)
    path = tmp_path / "protojson.jsonl"
    path.write_text(json.dumps(json_format.MessageToDict(request)) + "\n")
    store = Store(tmp_path / "store")
    store.write_table(spans_to_table(spans))
    expected = sorted(({k: v for k, v in r.items() if k != "duration_ns"} for r in store.spans("rt")),
                      key=lambda r: r["span_id"])
    assert sorted(read_otlp_json(path), key=lambda r: r["span_id"]) == expected


def test_import_is_all_or_nothing_and_idempotent(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    good = _write_lines(tmp_path / "good.jsonl", COLLECTOR_LINES)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(good.read_text() + "{broken\n")
    with pytest.raises(OtlpJsonError) as err:
        import_otlp_json(store, bad)
    assert err.value.line == 3
    assert store.count() == 0  # nothing from the good lines before it either

    first = import_otlp_json(store, good)
    assert (first.spans, first.imported, first.duplicates) == (2, 2, 0)
    store.compact()
    again = import_otlp_json(str(store.path), good)
    assert (again.spans, again.imported, again.duplicates) == (2, 0, 2)
    assert store.count() == 2
    assert store.sessions()[0]["session_id"] == "sess-1"


class _Collector(BaseHTTPRequestHandler):
    received: list[tuple[str, ExportTraceServiceRequest]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        type(self).received.append((self.path, request))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()
        self.wfile.write(b"")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def collector():
    _Collector.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _Collector.received
    server.shutdown()
    server.server_close()


def _names(received: list) -> list[str]:
    return sorted(s.name for _, r in received for rs in r.resource_spans for ss in rs.scope_spans for s in ss.spans)


def test_one_setting_sends_the_same_spans_to_an_otlp_endpoint(tmp_path: Path, collector) -> None:
    url, received = collector
    tracing = setup_tracing(tmp_path / "store", otlp_endpoint=url, spool_dir=tmp_path / "spool",
                            service_name="otlp-test")
    tracer = tracing.tracer()
    for i in range(30):
        with tracer.start_as_current_span(f"step-{i % 3}", attributes={"prunegate.session.id": "o", "prunegate.seq": i}):
            pass
    tracing.shutdown()
    stats = tracing.stats()
    assert stats["otlp"]["stored"] == 30 and stats["otlp"]["dropped"] == 0
    assert stats["store"]["stored"] == 30
    assert {p for p, _ in received} == {"/v1/traces"}
    stored = [r["name"] for r in Store(tmp_path / "store").spans("o")]
    assert _names(received) == sorted(stored)
    resource = received[0][1].resource_spans[0].resource
    assert any(kv.key == "service.name" and kv.value.string_value == "otlp-test" for kv in resource.attributes)


def test_the_standard_env_variable_switches_otlp_on(tmp_path: Path, collector, monkeypatch: pytest.MonkeyPatch) -> None:
    url, received = collector
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
    tracing = setup_tracing(tmp_path / "store", spool_dir=tmp_path / "spool")
    with tracing.tracer().start_as_current_span("via-env"):
        pass
    tracing.shutdown()
    assert _names(received) == ["via-env"]
    assert setup_tracing(False, otlp_endpoint=False).otlp_processor is None


def test_an_unreachable_endpoint_is_counted_and_the_store_still_gets_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "1")  # the exporter's own retry deadline (s)
    tracing = setup_tracing(tmp_path / "store", otlp_endpoint="http://127.0.0.1:9", spool_dir=tmp_path / "spool")
    with tracing.tracer().start_as_current_span("lonely"):
        pass
    tracing.shutdown()
    stats = tracing.stats()
    assert stats["otlp"]["failed"] == 1 and stats["otlp"]["dropped"] == 1
    assert stats["store"]["stored"] == 1


def test_traces_endpoint_normalisation() -> None:
    assert otlp_traces_endpoint("http://h:4318") == "http://h:4318/v1/traces"
    assert otlp_traces_endpoint("http://h:4318/") == "http://h:4318/v1/traces"
    assert otlp_traces_endpoint("http://h:4318/v1/traces") == "http://h:4318/v1/traces"


def test_protobuf_read_field_by_field_gives_the_rows_of_its_json_form() -> None:
    """serve reads protobuf bodies with rows_from_protobuf: the rows (and refusals) of MessageToDict."""
    from tracer.traffic.otlp_json import _Bad, request_groups, rows_from_protobuf, rows_from_request
    from tracer.wire.export import to_protobuf

    def both(request: ExportTraceServiceRequest) -> tuple[object, object]:
        out = []
        for read in (lambda: list(rows_from_protobuf(request)),
                     lambda: list(rows_from_request(json_format.MessageToDict(request)))):
            try:
                out.append(read())
            except _Bad as bad:
                out.append((bad.where, bad.message))
        return out[0], out[1]

    for line in COLLECTOR_LINES:  # every AnyValue kind, kinds, statuses, events, links
        rows = list(rows_from_request(line))
        request = ExportTraceServiceRequest.FromString(to_protobuf(next(request_groups(rows))))
        got, expected = both(request)
        assert got == expected and isinstance(got, list) and len(got) == len(rows)
    sdk = encode_spans(_sdk_spans())
    got, expected = both(sdk)
    assert got == expected and isinstance(got, list) and got
    for mutate, where in ((lambda s: setattr(s, "trace_id", bytes(16)), ".traceId"),
                          (lambda s: setattr(s, "span_id", b"\x01\x02"), ".spanId"),
                          (lambda s: setattr(s, "start_time_unix_nano", 0), ".startTimeUnixNano"),
                          (lambda s: s.ClearField("span_id"), ".spanId")):
        bad = ExportTraceServiceRequest()
        bad.CopyFrom(sdk)
        mutate(bad.resource_spans[0].scope_spans[0].spans[0])
        got, expected = both(bad)
        assert got == expected and isinstance(got, tuple) and got[0].endswith(where), (got, expected)
