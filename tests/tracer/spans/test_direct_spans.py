"""Direct spans (tracer.spans.direct) store exactly what the SDK's spans store, and only where allowed."""

from __future__ import annotations

import re

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.paths import SESSIONS
from tracer.lab import ReplaySpec, replay_session
from tracer.spans import (
    DirectSpan,
    EndedSpan,
    ReliableSpanProcessor,
    SessionConfig,
    TracedSession,
    setup_tracing,
)
from tracer.store import Store
from tracer.store.sink import StoreSink
from tracer.traffic import Conversation, read_paths

SPEC = ReplaySpec("recency", gated=False, budget=400, stream_results=2)


def _conversations() -> list[Conversation]:
    convs = [c for c in read_paths([SESSIONS]) if isinstance(c, Conversation)]
    assert len(convs) >= 4
    return convs


def _spans(store: Store) -> list[tuple]:
    """Every span as (name, parent name, kind, status, attributes without ids/times, seq, the promoted
    columns), sorted."""
    from tracer.store.schema import PROMOTED_NAMES

    with store.reader() as r:
        rows = r.query("SELECT span_id, parent_span_id, name, kind, status_code, status_message, attributes, events, seq, "
                       f"session_id IS NOT NULL AS has_session, {', '.join(PROMOTED_NAMES)} "
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
        text = re.sub(r"replay-[0-9a-f]{16}", "replay-?", json.dumps(attrs, sort_keys=True))  # ids inside values
        events = json.dumps([(e["name"], e["attributes"]) for e in json.loads(row["events"])])  # times: new each run
        out.append((row["name"], names.get(row["parent_span_id"]), row["kind"], row["status_code"],
                    row["status_message"], text, events, row["seq"], row["has_session"],
                    tuple(row[c] for c in PROMOTED_NAMES)))
    return sorted(out)


def _replay_all(provider, convs, specs) -> None:
    for conv in convs:
        for spec in specs:
            replay_session(conv, spec, tracer_provider=provider, capture_content=True)
    provider.force_flush()
    provider.shutdown()


@pytest.mark.parametrize("specs", [
    [SPEC],
    [ReplaySpec("salience", gated=True, budget=300, hard_ceiling=900, stream_results=3, seed=7),
     ReplaySpec("head_tail", gated=True, budget=500)],
    [ReplaySpec("recency", gated=True, budget=300, stream_results=2, detail="checks"),
     ReplaySpec("salience", gated=False, budget=400, detail="decisions")],
], ids=["ungated-recency", "gated-salience-head_tail", "held-events"])
def test_direct_and_sdk_spans_store_the_same_rows(tmp_path, specs):
    """Span records (prunegate's own pipeline) and the SDK's spans (any other provider, the code path
    that existed before records) store the same names, parents, kinds, statuses, attributes and span
    events (below ``full``: held events on records, the SDK's own events on its spans)."""
    convs = _conversations()
    direct = setup_tracing(tmp_path / "direct", otlp_endpoint=False)
    _replay_all(direct.provider, convs, specs)

    sdk_store = Store(tmp_path / "sdk")
    sdk = TracerProvider(shutdown_on_exit=False)  # no direct flag: the SDK's own spans
    sdk.add_span_processor(ReliableSpanProcessor(StoreSink(sdk_store)))
    _replay_all(sdk, convs, specs)

    a, b = _spans(direct.store), _spans(sdk_store)
    assert len(a) > 100
    if specs[0].detail == "full":
        assert {row[0] for row in a} >= {"prunegate.session", "prunegate.message", "prunegate.budget_check",
                                        "prunegate.unit.close"}
    else:
        assert "prunegate.message" not in {row[0] for row in a}
        assert sum(row[6].count('"prunegate.message"') for row in a) > 100  # as span events
    assert {row[0] for row in a} & {"prunegate.prune", "prunegate.spill", "prunegate.defer"}
    # the replay's ids and durations differ; everything else is the same span for span
    assert a == b


def test_direct_spans_only_on_prunegates_own_pipeline(tmp_path):
    tracing = setup_tracing(tmp_path / "s", otlp_endpoint=False)
    session = TracedSession(tracing.provider, SessionConfig(source="synthetic"))
    span = session.emit("prunegate.message", {"prunegate.event": "append"}, seq=1)
    assert isinstance(span, EndedSpan) and not span.is_recording()  # written as a record at once
    assert span.get_span_context().trace_id == session.root.get_span_context().trace_id
    assert isinstance(session.root, DirectSpan)
    session.end()

    # a user's processor on the same provider must see the SDK's span life cycle (on_start too)
    exporter = InMemorySpanExporter()
    tracing.provider.add_span_processor(SimpleSpanProcessor(exporter))
    session = TracedSession(tracing.provider, SessionConfig(source="synthetic"))
    span = session.emit("prunegate.message", {"prunegate.event": "append", "prunegate.message.call_ids": ["a"]},
                        seq=1)
    assert not isinstance(span, (DirectSpan, EndedSpan))
    session.end()
    got = {s.name: s for s in exporter.get_finished_spans()}
    assert got["prunegate.message"].attributes["prunegate.message.call_ids"] == ("a",)
    tracing.shutdown()

    # a user's own provider: standard SDK spans
    own = TracerProvider(shutdown_on_exit=False)
    own.add_span_processor(ReliableSpanProcessor(StoreSink(Store(tmp_path / "own"))))
    session = TracedSession(own, SessionConfig(source="synthetic"))
    assert not isinstance(session.emit("prunegate.message", {}, seq=1), (DirectSpan, EndedSpan))
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


def test_exporters_behind_prunegates_pipeline_get_standard_sdk_spans(tmp_path):
    """Span records reach a sink that takes SDK spans (OTLP) as ordinary ReadableSpans."""
    from opentelemetry.sdk.trace import ReadableSpan

    from tracer.spans.pipeline import ExporterSink

    tracing = setup_tracing(tmp_path / "s", otlp_endpoint=False)
    exporter = InMemorySpanExporter()
    tracing.provider.add_span_processor(ReliableSpanProcessor(ExporterSink(exporter)))
    session = TracedSession(tracing.provider, SessionConfig(source="synthetic"))
    check = session.start_span("prunegate.budget_check", {"prunegate.check": 1, "x": None}, seq=2)
    assert isinstance(check, DirectSpan)  # still records: every processor is prunegate's
    decision = session.start_span("prunegate.prune", {"prunegate.pruned.ids": ["m1", 2]}, seq=2, parent=check)
    session.end_span(decision, {"prunegate.references.lost": 3})
    session.end_span(check)
    session.emit("prunegate.message", {"prunegate.message.call_ids": ["c1"]}, seq=3, error="boom")
    session.end()
    tracing.force_flush()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    tracing.shutdown()
    assert set(spans) == {"prunegate.session", "prunegate.budget_check", "prunegate.prune", "prunegate.message"}
    assert all(type(s) is ReadableSpan for s in spans.values())
    root = spans["prunegate.session"]
    assert root.parent is None
    assert {s.context.trace_id for s in spans.values()} == {root.context.trace_id}
    assert spans["prunegate.budget_check"].parent.span_id == root.context.span_id
    assert spans["prunegate.prune"].parent.span_id == spans["prunegate.budget_check"].context.span_id
    assert spans["prunegate.prune"].attributes["prunegate.pruned.ids"] == ("m1", "2")
    assert spans["prunegate.prune"].attributes["prunegate.references.lost"] == 3
    assert "x" not in spans["prunegate.budget_check"].attributes
    assert spans["prunegate.message"].status.status_code.name == "ERROR"
    assert spans["prunegate.message"].status.description == "boom"
    assert spans["prunegate.message"].end_time > spans["prunegate.message"].start_time
    assert root.resource is tracing.provider.resource


def test_exporters_get_held_events_as_sdk_events(tmp_path):
    """Below ``full``, a check span's message events are held as plain tuples on the record; a sink
    that takes SDK spans gets them as OTel Events with the same names, times and attributes."""
    from opentelemetry.sdk.trace import Event

    from tracer.spans.pipeline import ExporterSink

    tracing = setup_tracing(tmp_path / "s", otlp_endpoint=False)
    exporter = InMemorySpanExporter()
    tracing.provider.add_span_processor(ReliableSpanProcessor(ExporterSink(exporter)))
    records: list[tuple] = []
    tracing.store_processor.on_end_record = records.append  # type: ignore[method-assign]  # the test takes the records
    session = TracedSession(tracing.provider, SessionConfig(source="synthetic", detail="checks"))
    session.hold_clean("prunegate.message", {"prunegate.message.id": "m1", "prunegate.message.call_ids": ("c1",)}, seq=1)
    session.hold("prunegate.unit.close", {"prunegate.unit.id": "u1", "prunegate.unit.message_ids": ["m1"], "n": None}, seq=2)
    session.emit("prunegate.budget_check", {"prunegate.check": 1}, seq=2, events=session.take_held())
    session.end()
    tracing.force_flush()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    tracing.shutdown()
    held = next(r for r in records if r[0] == "prunegate.budget_check")[10]
    assert [type(e) for e in held] == [tuple, tuple]
    events = spans["prunegate.budget_check"].events
    assert all(type(e) is Event for e in events)
    assert [(e.name, e.timestamp, dict(e.attributes)) for e in events] == [(n, t, a) for n, t, a in held]
    assert [dict(e.attributes) for e in events] == [
        {"prunegate.message.id": "m1", "prunegate.message.call_ids": ("c1",), "prunegate.seq": 1},
        {"prunegate.unit.id": "u1", "prunegate.unit.message_ids": ("m1",), "prunegate.seq": 2}]
    assert events[0].timestamp < events[1].timestamp


class _Str(str):
    """A str subclass: not a plain str, so the chunk check must leave it to the exact rule."""


@pytest.mark.parametrize("odd", [
    None, {"x", "y"}, [1, 2], (True, 3.5), {"nested": 1}, _Str("sub"), [_Str("a")], b"bytes", frozenset({"z"}),
])
def test_a_chunk_is_cleaned_as_each_record_would_be(odd):
    """clean_chunk's C-level test over a whole chunk gives, as JSON, exactly what cleaning each
    record's attributes one by one gives, with one odd value anywhere in the chunk."""
    from tracer.spans.records import clean_attributes, clean_chunk
    from tracer.store.rows import dumps  # the store's own JSON encoding

    chunk = [{"s": "a", "i": 1, "b": True, "f": 0.5, "l": ["x", "y"], "t": ("u",), "n": None} for _ in range(5)]
    chunk.append({"plain": "only"})
    chunk[3] = {**chunk[3], "odd": odd}
    got = clean_chunk(chunk)
    assert [dumps(d) for d in got] == [dumps(clean_attributes(d)) for d in chunk]
    assert all("n" not in d for d in got)
    assert chunk[0]["n"] is None  # the records' own dicts are not changed


@pytest.mark.parametrize("value", [
    ["a", "b"], ("x",), [], [1, 2], [1.0, 2.5], [True, False], [1, True], ["a", 1], [None, "a"], ["a", None],
    [[1]], {"a": 1}, [1, 2**70], b"x", None, "s", 3, 2.5, False])
def test_put_sdk_keeps_what_the_sdk_keeps(value: object) -> None:
    """put_sdk's shortcut for lists of one scalar type stores exactly what BoundedAttributes would."""
    from opentelemetry.attributes import BoundedAttributes

    from tracer.spans.direct import put_sdk

    want = dict(BoundedAttributes(attributes={"k": value}))
    got = put_sdk({}, {"k": value})
    assert got == want and [type(v) for v in got.values()] == [type(v) for v in want.values()]
