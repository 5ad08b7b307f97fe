"""`prunegate import` reads what the OpenTelemetry Collector's file exporter writes: JSON lines, rotated
files, length-prefixed zstd or protobuf records, whole-file gzip/zstd."""

from __future__ import annotations

import gzip
import json

import pytest
import zstandard
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracer.cli import main
from tracer.store import Store
from tracer.traffic import read_otlp_json
from tracer.traffic.otlp_json import OtlpJsonError


def batches(n_batches: int, spans_each: int) -> list[list]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("agent")
    out = []
    for _ in range(n_batches):
        for i in range(spans_each):
            with tracer.start_as_current_span(f"step {i}") as span:
                span.set_attribute("step", i)
        out.append(list(memory.get_finished_spans()))
        memory.clear()
    return out


def framed(payloads: list[bytes]) -> bytes:
    return b"".join(len(p).to_bytes(4, "big") + p for p in payloads)


def json_line(spans) -> bytes:
    return json.dumps(json_format.MessageToDict(encode_spans(spans))).encode()


def test_every_collector_file_shape_imports_each_span_once(tmp_path):
    b = batches(8, 5)
    out = tmp_path / "collector"
    out.mkdir()
    (out / "traces.json").write_bytes(json_line(b[0]) + b"\n" + json_line(b[1]) + b"\n")  # format: json
    (out / "traces-2026-12-03T07-00-00.000.json").write_bytes(json_line(b[2]) + b"\n")  # rotated backup
    zc = zstandard.ZstdCompressor()
    (out / "z.json.zst").write_bytes(framed([zc.compress(json_line(b[3])), zc.compress(json_line(b[4]))]))  # compression: zstd
    (out / "p.zst").write_bytes(framed([encode_spans(b[5]).SerializeToString()]))  # format: proto
    (out / "old.json.gz").write_bytes(gzip.compress(json_line(b[6]) + b"\n"))  # a rotated file gzipped afterwards
    (out / "native.json.zst").write_bytes(zc.compress(json_line(b[7]) + b"\n"))  # one zstd stream
    sent = {format(s.context.span_id, "016x") for batch in b for s in batch}
    store = tmp_path / "store"
    for _ in range(2):  # importing the same files again adds nothing
        # the spans are stored; the files hold no model call, so no conversation: refused, exit 1 (docs/replay.md)
        assert main(["import", str(out), "--store", str(store)]) == 1
    rows = Store(store).query("SELECT span_id, count(*) AS n FROM spans GROUP BY span_id")
    assert {r["span_id"] for r in rows} == sent and {r["n"] for r in rows} == {1}


def test_a_truncated_record_names_the_file_and_record(tmp_path):
    b = batches(2, 2)
    data = framed([encode_spans(b[0]).SerializeToString(), encode_spans(b[1]).SerializeToString()])
    bad = tmp_path / "cut.zst"
    bad.write_bytes(data[:-3])
    with pytest.raises(OtlpJsonError, match=r"cut.zst:2: truncated record"):
        list(read_otlp_json(bad))
