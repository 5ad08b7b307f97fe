"""Stores for the dashboard tests and bench, filled with real spans.

``ScriptedSession`` writes the spans of docs/spans.md one by one through the tracer's own
:class:`~tracer.spans.session.TracedSession` (a real OpenTelemetry SDK provider; the finished spans go
through the store's own Arrow conversion into a segment), so tests know the exact answer of every
query. ``orphan_session`` is the source document's first failure (a parallel batch whose assistant
turn a salience policy evicts, orphan results, a 400 and a duplicated side effect); its third tool
result holds HTML and a ``<script>`` so every page can be checked to render recorded content as text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link

from tracer.spans import SessionConfig, TracedSession
from tracer.store import Store
from tracer.store.rows import spans_to_table

HOSTILE = "<script>alert(1)</script> and <b>bold</b>"


@contextmanager
def recording(store_path: Path) -> Iterator[TracerProvider]:
    """A tracer provider whose finished spans land in ``store_path`` as one segment at exit."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    try:
        yield provider
    finally:
        provider.force_flush()
        spans = exporter.get_finished_spans()
        if spans:
            Store(store_path).write_table(spans_to_table(list(spans)), fsync=False)
        provider.shutdown()


class ScriptedSession:
    """Emits a session's spans by hand, keeping the context's token count and event counter."""

    def __init__(self, ts: TracedSession, *, budget: int, hard_ceiling: int | None = None,
                 gated: bool = True, policy: str = "salience") -> None:
        self.ts = ts
        self.seq = 0
        self.tokens = 0
        self.budget = budget
        self.hard_ceiling = hard_ceiling
        self.gated = gated
        self.policy = policy
        self.checks = 0
        self.messages: dict[str, dict[str, Any]] = {}

    def step(self) -> int:
        self.seq += 1
        return self.seq

    def message(self, event: str, mid: str, *, role: str | None = None, unit: str | None = None,
                tokens: int | None = None, closed: bool = True, call_ids: Sequence[str] = (),
                answers: Sequence[str] = (), tool_names: Sequence[str] = (), cause: str | None = None,
                content: Any = None, seq: int | None = None) -> None:
        """One ``prunegate.message`` span; ``append``/``open`` take a new step, others may share one."""
        if event in ("append", "open", "delta", "close") and seq is None:
            seq = self.step()
        seq = self.seq if seq is None else seq
        m = self.messages.setdefault(mid, {"role": role, "unit": unit or mid, "tokens": 0,
                                           "call_ids": list(call_ids), "answers": list(answers),
                                           "tool_names": list(tool_names)})
        if unit:
            m["unit"] = unit
        present_before = m.get("present", False)
        if event == "remove":
            self.tokens -= m["tokens"] if present_before else 0
            m["present"] = False
        else:
            new_tokens = m["tokens"] if tokens is None else tokens
            self.tokens += new_tokens - (m["tokens"] if present_before else 0)
            m["tokens"] = new_tokens
            m["present"] = True
        attrs = {
            "prunegate.event": event,
            "prunegate.message.id": mid,
            "prunegate.message.role": m["role"],
            "prunegate.unit.id": m["unit"],
            "prunegate.message.tokens": m["tokens"],
            "prunegate.context.tokens": self.tokens,
            "prunegate.message.closed": closed,
            "prunegate.message.call_ids": m["call_ids"],
            "prunegate.message.answers": m["answers"],
            "prunegate.message.tool_names": m["tool_names"],
            "prunegate.message.cause": cause,
            "prunegate.message.content": json.dumps(content) if content is not None else None,
        }
        self.ts.emit("prunegate.message", attrs, seq=seq)

    def unit_close(self, uid: str, kind: str, message_ids: Sequence[str], call_ids: Sequence[str] = ()) -> None:
        self.ts.emit("prunegate.unit.close", {
            "prunegate.unit.id": uid, "prunegate.unit.kind": kind,
            "prunegate.unit.tokens": sum(self.messages[m]["tokens"] for m in message_ids),
            "prunegate.unit.message_ids": list(message_ids), "prunegate.unit.call_ids": list(call_ids),
        }, seq=self.seq)

    def check(self, decision: str, *, reason: str = "", child: str | None = None,
              child_attrs: dict[str, Any] | None = None, remove: Sequence[str] = (),
              cause: str | None = None) -> Any:
        """A budget check at a new step, with its decision span; ``remove`` lists evicted ids."""
        seq = self.step()
        self.checks += 1
        before = self.tokens
        check = self.ts.start_span("prunegate.budget_check", {}, seq=seq)
        child_span = None
        if child is not None:
            child_span = self.ts.start_span(child, {"prunegate.gated": self.gated, **(child_attrs or {})},
                                            seq=seq, parent=check)
        for mid in remove:
            self.message("remove", mid, seq=seq, cause=cause or f"pruned by check #{self.checks} ({self.policy})")
        if child_span is not None:
            child_span.set_attribute("prunegate.tokens.before", before)
            child_span.set_attribute("prunegate.tokens.after", self.tokens)
            child_span.end(end_time=self.ts.clock())
            if remove:
                self.ts.note_eviction(child_span, [(m, self.messages[m]["call_ids"]) for m in remove],
                                      check=self.checks, decision=child)
        check.set_attributes({
            "prunegate.check": self.checks, "prunegate.decision": decision, "prunegate.reason": reason,
            "prunegate.tokens.before": before, "prunegate.tokens.after": self.tokens,
            "prunegate.budget": self.budget, "prunegate.gated": self.gated,
            "prunegate.pending_calls": 0, "prunegate.open_messages": 0,
            **({"prunegate.hard_ceiling": self.hard_ceiling} if self.hard_ceiling else {}),
        })
        check.end(end_time=self.ts.clock())
        return child_span


def orphan_session(provider: TracerProvider, *, session_id: str = "s-orphan",
                   name: str = "lisbon-trip.json") -> dict[str, Any]:
    """The source document's failure 1 under an ungated salience policy. Returns the ids to expect."""
    ts = TracedSession(provider, SessionConfig(session_id=session_id, source="replay", name=name,
                       provider="anthropic", policy="salience", gated=False, budget=100,
                       capture_content=True, source_id="s-recorded"))
    s = ScriptedSession(ts, budget=100, gated=False)
    s.message("append", "m1", role="system", unit="u1", tokens=10, content=[{"type": "text", "text": "Be a travel agent."}])
    s.unit_close("u1", "system", ["m1"])
    s.message("append", "m2", role="user", unit="u2", tokens=20, content=[{"type": "text", "text": "Plan Lisbon."}])
    s.unit_close("u2", "user", ["m2"])
    s.message("append", "m3", role="assistant", unit="u3", tokens=50, call_ids=["c1", "c2", "c3"],
              tool_names=["get_weather", "search_hotels", "book_flight"],
              content=[{"type": "text", "text": "Checking three things: " + HOSTILE}])
    for cid, name in (("c1", "get_weather"), ("c2", "search_hotels"), ("c3", "book_flight")):
        with ts.tool(name, cid, arguments={"city": "Lisbon"}, side_effect=name == "book_flight", seq=s.seq):
            pass
    s.message("append", "m4", role="tool", unit="u3", tokens=30, answers=["c1"],
              content=[{"type": "tool_result", "tool_use_id": "c1", "content": "sunny"}])
    prune = s.check("pruned", reason="over_budget", child="prunegate.prune", child_attrs={
        "prunegate.policy": "salience", "prunegate.proposal.ids": ["m3"],
        "prunegate.scores": json.dumps({"u3": 0.12, "u2": 0.8}), "prunegate.pruned.units": ["u3"],
        "prunegate.pruned.ids": ["m3"], "prunegate.budget_met": True,
    }, remove=["m3"])
    s.message("append", "m5", role="tool", unit="m5", tokens=30, answers=["c2"],
              content=[{"type": "tool_result", "tool_use_id": "c2", "content": "Hotel Avenida"}])
    s.message("append", "m6", role="tool", unit="m6", tokens=30, answers=["c3"],
              content=[{"type": "tool_result", "tool_use_id": "c3", "content": HOSTILE}])
    seq = s.step()
    # The model call after the eviction: the real validator finds the orphans, the session links
    # each violation to the prune that evicted their assistant turn.
    body = {"model": "claude-test", "max_tokens": 100, "system": "Be a travel agent.", "messages": [
        {"role": "user", "content": "Plan Lisbon."},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": "sunny"},
            {"type": "tool_result", "tool_use_id": "c2", "content": "Hotel Avenida"},
            {"type": "tool_result", "tool_use_id": "c3", "content": HOSTILE},
        ]},
    ]}
    chat = ts.chat("claude-test", seq=seq, attributes={"prunegate.request.message_ids": ["m1", "m2", "m4", "m5", "m6"]})
    found = ts.check_request(body, "anthropic", seq=seq,
                             message_ids_of=lambda ids: [m for m in ("m4", "m5", "m6")
                                                         if set(s.messages[m]["answers"]) & set(ids)])
    chat.set_invalid(found)
    chat.error(found[0].message, status_code=400)
    seq = s.step()
    with ts.tool("book_flight", "c3", arguments={"city": "Lisbon"}, side_effect=True, seq=seq) as call:
        call.result(HOSTILE)
    ts.end()
    return {"session_id": session_id, "prune_span_id": f"{prune.get_span_context().span_id:016x}",
            "prune_seq": 5, "max_seq": s.seq}


def gated_session(provider: TracerProvider, *, session_id: str = "s-gated") -> dict[str, Any]:
    """A gated session: a deferral while a call is pending, a stream, then a spill under the ceiling."""
    ts = TracedSession(provider, SessionConfig(session_id=session_id, source="replay", name="lisbon-trip.json",
                       provider="anthropic", policy="salience", gated=True, budget=100, hard_ceiling=150,
                       capture_content=False, source_id="s-recorded"))
    s = ScriptedSession(ts, budget=100, hard_ceiling=150, gated=True)
    s.message("append", "m1", role="system", unit="u1", tokens=10)
    s.unit_close("u1", "system", ["m1"])
    s.message("append", "m2", role="user", unit="u2", tokens=20)
    s.unit_close("u2", "user", ["m2"])
    s.message("append", "m3", role="assistant", unit="u3", tokens=50, call_ids=["c1", "c2"],
              tool_names=["get_weather", "search_hotels"])
    s.message("append", "m4", role="tool", unit="u3", tokens=30, answers=["c1"])
    s.check("deferred", reason="pending_calls", child="prunegate.defer",
            child_attrs={"prunegate.reason": "pending_calls", "prunegate.blocking.units": ["u3"]})
    s.message("open", "m5", role="tool", unit="u3", tokens=0, answers=["c2"], closed=False)
    s.message("delta", "m5", tokens=45, closed=False)
    s.message("close", "m5", tokens=45, closed=True)
    s.unit_close("u3", "batch", ["m3", "m4", "m5"], ["c1", "c2"])
    s.check("spilled", reason="hard_ceiling", child="prunegate.spill",
            child_attrs={"prunegate.spilled.units": ["u3"], "prunegate.reason": "hard_ceiling"},
            remove=["m3", "m4", "m5"], cause="spilled:u3")
    s.message("append", "m6", role="user", unit="u6", tokens=10)
    s.unit_close("u6", "user", ["m6"])
    ts.end()
    return {"session_id": session_id, "max_seq": s.seq}


def recorded_session(provider: TracerProvider, *, session_id: str = "s-recorded") -> dict[str, Any]:
    """The imported recording both replays above replay: two messages, no decisions."""
    ts = TracedSession(provider, SessionConfig(session_id=session_id, source="import", name="lisbon-trip.json",
                       provider="anthropic", capture_content=False))
    s = ScriptedSession(ts, budget=100)
    s.message("append", "m1", role="system", unit="u1", tokens=10)
    s.message("append", "m2", role="user", unit="u2", tokens=20)
    ts.end()
    return {"session_id": session_id, "max_seq": s.seq}


def scripted_store(path: Path) -> dict[str, dict[str, Any]]:
    """A store with the three scripted sessions; returns what each one should show."""
    with recording(path) as provider:
        out = {
            "orphan": orphan_session(provider),
            "gated": gated_session(provider),
            "recorded": recorded_session(provider),
        }
    return out


REPO = Path(__file__).resolve().parents[1]
DEMO_FILES = ("data/sessions/anthropic-parallel.jsonl", "data/sessions/openai-support.jsonl")
HOSTILE_NAME = "trip <b>bold</b> <script>alert(1)</script>"


def hostile_body() -> dict[str, Any]:
    """A recorded Anthropic conversation whose name and one tool result hold HTML and a script."""
    calls = [("call_weather", "get_weather"), ("call_hotel", "search_hotels"), ("call_book", "book_flight")]
    filler = "Lisbon is lovely in spring; the old town is steep. " * 12
    return {
        "id": HOSTILE_NAME, "model": "claude-test", "max_tokens": 512,
        "system": "You are a travel agent. Use tools.",
        "side_effect_tools": ["book_flight"],
        "messages": [
            {"role": "user", "content": "Plan my trip to Lisbon. " + filler},
            {"role": "assistant", "content": [{"type": "text", "text": "Sure. " + filler}]},
            {"role": "user", "content": "Book it. " + filler},
            {"role": "assistant", "content": [{"type": "text", "text": "Checking three things at once."}]
             + [{"type": "tool_use", "id": cid, "name": name, "input": {"city": "Lisbon"}} for cid, name in calls]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_weather", "content": "sunny, 24C. " + filler},
                {"type": "tool_result", "tool_use_id": "call_hotel", "content": HOSTILE + " " + filler},
                {"type": "tool_result", "tool_use_id": "call_book", "content": "booked LIS-42 " + HOSTILE},
            ]},
            {"role": "assistant", "content": [{"type": "text", "text": "Done: LIS-42. " + filler}]},
            {"role": "user", "content": "Thanks; what was the confirmation code?"},
        ],
    }


def demo_store(path: Path, *, per_file: int = 3, policies: Sequence[tuple[str, bool]] = (
        ("salience", False), ("salience", True), ("recency", True))) -> dict[str, Any]:
    """A store like the demo's: recorded sessions imported from data/sessions (``per_file`` from
    each file) plus the hostile one, each replayed under ``policies`` (name, gated), all through
    the real importer, replay engine, observer and store pipeline."""
    from tracer.lab import ReplaySpec, replay_session
    from tracer.traffic import close_provider, import_paths, load_conversations, store_tracer_provider

    src = path.parent / (path.name + "-inputs")
    src.mkdir(parents=True, exist_ok=True)
    files = []
    for rel in DEMO_FILES:
        lines = (REPO / rel).read_text().splitlines()[:per_file]
        out = src / Path(rel).name
        out.write_text("\n".join(lines) + "\n")
        files.append(out)
    hostile = src / "hostile.jsonl"
    hostile.write_text(json.dumps(hostile_body()) + "\n")
    files.append(hostile)
    report = import_paths(files, path)
    if report.refused:
        raise AssertionError(f"demo inputs refused: {report.refused}")
    convs = load_conversations(path)
    provider = store_tracer_provider(path)
    results = []
    try:
        for conv in convs:
            for policy, gated in policies:
                results.append(replay_session(conv, ReplaySpec(policy, gated=gated), tracer_provider=provider,
                                              capture_content=True))
    finally:
        close_provider(provider)
    return {"imported": report.session_ids, "results": results}


__all__ = ["HOSTILE", "HOSTILE_NAME", "Link", "ScriptedSession", "demo_store", "gated_session", "hostile_body",
           "orphan_session", "recorded_session", "recording", "scripted_store"]
