"""Direct spans (tracer.spans.direct) store exactly what the SDK's spans store, and only where allowed."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.paths import SESSIONS
from tracer.lab import ReplaySpec, replay_session
from tracer.spans import DirectSpan, ReliableSpanProcessor, SessionConfig, TracedSession, setup_tracing
from tracer.store import Store
from tracer.store.sink import StoreSink
from tracer.traffic import Conversation, read_paths

SPEC = ReplaySpec("recency", gated=False, budget=400, stream_results=2)


def _conversations() -> list[Conversation]:
    convs = [c for c in read_paths([SESSIONS]) if isinstance(c, Conversation)]
    assert len(convs) >= 4
    return convs


def _spans(store: Store) -> list[tuple]:
    """Every span as (name, parent name, kind, status, attributes without ids/times), sorted."""
    with store.reader() as r:
        rows = r.query("SELECT span_id, parent_span_id, name, kind, status_code, status_message, attributes "
                       "FROM spans WHERE name <> 'prunegate.tracer.stats'")
    import json

    names = {row["span_id"]: row["name"] for row in rows}
    out = []
    for row in rows:
        attrs = json.loads(row["attributes"])
        for key in ("prunegate.session.id", "session.id", "gen_ai.conversation.id", "prunegate.replay.seconds"):  # ids: new each run
            attrs.pop(key, None)
        for key in [k for k in attrs if "span_id" in k or "trace_id" in k]:  # other spans' ids: new each run
            attrs.pop(key)
        out.append((row["name"], names.get(row["parent_span_id"]), row["kind"], row["status_code"],
                    row["status_message"], json.dumps(attrs, sort_keys=True)))
    return sorted(out)


def _replay_all(provider, convs) -> None:
    for conv in convs:
        replay_session(conv, SPEC, tracer_provider=provider, capture_content=True)
    provider.force_flush()
    provider.shutdown()


def test_direct_and_sdk_spans_store_the_same_rows(tmp_path):
    convs = _conversations()
    direct = setup_tracing(tmp_path / "direct", otlp_endpoint=False)
    _replay_all(direct.provider, convs)

    sdk_store = Store(tmp_path / "sdk")
    sdk = TracerProvider(shutdown_on_exit=False)  # no direct flag: the SDK's own spans
    sdk.add_span_processor(ReliableSpanProcessor(StoreSink(sdk_store)))
    _replay_all(sdk, convs)

    a, b = _spans(direct.store), _spans(sdk_store)
    assert len(a) > 100
    assert {row[0] for row in a} >= {"prunegate.session", "prunegate.message", "prunegate.budget_check",
                                    "prunegate.prune", "prunegate.violation"}
    # the replay's ids and durations differ; everything else is the same span for span
    assert a == b


def test_direct_spans_only_on_prunegates_own_pipeline(tmp_path):
    tracing = setup_tracing(tmp_path / "s", otlp_endpoint=False)
    session = TracedSession(tracing.provider, SessionConfig(source="synthetic"))
    span = session.emit("prunegate.message", {"prunegate.event": "append"}, seq=1)
    assert isinstance(span, DirectSpan)
    session.end()

    # a user's processor on the same provider must see the SDK's span life cycle (on_start too)
    exporter = InMemorySpanExporter()
    tracing.provider.add_span_processor(SimpleSpanProcessor(exporter))
    session = TracedSession(tracing.provider, SessionConfig(source="synthetic"))
    span = session.emit("prunegate.message", {"prunegate.event": "append", "prunegate.message.call_ids": ["a"]},
                        seq=1)
    assert not isinstance(span, DirectSpan)
    session.end()
    got = {s.name: s for s in exporter.get_finished_spans()}
    assert got["prunegate.message"].attributes["prunegate.message.call_ids"] == ("a",)
    tracing.shutdown()

    # a user's own provider: standard SDK spans
    own = TracerProvider(shutdown_on_exit=False)
    own.add_span_processor(ReliableSpanProcessor(StoreSink(Store(tmp_path / "own"))))
    session = TracedSession(own, SessionConfig(source="synthetic"))
    assert not isinstance(session.emit("prunegate.message", {}, seq=1), DirectSpan)
    session.end()
    own.shutdown()


def test_direct_span_follows_the_sdk_status_and_attribute_rules(tmp_path):
    tracing = setup_tracing(tmp_path / "s", otlp_endpoint=False)
    session = TracedSession(tracing.provider, SessionConfig(source="synthetic"))
    span = session.start_span("prunegate.budget_check", {"a": None, "b": {1, 2}, "c": 1.5}, seq=3)
    assert isinstance(span, DirectSpan)
    odd = object()
    span.set_attribute("d", odd)  # not a valid attribute value: whatever the SDK makes of it
    span.set_attribute("e", [1, 2])  # set_attribute keeps ints, as the SDK does
    from opentelemetry.trace import Status, StatusCode

    span.set_status(Status(StatusCode.OK))
    span.set_status(Status(StatusCode.ERROR, "late"))  # OK is final
    child = session.start_span("prunegate.prune", {}, seq=3, parent=span)
    session.end_span(child)
    session.end_span(span)
    session.end()
    tracing.shutdown()
    with tracing.store.reader() as r:
        rows = {row["name"]: row for row in r.query("SELECT * FROM spans WHERE name <> 'prunegate.tracer.stats'")}
    import json

    check = rows["prunegate.budget_check"]
    attrs = json.loads(check["attributes"])
    from opentelemetry.attributes import BoundedAttributes

    assert sorted(attrs["b"]) == ["1", "2"] and attrs["c"] == 1.5 and "a" not in attrs
    assert attrs.get("d") == BoundedAttributes(attributes={"d": odd}).get("d")
    assert attrs["e"] == [1, 2]
    assert attrs["prunegate.seq"] == 3
    assert check["status_code"] == "OK"
    assert rows["prunegate.prune"]["parent_span_id"] == check["span_id"]
    assert check["parent_span_id"] == rows["prunegate.session"]["span_id"]
    assert len({row["trace_id"] for row in rows.values()}) == 1
