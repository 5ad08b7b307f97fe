"""Detail levels (docs/spans.md): what each records, and that a session recorded at any level still
steps through in the replay view and replays from the store."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from policies import Context, Gate
from tests.invariants import Scripted
from tests.otel_memory import Recorder
from tests.scenarios import history, parallel_batch, result
from tests.traffic import TAU
from tracer import queries as q
from tracer.contract import names as sn
from tracer.guard import PruneGuard
from tracer.lab import ReplaySpec, replay_session
from tracer.spans import SessionConfig, SpanObserver, TracedSession
from tracer.store import Store
from tracer.traffic import Conversation, close_provider, store_tracer_provider
from tracer.traffic.importers import read_file
from tracer.traffic.recorded import iter_conversations, select_sessions

LEVELS = ("full", "checks", "decisions")


def record(detail: str, rec: Recorder) -> TracedSession:
    """A short gated session: a within-budget check, a prune, a parallel batch, a check while pending."""
    s = TracedSession(rec.provider, SessionConfig(source="synthetic", policy="scripted", budget=100, detail=detail))
    ctx = Context(observer=SpanObserver(s), session_id=s.session_id)
    history(ctx, turns=2)
    Gate(Scripted(), budget=100_000).check(ctx)
    Gate(Scripted(ctx.messages[2].id), budget=100).check(ctx)
    parallel_batch(ctx)
    ctx.append(result("call_weather", "sunny"))
    Gate(Scripted(), budget=10).check(ctx)
    s.end()
    return s


def replay_at_each_level(tmp_path: Path) -> tuple[Store, dict[str, str]]:
    """One recorded τ-bench conversation with tool calls, replayed gated at each level into one real
    store (budget: 60% of the session, so it prunes); the replay id per level."""
    conv = next(c for c in read_file(TAU) if isinstance(c, Conversation) and c.tool_calls >= 2)
    store = Store(tmp_path / "store")
    provider = store_tracer_provider(store)
    ids = {}
    try:
        for detail in LEVELS:
            spec = ReplaySpec("recency", gated=True, detail=detail)
            ids[detail] = replay_session(conv, spec, tracer_provider=provider, capture_content=True).replay_id
    finally:
        close_provider(provider)
    return store, ids


def test_each_level_records_what_docs_spans_says() -> None:
    counts, events = {}, {}
    for detail in LEVELS:
        rec = Recorder()
        record(detail, rec)
        counts[detail] = Counter(x.name for x in rec.spans)
        events[detail] = Counter(e.name for x in rec.spans for e in x.events)
        assert rec.one(sn.SESSION).attributes[sn.DETAIL] == detail
    full, checks, decisions = counts["full"], counts["checks"], counts["decisions"]
    assert full[sn.MESSAGE] > 0 and full[sn.UNIT_CLOSE] > 0 and not events["full"]
    assert checks[sn.MESSAGE] == checks[sn.UNIT_CLOSE] == decisions[sn.MESSAGE] == decisions[sn.UNIT_CLOSE] == 0
    # the same message events and unit closures, now span events
    for detail in ("checks", "decisions"):
        assert events[detail] == {sn.MESSAGE: full[sn.MESSAGE], sn.UNIT_CLOSE: full[sn.UNIT_CLOSE]}
    assert full[sn.BUDGET_CHECK] == checks[sn.BUDGET_CHECK] == 3
    assert decisions[sn.BUDGET_CHECK] == 2  # the within-budget check is no span
    for name in (sn.PRUNE, sn.DEFER):
        assert full[name] == checks[name] == decisions[name] == 1


def test_held_events_carry_their_step_and_ride_on_the_check_that_saw_them() -> None:
    rec = Recorder()
    record("checks", rec)
    first = sorted(rec.named(sn.BUDGET_CHECK), key=lambda x: x.start_time)[0]
    seqs = [e.attributes[sn.SEQ] for e in first.events]
    assert seqs == sorted(seqs) and max(seqs) <= first.attributes[sn.SEQ]
    assert {e.attributes[sn.EVENT] for e in first.events if e.name == sn.MESSAGE} == {"append"}


def test_past_128_events_the_oldest_go_on_messages_spans() -> None:
    rec = Recorder()
    s = TracedSession(rec.provider, SessionConfig(source="synthetic", detail="decisions"))
    ctx = Context(observer=SpanObserver(s), session_id=s.session_id)
    history(ctx, turns=150)  # 302 appends, no check at all
    s.end()
    batches = rec.named(sn.MESSAGES)
    sizes = [len(b.events) for b in batches]
    assert len(sizes) > 2 and set(sizes[:-1]) == {128} and 0 < sizes[-1] <= 128
    assert sum(e.name == sn.MESSAGE for b in batches for e in b.events) == 302
    assert all(e.attributes[sn.SEQ] for b in batches for e in b.events)


def test_a_sampled_out_guard_session_keeps_its_decisions() -> None:
    rec = Recorder()
    pg = PruneGuard("recency", budget=300, tracer_provider=rec.provider, sample_rate=0.0)
    body = {"model": "m", "max_tokens": 10, "messages": [
        {"role": "user", "content": "q " + "x " * 400}, {"role": "assistant", "content": "a " + "y " * 400},
        {"role": "user", "content": "and?"}]}
    pg.gate(body)
    pg.close()
    assert rec.one(sn.SESSION).attributes[sn.DETAIL] == "decisions"
    assert rec.one(sn.PRUNE) and not rec.named(sn.MESSAGE)
    with pytest.raises(ValueError, match="sample_rate"):
        PruneGuard("recency", sample_rate=2)
    with pytest.raises(ValueError, match="detail must be one of"):
        PruneGuard("recency", detail="some")


def test_a_production_guard_records_checks_by_default() -> None:
    rec = Recorder()
    pg = PruneGuard("recency", budget=100_000, tracer_provider=rec.provider)
    pg.gate({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]})
    pg.close()
    assert rec.one(sn.SESSION).attributes[sn.DETAIL] == "checks"
    assert not rec.named(sn.MESSAGE) and [e.name for e in rec.one(sn.BUDGET_CHECK).events] == [sn.MESSAGE, sn.UNIT_CLOSE]


def test_the_replay_view_and_replays_read_every_level_alike(tmp_path: Path) -> None:
    """One recorded conversation replayed at each level into a real store: the step engine shows
    the same context at every step, and the store gives back the same conversation to replay."""
    store, ids = replay_at_each_level(tmp_path)
    steps: dict[str, list[list[tuple]]] = {}
    logs: dict[str, list[tuple]] = {}
    histories: dict[str, list[tuple]] = {}  # what the message panel shows of each evicted message
    with store.reader() as r:
        for detail, sid in ids.items():
            tables = q.session_tables(r, sid)
            seqs = sorted(set(tables["msg_events"].column("seq").to_pylist()))
            assert seqs, f"no message events read back at {detail}"
            steps[detail] = [
                [tuple(row) for row in q.step_from_tables(tables, seq)["messages"][
                    ["message_id", "role", "unit_id", "tokens", "pending", "content"]].itertuples(index=False)]
                for seq in seqs]
            removed = tables["msg_events"].to_pandas().query("event == 'remove'")["message_id"]
            histories[detail] = sorted(tuple(row) for mid in removed for row in q.message_detail(r, sid, mid)[
                ["seq", "event", "unit_id", "tokens", "cause"]].fillna("").itertuples(index=False))
            log = q.step_from_tables(tables, seqs[-1], before=10**6, after=0)["events"]
            logs[detail] = [tuple(row) for row in log[log["name"].isin([sn.MESSAGE, sn.UNIT_CLOSE])][
                ["seq", "name", "what", "subject", "role", "context_tokens"]].itertuples(index=False)]
    assert steps["full"] == steps["checks"] == steps["decisions"]
    assert logs["full"] and logs["full"] == logs["checks"] == logs["decisions"]  # the event log beside the step
    assert histories["full"] and histories["full"] == histories["checks"] == histories["decisions"]
    picked = select_sessions(store, list(ids.values()), sources=("replay",))
    convs = {c.session_id: c for c in iter_conversations(store, picked)}
    texts = {d: [(m.role, m.plain_text()) for m in convs[sid].messages] for d, sid in ids.items()}
    assert texts["full"] == texts["checks"] == texts["decisions"] and texts["full"]


def test_the_gated_counterpart_step_is_the_same_at_every_level(tmp_path: Path) -> None:
    """The dashboard's "same step in the gated replay" (tracer.queries.explain.gated_counterpart)
    matches steps by message events: message spans at ``full``, span events below it."""
    from dataclasses import replace

    import pyarrow as pa

    from tracer import queries
    from tracer.queries import explain

    conv = next(c for c in read_file(TAU) if isinstance(c, Conversation) and c.tool_calls >= 2)
    conv = replace(conv, session_id="imp-counterpart")  # as a session from the store: the replays name their source
    found: dict[str, list[tuple[int, int | None]]] = {}
    seqs: list[int] = []
    for detail in LEVELS:  # full first
        store = Store(tmp_path / detail)
        provider = store_tracer_provider(store)
        try:
            ungated, _ = (replay_session(conv, ReplaySpec("recency", gated=g, detail=detail), tracer_provider=provider,
                                         capture_content=True).replay_id for g in (False, True))
        finally:
            close_provider(provider)
        with store.reader() as r:
            if detail == "full":  # every step is a span's at full; the same steps (seq) at every level
                seqs = [row["seq"] for row in r.query(
                    "SELECT DISTINCT seq FROM spans WHERE session_id = ? AND seq IS NOT NULL ORDER BY seq", [ungated])]
            found[detail] = [(seq, (explain.gated_counterpart(r, ungated, seq) or {}).get("step")) for seq in seqs]
            # the Replay page's way: the twin found once, each step from the two sessions' rows in memory
            twin = explain.gated_twin(r, ungated)
            assert twin is not None
            both = pa.concat_tables([queries.session_rows(r, ungated), queries.session_rows(r, twin)],
                                    promote_options="default")
            assert [(seq, queries.on_session_rows(both, lambda con, s=seq, u=ungated, t=twin: explain.twin_step(con, u, s, t)))
                    for seq in seqs] == found[detail]
    assert any(step is not None for _, step in found["full"])
    assert found["checks"] == found["decisions"] == found["full"]


def test_the_session_list_counts_messages_and_finds_text_at_every_level(tmp_path: Path) -> None:
    """The session list (tracer.queries.catalog) reads message counts, peak context and searchable
    text from message events, spans or span events: before compaction (no catalog: read per page)
    and after it (the catalog compaction writes), the same rows at every level."""
    from tests.traffic import SAMPLE
    from tracer.queries import catalog
    from tracer.traffic import import_paths

    src = SAMPLE / TAU.relative_to(TAU.parents[1])
    word = "baggage"  # in the sample's conversations (asserted below at full)
    pages: dict[tuple[str, bool], list[tuple]] = {}
    found: dict[tuple[str, bool], int] = {}
    for detail in LEVELS:
        store = Store(tmp_path / detail)
        assert import_paths([src], store, detail=detail).sessions > 0
        for compacted in (False, True):
            if compacted:
                store.compact()
            with store.reader() as r:
                rows = catalog.session_page(r, limit=100)["rows"]
                pages[detail, compacted] = sorted(
                    (x.label, int(x.messages), int(x.peak_tokens)) for x in rows.itertuples())
                found[detail, compacted] = catalog.session_page(r, search=word, limit=100)["total"]
    assert all(m > 0 for _, m, _ in pages["full", False])
    assert found["full", False] > 0
    assert len(set(map(tuple, pages.values()))) == 1 and len(set(found.values())) == 1, (pages.keys(), found)


def test_message_events_and_model_calls_store_the_same_attributes_at_every_level(tmp_path: Path) -> None:
    """Below ``full`` a message event's and a unit closure's attributes are built as the SDK stores
    them and written without a cleaning pass, and a replay's model call adds its attributes to be
    cleaned with its record (docs/performance.md, round 8): read back from the store, they are the
    attributes the same replay stores at ``full`` (where message events are spans of their own)."""
    store, ids = replay_at_each_level(tmp_path)
    common = {sn.SESSION_ID, "openinference.span.kind"}  # on every span, on no span event
    per_run = {sn.SESSION_ID, sn.GEN_AI_CONVERSATION_ID, sn.REFERENCES_LOST_PRUNE_SPANS}  # ids of this replay's own
    held: dict[str, list[tuple[str, dict]]] = {}
    chats: dict[str, list[dict]] = {}
    for detail, sid in ids.items():
        rows = store.spans(sid)
        if detail == "full":
            held[detail] = [(x["name"], {k: v for k, v in x["attributes"].items() if k not in common})
                            for x in rows if x["name"] in (sn.MESSAGE, sn.UNIT_CLOSE)]
        else:
            held[detail] = [(e["name"], e["attributes"]) for x in rows for e in x["events"]]
        chats[detail] = [{k: v for k, v in x["attributes"].items() if k not in per_run}
                         for x in rows if x["name"].startswith("chat")]
    full = sorted(held["full"], key=lambda p: (p[1][sn.SEQ], p[0], str(sorted(p[1].items()))))
    assert full and any(a.get(sn.UNIT_ID) for _, a in full) and any(a.get(sn.MESSAGE_CALL_IDS) for _, a in full)
    assert any(a.get(sn.MESSAGE_CONTENT) for _, a in full)  # content captured: the rarer attributes too
    for detail in ("checks", "decisions"):
        got = sorted(held[detail], key=lambda p: (p[1][sn.SEQ], p[0], str(sorted(p[1].items()))))
        assert got == full, detail
    assert chats["full"] and all(x[sn.REQUEST_MESSAGE_IDS] and x[sn.REQUEST_TOKENS] > 0 for x in chats["full"])
    assert chats["checks"] == chats["decisions"] == chats["full"]
