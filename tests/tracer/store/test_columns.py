"""The C accelerator of the record conversion (tracer/store/_columns.c) gives the Python path's tables.

Records here are real span records: written by a :class:`TracedSession` on ``setup_tracing``'s
pipeline and taken from its store processor as they end (what the store would convert).
"""

from __future__ import annotations

import json
import shutil
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.trace import SpanKind, Status, StatusCode

from tests.paths import SESSIONS
from tracer.contract.records import R_KIND, event_parts
from tracer.contract.settings import NO_ACCELERATOR_ENV
from tracer.lab import ReplaySpec, replay_session
from tracer.spans.session import SessionConfig, TracedSession
from tracer.spans.setup import setup_tracing
from tracer.store import rows
from tracer.store.schema import ARROW_SCHEMA
from tracer.traffic import Conversation, read_paths

ACCELERATOR = rows.ACCELERATOR
needs_accelerator = pytest.mark.skipif(ACCELERATOR is None, reason="tracer/store/_columns.c is not built here")


def test_the_accelerator_is_built_where_a_c_compiler_is():
    """The set-up builds it wherever there is a compiler (as on CI): its absence would leave every
    other test here skipped and tracing at the Python path's speed without anyone noticing."""
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler on this machine: the Python path is the only one")
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").is_file():
        pytest.skip("no Python headers (Python.h) on this machine: the Python path is the only one")
    assert ACCELERATOR is not None, "tracer.store._columns is not importable: run scripts/setup.sh again"


class Capture:
    """A session on prunegate's own pipeline whose store processor hands its records to a list."""

    def __init__(self, tmp: Path) -> None:
        self.tracing = setup_tracing(tmp / "s", otlp_endpoint=False, auto_compact=False)
        self.records: list[tuple] = []
        self.tracing.store_processor.on_end_record = self.records.append  # type: ignore[method-assign]  # the test takes the records

    def session(self) -> TracedSession:
        return TracedSession(self.tracing.provider, SessionConfig(source="synthetic", capture_content=True))

    def close(self) -> None:
        self.tracing.shutdown()


def both(records: list[tuple], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """(the Python path's table or exception type, the accelerated path's)."""
    out = []
    for accel in (None, ACCELERATOR):
        monkeypatch.setattr(rows, "ACCELERATOR", accel)
        try:
            out.append(rows.records_to_table(records))
        except Exception as exc:  # noqa: BLE001 - compared below: both paths fail alike
            out.append(type(exc))
    return out[0], out[1]


def fast_path(records: list[tuple]) -> Any:
    """What the accelerator makes of these records (None: it leaves them to the Python path)."""
    return ACCELERATOR.record_columns(records, rows.kind_pairs(records[0][R_KIND]), rows.SESSION_ATTRIBUTES, rows.SEQ_ATTRIBUTE,
                                      rows._PROMOTED_SPEC, rows._orjson.dumps, rows._context_of, rows._status_of)


def assert_same(py: Any, c: Any) -> None:
    if isinstance(py, type) or isinstance(c, type):
        assert py == c
        return
    assert c.schema.equals(ARROW_SCHEMA)
    for name in py.column_names:
        assert py[name].equals(c[name]), name
    assert py.equals(c)


@needs_accelerator
@pytest.mark.parametrize("detail", ["full", "checks", "decisions"])
def test_replayed_sessions_convert_to_the_same_table(tmp_path, monkeypatch, detail):
    """Every span a gated and an ungated replay write, with content captured, chunk by chunk, at each
    detail level (below ``full``, message events and unit closures are span events the C path writes)."""
    cap = Capture(tmp_path)
    convs = [c for c in read_paths([SESSIONS]) if isinstance(c, Conversation)]
    for conv in convs:
        for spec in (ReplaySpec("salience", gated=True, budget=300, stream_results=2, detail=detail),
                     ReplaySpec("recency", gated=False, budget=400, detail=detail)):
            replay_session(conv, spec, tracer_provider=cap.tracing.provider, capture_content=True)
    cap.close()
    records = cap.records
    assert len(records) > (500 if detail == "full" else 100)
    names = {r[0] for r in records}
    assert names >= {"prunegate.budget_check", "prunegate.prune"}
    assert ("prunegate.message" in names) == (detail == "full")
    assert any(r[0].startswith("chat ") for r in records)
    events = [event_parts(e) for r in records for e in r[10]]
    if detail != "full":  # the message events ride on the check spans (held events), content and all
        assert {name for name, _, _ in events} >= {"prunegate.message", "prunegate.unit.close"}
        assert any("prunegate.message.content" in attrs for _, _, attrs in events)
        assert all(type(e) is tuple for r in records if r[0] == "prunegate.budget_check" for e in r[10])
    monkeypatch.setattr(rows, "ACCELERATOR", ACCELERATOR)
    for i in range(0, len(records), 256):
        chunk = records[i:i + 256]
        assert fast_path(chunk) is not None  # the accelerator took these (no fallback to Python)
        assert_same(*both(chunk, monkeypatch))


class _Str(str):
    pass


# Values of every kind an attribute dict may hold, the odd ones included
TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12) | st.sampled_from(
    ["", "\x00\x1f\x7f", "\"\\/", "é\u2028😀", "\ud800", "replay-1"])  # "\ud800": not UTF-8 (Python path)
INTS = st.integers(-(2**63), 2**63 - 1) | st.sampled_from([2**63, 2**64, -(2**63) - 1, 2**70])
SCALARS = TEXT | INTS | st.booleans() | st.floats() | st.none()
VALUES = (SCALARS | st.lists(TEXT, max_size=3) | st.lists(SCALARS, max_size=3) | st.tuples(TEXT, INTS)
          | st.frozensets(TEXT, max_size=2) | st.dictionaries(TEXT, INTS, max_size=2)
          | st.builds(_Str, TEXT) | st.binary(max_size=3))
KNOWN_KEYS = st.sampled_from(["prunegate.session.id", "gen_ai.conversation.id", "prunegate.seq", "prunegate.policy",
                              "prunegate.gated", "prunegate.budget", "prunegate.decision", "prunegate.tokens.before",
                              "prunegate.violation.code", "prunegate.session.source", "k", "é"])
KEYS = KNOWN_KEYS | TEXT
DICTS = st.dictionaries(KEYS, VALUES, max_size=6)


EXTRAS = st.sampled_from(["", "error", "event", "link", "child", "client", "session"])


# what attributes usually hold (the fast path's values, keys that are UTF-8 text, a session id that is one
# value), so that most examples reach the C path; the odd values have their own test below
PLAIN_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
PLAIN = (PLAIN_TEXT | st.integers(-(2**63), 2**63 - 1) | st.booleans() | st.floats(allow_nan=False) | st.none()
         | st.lists(PLAIN_TEXT, max_size=3))
SESSION_KEYS = ("prunegate.session.id", "gen_ai.conversation.id")
PLAIN_DICTS = st.dictionaries(KNOWN_KEYS | PLAIN_TEXT, PLAIN, max_size=6).map(
    lambda d: {k: (",".join(v) if k in SESSION_KEYS and isinstance(v, list) else v) for k, v in d.items()})
C_PATH_SHARE = 0.6  # at least this share of the plain examples must be converted by the accelerator


def spans_of(dicts: st.SearchStrategy, values: st.SearchStrategy) -> st.SearchStrategy:
    """1 to 6 spans: (attributes at start or emit, started?, attributes set later, an extra)."""
    return st.lists(st.tuples(dicts, st.booleans(), st.dictionaries(st.sampled_from(["a", "b"]), values, max_size=2),
                              EXTRAS), min_size=1, max_size=6)


def convert_both_ways(spans: list[tuple], tmp: Path, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Write ``spans`` through a real session (with an error status, an event, a link, a parent, a
    client kind or another session's root as ``extra`` says); assert both paths give the same
    table or the same error. True when the accelerator converted the records."""
    cap = Capture(tmp)
    s = cap.session()
    other = cap.session()
    for attrs, started, later, extra in spans:
        session = other if extra == "session" else s
        if started or extra in ("error", "event", "link", "child", "client"):
            parent = session.start_span("p", {}, seq=1) if extra == "child" else None
            span = session.start_span("x", attrs, seq=None, parent=parent,
                                      kind=SpanKind.CLIENT if extra == "client" else SpanKind.INTERNAL)
            span.set_attributes({k: v for k, v in later.items() if v is not None})
            if extra == "error":
                span.set_status(Status(StatusCode.ERROR, "it failed: \n\"quoted\""))
            elif extra == "event":
                span.add_event("e", {"k": "v"}, timestamp=5)
            elif extra == "link":
                span.add_link(other.root.get_span_context(), {"why": "test"})
            session.end_span(span)
            if parent is not None:
                session.end_span(parent)
        else:
            session.emit("y", attrs, seq=3)
    s.end()
    other.end()
    cap.close()
    monkeypatch.setattr(rows, "ACCELERATOR", ACCELERATOR)
    accelerated = fast_path(cap.records) is not None
    assert_same(*both(cap.records, monkeypatch))
    return accelerated


@needs_accelerator
def test_any_attributes_convert_to_the_same_table(tmp_path_factory, monkeypatch, record_property):
    """Emitted spans (attributes cleaned later, with the record) and spans with attributes set after
    start (cleaned by the SDK's rule at once), with an error status, an event, a link, a parent, a
    client kind or another session's root now and then, holding the values attributes usually
    hold: the same table from both paths. The C path is what is exercised: at least
    :data:`C_PATH_SHARE` of the examples are converted by the accelerator (measured, and reported
    as the ``c_path_share`` property and on stdout, which ``pytest -rA`` shows)."""
    seen = {"examples": 0, "c_path": 0}

    @settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(spans_of(PLAIN_DICTS, PLAIN))
    def check(spans):
        seen["examples"] += 1
        seen["c_path"] += convert_both_ways(spans, tmp_path_factory.mktemp("c"), monkeypatch)

    check()
    share = seen["c_path"] / seen["examples"]
    record_property("c_path_share", round(share, 3))
    print(f"C path share: {seen['c_path']} of {seen['examples']} examples ({share:.0%})")
    assert seen["examples"] >= 100
    assert share >= C_PATH_SHARE, seen


@needs_accelerator
def test_odd_attributes_convert_to_the_same_table_or_fail_alike(tmp_path_factory, monkeypatch):
    """Whatever an attribute holds (text that is not UTF-8, integers past 64 bits, NaN, tuples, sets,
    dicts, bytes, str subclasses, a list as the session id): the same table, or the same error, from
    both paths; most of these go the Python way (the fallback), which is what this test is for."""

    seen = {"examples": 0, "python": 0}

    @settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(spans_of(DICTS, VALUES))
    def check(spans):
        seen["examples"] += 1
        seen["python"] += not convert_both_ways(spans, tmp_path_factory.mktemp("o"), monkeypatch)

    check()
    print(f"fallback share: {seen['python']} of {seen['examples']} examples")
    assert seen["examples"] >= 50
    assert seen["python"] >= 0.3 * seen["examples"], seen  # the fallback is what this test exercises


@needs_accelerator
def test_records_past_the_fast_path_convert_by_python_to_the_same_table(tmp_path, monkeypatch):
    """More root contexts than the accelerator keeps apart (64): the chunk goes the Python way, to the
    same table. A root with a trace state stays on the fast path."""
    from opentelemetry.trace import SpanContext, TraceFlags, TraceState

    cap = Capture(tmp_path)
    for i in range(70):
        cap.session().emit("m", {"i": i}, seq=1)
    cap.close()
    chunk = [r for r in cap.records if r[0] == "m"]
    assert fast_path(chunk) is None
    assert fast_path(chunk[:60]) is not None
    assert_same(*both(chunk, monkeypatch))
    root = chunk[0][11]
    stated = SpanContext(root.trace_id, root.span_id, False, TraceFlags(1), TraceState([("vendor", "x")]))
    odd = [*chunk[:3], (*chunk[3][:11], stated, chunk[3][12])]
    assert fast_path(odd) is not None
    py, c = both(odd, monkeypatch)
    assert_same(py, c)
    assert c["trace_state"].to_pylist() == [None, None, None, "vendor=x"]


@needs_accelerator
@pytest.mark.parametrize("odd", [{"x"}, {"n": 1}, _Str("s"), "\ud800", 2**64, b"b", [1, "a"]])
def test_a_value_off_the_fast_path_sends_the_chunk_to_python(tmp_path, monkeypatch, odd):
    cap = Capture(tmp_path)
    s = cap.session()
    for i in range(5):
        s.emit("m", {"v": odd if i == 3 else "plain", "i": i}, seq=i)
    cap.close()
    recs = cap.records
    assert fast_path(recs) is None
    py, c = both(recs, monkeypatch)
    assert_same(py, c)
    stored = [json.loads(a) for a in c["attributes"].to_pylist()]
    assert [a["i"] for a in stored if a.get("i") is not None] == [0, 1, 2, 3, 4]


@needs_accelerator
def test_span_events_convert_in_c_to_the_python_paths_json(tmp_path, monkeypatch):
    """Span events (held message events below ``full``, SDK events added to a span) as the Python path
    writes them, escapes, floats, lists and all; an event the C path does not read (attributes not a
    plain dict, a timestamp that is no int, an odd value, a tuple of another shape) sends the chunk to
    Python, to the same table."""
    from opentelemetry.attributes import BoundedAttributes
    from opentelemetry.sdk.trace import Event

    cap = Capture(tmp_path)
    s = TracedSession(cap.tracing.provider, SessionConfig(source="synthetic", detail="checks"))
    for i in range(3):
        s.hold_clean("prunegate.message", {"k": "v\n\"q\" é😀", "n": i, "f": 0.1 * i, "b": i == 1,
                                           "ids": ("a", "b"), "nums": (1, 2)}, seq=i)
        s.emit("prunegate.budget_check", {"i": i}, seq=i, events=s.take_held())
    span = s.start_span("x", {}, seq=4)
    span.add_event("e", {"k": "v", "l": [1.5, 2.5]}, timestamp=7)
    span.add_event("none")
    s.end_span(span)
    s.end()
    cap.close()
    recs = cap.records
    assert sum(len(r[10]) for r in recs) == 5
    assert fast_path(recs) is not None
    py, c = both(recs, monkeypatch)
    assert_same(py, c)
    stored = [json.loads(e) for e in c["events"].to_pylist()]
    assert [e["attributes"]["n"] for ev in stored for e in ev if e["name"] == "prunegate.message"] == [0, 1, 2]
    assert [ev for ev in stored if ev and ev[0]["name"] == "e"][0][0] == {
        "name": "e", "time_ns": 7, "attributes": {"k": "v", "l": [1.5, 2.5]}}
    rec = next(r for r in recs if r[10])
    assert all(type(e) is tuple for e in rec[10])  # held events
    in_c = (Event("m", {"k": "v"}, 5), Event("m", None, 5), ("m", 5, {"k": ("a", 1.5)}))
    in_python = (Event("m", BoundedAttributes(attributes={"k": "v"}), 5), Event("m", {"k": "v"}, 5.0),
                 Event("m", {"k": {"nested": 1}}, 5), Event("m", {"k": "\ud800"}, 5), ("m", 5.0, {"k": "v"}),
                 ("m", 5, [("k", "v")]))
    for odd in (*in_c, *in_python):
        chunk = [*recs[:1], (*rec[:10], (*rec[10], odd), *rec[11:])]
        assert (fast_path(chunk) is not None) == (odd in in_c), odd
        assert_same(*both(chunk, monkeypatch))


@needs_accelerator
def test_span_ids_at_the_limits(tmp_path, monkeypatch):
    """Ids as 16 hex digits up to 2**64 - 1 (a root's parent null); an id past 64 bits, negative or
    not an int sends the chunk to the Python path, to the same table."""
    cap = Capture(tmp_path)
    s = cap.session()
    for i in range(4):
        s.emit("m", {"i": i}, seq=i)
    s.end()
    cap.close()
    recs = cap.records
    edge = [(*recs[0][:1], 2**64 - 1, *recs[0][2:]), (*recs[1][:1], 1, 0, *recs[1][3:]), *recs[2:]]
    assert fast_path(edge) is not None
    py, c = both(edge, monkeypatch)
    assert_same(py, c)
    assert c["span_id"].to_pylist()[:2] == ["f" * 16, "0" * 15 + "1"]
    assert c["parent_span_id"].to_pylist()[1] == "0" * 16
    assert c["parent_span_id"].to_pylist()[-1] is None  # the session's root
    for bad in (2**64, -1, 1.0, "1", True):
        odd = [(*recs[0][:1], bad, *recs[0][2:]), *recs[1:]]
        assert fast_path(odd) is None
        assert_same(*both(odd, monkeypatch))


@needs_accelerator
def test_without_the_accelerator_the_store_holds_the_same_rows(tmp_path, monkeypatch):
    """``PRUNEGATE_NO_ACCELERATOR`` set: no C; spans read back from a real store are the same."""
    monkeypatch.setenv(NO_ACCELERATOR_ENV, "1")
    assert rows._accelerator() is None
    monkeypatch.delenv(NO_ACCELERATOR_ENV)
    assert rows._accelerator() is ACCELERATOR
    conv = next(c for c in read_paths([SESSIONS]) if isinstance(c, Conversation))
    got = []
    for accel in (None, ACCELERATOR):
        monkeypatch.setattr(rows, "ACCELERATOR", accel)
        tracing = setup_tracing(tmp_path / f"s{accel is None}", otlp_endpoint=False)
        replay_session(conv, ReplaySpec("recency", gated=True, budget=300), tracer_provider=tracing.provider)
        tracing.force_flush()
        with tracing.store.reader() as r:
            found = r.query("SELECT name, attributes, session_id, seq, source, policy, gated, budget, decision, "
                            "reason, tokens_before, tokens_after, violation FROM spans "
                            "WHERE name <> 'prunegate.tracer.stats'")
        tracing.shutdown()
        for row in found:  # the replay's session id and duration are new each run
            attrs = json.loads(row.pop("attributes"))
            assert row.pop("session_id") == attrs.pop("prunegate.session.id")
            for key in ("gen_ai.conversation.id", "session.id", "prunegate.replay.seconds"):
                attrs.pop(key, None)
            for key in [k for k in attrs if "span_id" in k or "trace_id" in k]:  # other spans' ids
                attrs.pop(key)
            row["attributes"] = json.dumps(attrs, sort_keys=True)
        got.append(sorted(json.dumps(row, sort_keys=True) for row in found))
    assert len(got[0]) > 20
    assert got[0] == got[1]


def test_an_older_build_of_the_accelerator_is_not_used(monkeypatch, caplog):
    """A ``_columns`` built before the module that reads it (another ``API``): the Python path, said
    once, rather than a result of the wrong shape on every chunk."""
    import types

    old = types.ModuleType("tracer.store._columns")
    old.record_columns = lambda *args: None  # type: ignore[attr-defined]  # the old build's function, no API
    monkeypatch.setitem(sys.modules, "tracer.store._columns", old)
    with caplog.at_level("WARNING", logger="tracer.store.rows"):
        assert rows._accelerator() is None
    assert any("older build" in r.getMessage() for r in caplog.records)
    old.API = rows.ACCELERATOR_API  # type: ignore[attr-defined]  # the same API: used
    assert rows._accelerator() is old


class _Broken:
    """An accelerator whose every function raises (a fault in compiled code, as far as Python sees)."""

    def __getattr__(self, name: str) -> Any:
        def fail(*args: Any) -> None:
            raise MemoryError("injected")

        return fail


def test_an_accelerator_that_fails_costs_speed_not_spans(tmp_path, monkeypatch, caplog):
    cap = Capture(tmp_path)
    s = cap.session()
    for i in range(40):
        s.emit("m", {"i": i}, seq=i)
    cap.close()
    monkeypatch.setattr(rows, "ACCELERATOR", None)
    expected = rows.records_to_table(cap.records)
    monkeypatch.setattr(rows, "ACCELERATOR", _Broken())
    monkeypatch.setattr(rows, "_accelerator_failed", False)
    with caplog.at_level("WARNING", logger="tracer.store.rows"):
        assert rows.records_to_table(cap.records).equals(expected)
        assert rows.records_to_table(cap.records).equals(expected)
    warned = [r for r in caplog.records if "C accelerator failed" in r.getMessage()]
    assert len(warned) == 1 and "injected" in warned[0].getMessage()


@needs_accelerator
def test_text_needing_escapes_anywhere_converts_to_the_same_table(tmp_path, monkeypatch):
    """The C path scans text 8 bytes at a time for characters JSON must escape: a quote, a backslash,
    a control character or non-ASCII text at every position of strings around those steps (as a key,
    a value, a list item and in a span event) gives the table the Python path gives."""
    cap = Capture(tmp_path)
    s = cap.session()
    specials = ['"', "\\", "\n", "\x00", "\x1f", "\x7f", "é", " ", "~"]
    for n in range(1, 26):
        for i in range(n):
            for ch in specials:
                text = "a" * i + ch + "b" * (n - i - 1)
                s.emit("m", {text: text, "l": [text, "x"]}, seq=1, events=(("e", 5, {text: text}),))
    s.end()
    cap.close()
    for k in range(0, len(cap.records), 256):
        chunk = cap.records[k:k + 256]
        assert fast_path(chunk) is not None
        assert_same(*both(chunk, monkeypatch))
