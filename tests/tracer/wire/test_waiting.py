"""Waiting GenAI conversations in ``serve``: stitching work per round, the memory cap, the journal and kill -9."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.tracer.wire.test_serve import Served, post
from tracer.store import Store
from tracer.wire.waiting import SPILLED_COST, Conversations, journal_line

OUT = [{"role": "assistant", "parts": [{"type": "text", "content": "ok"}], "finish_reason": "stop"}]


def _request(conv: int, turn: int, pad: int = 0) -> list[dict]:
    """Conversation ``conv``'s request at ``turn``: its own system prompt (``pad`` more characters),
    then user/assistant pairs."""
    msgs = [{"role": "system", "parts": [{"type": "text", "content": f"agent {conv}" + "x" * pad}]}]
    for t in range(turn + 1):
        msgs.append({"role": "user", "parts": [{"type": "text", "content": f"question {t} of {conv}"}]})
        if t < turn:
            msgs.append({"role": "assistant", "parts": [{"type": "text", "content": "ok"}]})
    return msgs


def _attrs(conv: int, turn: int, keyed: bool, pad: int = 0) -> dict[str, str]:
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o",
             "gen_ai.input.messages": json.dumps(_request(conv, turn, pad)), "gen_ai.output.messages": json.dumps(OUT)}
    if keyed:
        attrs["gen_ai.conversation.id"] = f"c{conv}"
    return attrs


def _row(conv: int, turn: int, keyed: bool, pad: int = 0) -> dict:
    return {"trace_id": f"{conv:016x}{turn:016x}", "span_id": f"{conv:012x}{turn:04x}", "name": "chat gpt-4o",
            "start_time_ns": 1_700_000_000_000_000_000 + conv * 1000 + turn,
            "attributes": _attrs(conv, turn, keyed, pad)}


def _round_ops(waiting: int) -> int:
    """Stitching probes for one round of 200 new calls (100 next turns, 100 new conversations) with
    ``waiting`` conversations already waiting, half keyed by conversation id, half by prefix only."""
    conversations = Conversations(idle=3600)
    conversations.add([_row(c, 0, keyed=c % 2 == 0) for c in range(waiting)], now=0.0)
    before = conversations.stitcher.ops
    new = [_row(c, 1, keyed=c % 2 == 0) for c in range(100)]
    new += [_row(waiting + c, 0, keyed=c % 2 == 0) for c in range(100)]
    conversations.add(new, now=1.0)
    assert len(conversations.stitcher) == waiting + 100  # the next turns joined their conversations
    return conversations.stitcher.ops - before


def test_stitching_work_per_round_does_not_grow_with_what_waits():
    ops = {n: _round_ops(n) for n in (500, 2000, 8000)}
    assert ops[8000] == ops[500], ops  # the same new calls: the same probes, whatever waits


def test_due_takes_only_quiet_conversations_and_each_call_once():
    conversations = Conversations(idle=10)
    conversations.add([_row(c, 0, keyed=False) for c in range(3)], now=0.0)
    conversations.add([_row(0, 1, keyed=False), _row(0, 1, keyed=False)], now=8.0)  # a retried batch too
    due = conversations.due(now=10.0)
    assert sorted(c.span_ids[0] for c in due) == [_row(1, 0, False)["span_id"], _row(2, 0, False)["span_id"]]
    conversations.done(due)
    assert conversations.due(now=17.0) == []
    (chain,) = conversations.due(now=18.0)
    assert chain.span_ids == [_row(0, 0, False)["span_id"], _row(0, 1, False)["span_id"]]


def test_due_takes_at_most_the_limit_oldest_first_and_the_rest_next_time():
    conversations = Conversations(idle=1)
    conversations.add([_row(c, 0, keyed=True) for c in range(5)], now=0.0)
    first = conversations.due(now=5.0, limit=2)
    assert [c.last.conversation_id for c in first] == ["c0", "c1"]
    conversations.done(first)
    assert [c.last.conversation_id for c in conversations.due(now=5.0)] == ["c2", "c3", "c4"]


def test_memory_cap_is_reached_and_freed():
    rows = [_row(c, 0, keyed=True) for c in range(50)]
    conversations = Conversations(idle=1, max_bytes=sum(len(journal_line(r)) for r in rows[:40]))
    conversations.add(rows[:39], now=0.0)
    assert not conversations.full()
    conversations.add(rows[39:], now=0.0)
    assert conversations.full()
    conversations.done(conversations.due(now=2.0))
    assert not conversations.full() and conversations.waiting_bytes == 0


def test_past_the_cap_the_oldest_conversations_spill_to_the_journal_and_keep_stitching(tmp_path):
    rows = [_row(c, 0, keyed=c % 2 == 0, pad=4000) for c in range(50)]
    cap = sum(len(journal_line(r)) for r in rows[:10])
    conversations = Conversations(idle=5, max_bytes=cap, journal_root=tmp_path)
    conversations.add(rows, now=0.0)
    assert 40 <= conversations.spilled <= 45 and conversations.waiting_bytes <= cap
    assert not conversations.full()
    spilled = [c for c in conversations.stitcher.chains.values() if c.spilled]
    assert spilled and all(c.last.input == [] for c in spilled)  # their messages left memory
    # the next turn of every conversation still joins it: keyed ones by id, the others by request hash
    conversations.add([_row(c, 1, keyed=c % 2 == 0, pad=4000) for c in range(50)], now=1.0)
    assert len(conversations.stitcher) == 50
    due = conversations.due(now=10.0)
    assert len(due) == 50 and all(len(c.span_ids) == 2 for c in due)
    assert all(len(c.last.input) == 4 for c in due)  # system, question 0, answer, question 1: read back
    assert conversations.reloaded == sum(1 for c in due if c.spilled) > 0
    conversations.done(due)
    assert conversations.waiting_bytes == 0 and len(conversations) == 0


def test_spilled_conversations_fill_the_cap_at_last_and_without_a_journal_nothing_spills(tmp_path):
    rows = [_row(c, 0, keyed=True, pad=4000) for c in range(50)]
    conversations = Conversations(idle=1, max_bytes=10 * SPILLED_COST, journal_root=tmp_path)
    conversations.add(rows, now=0.0)
    assert conversations.spilled == 50 and conversations.full()  # what serve answers 429 for
    unjournaled = Conversations(idle=1, max_bytes=10 * SPILLED_COST)
    unjournaled.add(rows, now=0.0)
    assert unjournaled.full() and unjournaled.spilled == 0


def test_journal_keeps_what_waits_and_is_adopted_once_its_process_is_gone(tmp_path):
    first = Conversations(idle=1, journal_root=tmp_path)
    first.add([_row(c, t, keyed=c == 0) for c in range(4) for t in range(2)], now=0.0)
    first.done([c for c in first.due(now=5.0) if c.last.conversation_id == "c0"])
    first.journal.rewrite(first._live)  # what the next done() does once the journal is mostly dead
    assert sum(1 for _ in open(first.journal.path)) == 6
    second = Conversations(idle=1, journal_root=tmp_path)
    assert second.adopt() == 0  # the first one's journal is locked while it lives
    first.journal._file.close()  # its process died: the lock is gone
    assert second.adopt() == 6 and len(second.stitcher) == 3
    assert [p.name for p in tmp_path.iterdir()] == [second.journal.path.name]


def _span_batches(convs: int, turns: int) -> list[list]:
    """One list of finished SDK spans per turn round (each conversation's turn ``t`` in round ``t``)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("some.genai.lib")
    batches = []
    for t in range(turns):
        for c in range(convs):
            with tracer.start_as_current_span("chat gpt-4o", attributes=_attrs(c, t, keyed=c % 2 == 0)):
                pass
        batches.append(memory.get_finished_spans()[-convs:])
    return batches


def _imports(store: Path) -> dict[str, int]:
    rows = Store(store).query(
        "SELECT s.session_id, count(*) AS n FROM spans s JOIN sessions USING (session_id) "
        "WHERE sessions.source = 'import' AND s.name = 'prunegate.message' GROUP BY 1")
    return {r["session_id"]: int(r["n"]) for r in rows}


def test_kill_9_then_restart_every_acknowledged_conversation_becomes_a_session(tmp_path):
    store = tmp_path / "store"
    convs, turns = 12, 3
    s = Served(store, "--compact-every", "0", "--conversation-idle", "600")
    exporter = OTLPSpanExporter(endpoint=s.url)
    for batch in _span_batches(convs, turns):  # every request acknowledged (200) before the kill
        assert exporter.export(batch) is SpanExportResult.SUCCESS
    exporter.shutdown()
    os.kill(s.proc.pid, signal.SIGKILL)
    s.proc.wait(timeout=20)
    assert _imports(store) == {}  # nothing was quiet for 600 s: every conversation was still waiting

    again = Served(store, "--compact-every", "0", "--conversation-idle", "0.5")
    try:
        deadline = time.monotonic() + 60
        while len(_imports(store)) < convs and time.monotonic() < deadline:
            time.sleep(0.3)
        assert post(again.url, b"{}")[0] == 400  # still serving
    finally:
        out = again.stop()
    sessions = _imports(tmp_path / "store")
    # one session per conversation, each whole: system + 3 questions + 2 answers + the last reply
    assert len(sessions) == convs and set(sessions.values()) == {1 + 2 * turns}, sessions
    assert f"({convs} GenAI sessions)" in out
    assert list((store / "serve-waiting").iterdir()) == []  # adopted, finished, and the journal removed


def _big_request(conv: int, size: int) -> bytes:
    """One chat span (conversation ``c{conv}``) whose request holds about ``size`` bytes of text."""
    row = _row(conv, 1, keyed=True)
    inp = [{"role": "user", "parts": [{"type": "text", "content": "x" * size}]}]
    attrs = {**row["attributes"], "gen_ai.input.messages": json.dumps(inp)}
    span = {"traceId": row["trace_id"], "spanId": row["span_id"], "name": "chat gpt-4o", "kind": 3,
            "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000001000000000",
            "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()]}
    return json.dumps({"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [
        {"scope": {"name": "some.genai.lib"}, "spans": [span]}]}]}).encode()


def test_past_the_memory_cap_serve_spills_to_the_journal_and_every_conversation_becomes_a_whole_session(tmp_path):
    s = Served(tmp_path / "store", "--compact-every", "0", "--conversation-idle", "1", "--conversation-memory", "1")
    try:
        for conv in range(1, 4):  # 3 x 0.6 MB into a 1 MiB cap: the oldest spill, nothing is refused
            assert post(s.url, _big_request(conv, 600_000))[0] == 200
        deadline = time.monotonic() + 30
        while len(_imports(s.store)) < 3 and time.monotonic() < deadline:
            time.sleep(0.3)
    finally:
        out = s.stop()
    assert "refused: none" in out and "spilled past the memory cap: 2 (read back: 2)" in out, out
    rows = Store(s.store).query(
        "SELECT s.session_id, max(length(s.attributes->>'prunegate.message.content')) AS chars FROM spans s "
        "JOIN sessions USING (session_id) WHERE sessions.source = 'import' AND s.name = 'prunegate.message' GROUP BY 1")
    # each conversation a session, its 600 kB question read back from the journal whole
    assert len(rows) == 3 and all(r["chars"] >= 600_000 for r in rows), rows


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def test_session_process_killed_mid_commit_loses_nothing_and_each_conversation_is_one_whole_session(
        tmp_path, monkeypatch):
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from tracer.traffic.committer import FAULT_ENV
    from tracer.wire.serve import Receiver

    store = Store(tmp_path / "store")
    store.ensure()
    receiver = Receiver(store, conversation_idle=600, session_processes=1)
    convs, turns = 10, 3
    for batch in _span_batches(convs, turns):
        receiver.ingest(encode_spans(batch))
    waiting = len(receiver.conversations)
    assert waiting == convs * turns
    # the session process stops itself once its segment is written (its claims not yet marked)
    monkeypatch.setenv(FAULT_ENV, "segment-written:1")
    result: dict[str, int] = {}
    flushing = threading.Thread(target=lambda: result.update(n=receiver.flush_conversations(force=True)))
    flushing.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pid = receiver.sessions_workers[0].pid
        if pid is not None and _state(pid) == "T":
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the session process never reached its segment")
    os.kill(pid, signal.SIGKILL)  # killed mid-commit: the receiver keeps the chunk waiting
    flushing.join(60)
    assert result == {"n": 0} and len(receiver.conversations) == waiting
    monkeypatch.delenv(FAULT_ENV)
    assert receiver.flush_conversations(force=True) == convs  # a new session process commits them all
    assert len(receiver.conversations) == 0 and receiver.stats.sessions == convs
    assert receiver.sessions_workers[0].pid not in (None, pid)
    receiver.close()
    sessions = _imports(store.path)  # each span id once, whatever the killed process wrote
    assert len(sessions) == convs and set(sessions.values()) == {1 + 2 * turns}, sessions


def test_a_conversation_its_recording_refuses_is_a_warning_and_the_others_are_stored_whole(tmp_path):
    from policies.messages import TOOL_USE, Block, Message
    from tracer.store.claims import is_committed
    from tracer.traffic.recorded import session_id_for
    from tracer.wire.serve import commit_due

    store = Store(tmp_path / "store")
    store.ensure()
    conversations = Conversations(idle=1)
    conversations.add([_row(c, t, keyed=True) for c in range(3) for t in range(2)], now=0.0)
    chains = conversations.due(now=10.0, limit=10)
    assert len(chains) == 3
    # the session process no longer builds each context before recording it: one the context refuses
    # (a tool call without an id, which decoding never lets through) is refused while it is recorded
    broken = chains[1].last
    broken.input.insert(1, Message(id="x", role="assistant", blocks=[Block(type=TOOL_USE, name="search")]))
    stored, warnings, refused = commit_due(store, [(c.last, c.first_trace, list(c.span_ids)) for c in chains],
                                           "full", 1.0)
    assert (stored, refused) == (2, None)
    assert len(warnings) == 1 and "could not be recorded" in warnings[0] and "no tool call id" in warnings[0]
    sessions = _imports(tmp_path / "store")
    # the two others whole (system + 2 questions + 1 answer + the reply); nothing of the refused one
    assert len(sessions) == 2 and set(sessions.values()) == {5}, sessions
    from tracer.traffic.importers import conversation_of_chain

    refused_sid = session_id_for(conversation_of_chain(broken, chains[1].first_trace, [], "otlp", check=False))
    assert refused_sid not in sessions and not is_committed(store.layout, refused_sid)


def test_two_session_processes_each_take_a_chunk_and_each_conversation_is_one_whole_session(tmp_path):
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from tracer.wire.serve import COMMIT_CHUNK, Receiver

    store = Store(tmp_path / "store")
    store.ensure()
    receiver = Receiver(store, conversation_idle=600, session_processes=2)
    convs, turns = COMMIT_CHUNK + 44, 2  # two chunks: one for each process
    for batch in _span_batches(convs, turns):
        receiver.ingest(encode_spans(batch))
    try:
        assert receiver.flush_conversations(force=True) == convs
        pids = {w.pid for w in receiver.sessions_workers}
        assert None not in pids and len(pids) == 2  # both processes committed a chunk
    finally:
        receiver.close()
    assert len(receiver.conversations) == 0 and receiver.stats.sessions == convs
    sessions = _imports(store.path)
    assert len(sessions) == convs and set(sessions.values()) == {1 + 2 * turns}
