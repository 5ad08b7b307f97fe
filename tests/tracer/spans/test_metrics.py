"""Metrics of the gate and of serve, read back from a real OpenTelemetry metric reader (docs/metrics.md)."""

from __future__ import annotations

import http.client
import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider

from tests.metered import exercise
from tests.paths import REPO
from tracer.contract import names as sn
from tracer.store import Store
from tracer.wire.serve import PATH, Receiver, make_server

DOC = REPO / "docs" / "metrics.md"


def points(reader: InMemoryMetricReader) -> dict[str, list[tuple[dict[str, Any], Any]]]:
    """metric name -> [(attributes, value or histogram point)] as the reader collected them."""
    out: dict[str, list[tuple[dict[str, Any], Any]]] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                out.setdefault(m.name, []).extend(
                    (dict(p.attributes or {}), getattr(p, "value", p)) for p in m.data.data_points)
    return out


def total(found: dict[str, list[tuple[dict[str, Any], Any]]], name: str, **where: Any) -> float:
    """Sum of a counter's points whose attributes include ``where`` (keys with '.' spelled '__')."""
    want = {k.replace("__", "."): v for k, v in where.items()}
    return sum(v for a, v in found.get(name, []) if all(a.get(k) == v for k, v in want.items()))


@pytest.fixture
def served(tmp_path) -> Iterator[tuple[InMemoryMetricReader, Any]]:
    """A real receiver on 127.0.0.1 whose health is observed by an in-memory reader."""
    from tracer.spans.metrics import observe_receiver

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    receiver = Receiver(Store(tmp_path / "store"), max_inflight=2)
    observe_receiver(provider, receiver, 2)
    server = make_server(receiver, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield reader, server
    server.shutdown()
    server.server_close()


def post(server: Any, body: bytes) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
    conn.request("POST", PATH, body, {"Content-Type": "application/json"})
    status = conn.getresponse().status
    conn.close()
    return status


ONE_SPAN = (b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0af7651916cd43dd8448eb211c80319c",'
            b'"spanId":"b7ad6b7169203331","name":"x","startTimeUnixNano":"1","endTimeUnixNano":"2"}]}]}]}')


def test_the_gate_metrics_count_what_the_guards_did() -> None:
    reader = InMemoryMetricReader()
    exercise(MeterProvider(metric_readers=[reader]), TracerProvider())
    found = points(reader)
    assert total(found, sn.METRIC_CHECKS, prunegate__decision="pruned", prunegate__gated=True) == 2
    assert total(found, sn.METRIC_DEFERRALS, prunegate__reason="pending_calls") == 1
    assert total(found, sn.METRIC_HARD_CEILING_FAILURES) == 1
    assert total(found, sn.METRIC_VIOLATIONS, prunegate__violation__code="orphan_tool_result",
                 prunegate__gated=False) == 1
    assert total(found, sn.METRIC_VIOLATIONS_PREVENTED, prunegate__prevention="grown") == 1
    assert total(found, sn.METRIC_VIOLATIONS_PREVENTED, prunegate__prevention="deferred") == 1
    assert total(found, sn.METRIC_GUARD_PASS_THROUGHS, error__type="StructureError") == 1
    assert total(found, sn.METRIC_GUARD_ERRORS, prunegate__error__source="observer") == 1
    assert total(found, sn.METRIC_GUARD_ERRORS, prunegate__error__source="tracer") > 0
    assert total(found, sn.METRIC_UNITS_SPILLED) == 1 and total(found, sn.METRIC_UNITS_REINJECTED) == 1
    assert total(found, sn.METRIC_UNITS_PRUNED, prunegate__policy="salience", prunegate__gated=True) == 1
    usage = {a[sn.GEN_AI_TOKEN_TYPE]: p.sum for a, p in found[sn.METRIC_GEN_AI_TOKEN_USAGE]}
    assert usage == {"input": 40, "output": 3}
    failed = [p for a, p in found[sn.METRIC_GEN_AI_OPERATION_DURATION] if a.get(sn.ERROR_TYPE) == "invalid_request_error"]
    assert len(failed) == 1 and failed[0].count == 1 and failed[0].sum > 0
    checks = sum(p.count for _, p in found[sn.METRIC_CHECK_DURATION])
    assert checks == total(found, sn.METRIC_CHECKS) and all(p.min > 0 for _, p in found[sn.METRIC_CHECK_DURATION])
    saved = [p for a, p in found[sn.METRIC_TOKENS_SAVED] if a[sn.POLICY] == "salience" and a[sn.GATED]]
    before = [p for a, p in found[sn.METRIC_CHECK_TOKENS] if a[sn.POLICY] == "salience" and a[sn.GATED]
              and a[sn.TOKENS_STAGE] == "before"]
    after = [p for a, p in found[sn.METRIC_CHECK_TOKENS] if a[sn.POLICY] == "salience" and a[sn.GATED]
             and a[sn.TOKENS_STAGE] == "after"]
    assert saved[0].sum == before[0].sum - after[0].sum > 0


def test_serve_health_is_read_from_the_receiver(served) -> None:
    reader, server = served
    assert post(server, ONE_SPAN) == 200
    assert post(server, b"{not json") == 400
    found = points(reader)
    assert total(found, sn.METRIC_SERVE_SPANS) == 1 and total(found, sn.METRIC_SERVE_REQUESTS) == 1
    assert total(found, sn.METRIC_SERVE_REFUSED, http__response__status_code=400) == 1
    assert total(found, sn.METRIC_SERVE_INFLIGHT) == 0 and total(found, sn.METRIC_SERVE_INFLIGHT_LIMIT) == 2
    assert total(found, sn.METRIC_SERVE_CONVERSATIONS) == 0
    assert total(found, sn.METRIC_PROCESS_MEMORY) > 10 << 20


def test_an_unmeasured_guard_records_no_metrics() -> None:
    """No meter provider set up anywhere: the guard keeps no instruments (nothing to pay)."""
    from tracer.guard import PruneGuard

    pg = PruneGuard("recency", budget=100, tracer_provider=TracerProvider())
    assert pg.metrics is None and pg.session.metrics is None
    pg.close()


def documented() -> set[str]:
    """The metric names in the first column of docs/metrics.md's tables."""
    return set(re.findall(r"^\| `([a-z_.]+)` \|", DOC.read_text(encoding="utf-8"), re.M))


def test_every_emitted_metric_is_documented_and_every_documented_one_is_emitted(served) -> None:
    reader, server = served
    assert post(server, b"{not json") == 400  # serve.refused has a point once something was refused
    gate_reader = InMemoryMetricReader()
    exercise(MeterProvider(metric_readers=[gate_reader]), TracerProvider())
    emitted = set(points(reader)) | set(points(gate_reader))
    docs = documented()
    assert emitted - docs == set(), f"emitted but not in docs/metrics.md: {sorted(emitted - docs)}"
    assert docs - emitted == set(), f"in docs/metrics.md but never emitted: {sorted(docs - emitted)}"
    assert docs == set(sn.metric_names())
