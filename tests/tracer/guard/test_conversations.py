"""One guard, many conversations: each keyed conversation is one session, whatever else runs."""

from __future__ import annotations

import threading

from policies import ApproxTokenCounter, validate
from tracer.guard import PruneGuard

FILLER = "details " * 40


def exchange(conv: str, i: int) -> list[dict]:
    return [{"role": "user", "content": f"{conv} question {i} " + FILLER},
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"{conv}_c{i}", "name": "lookup",
                                               "input": {"q": i}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"{conv}_c{i}",
                                          "content": "result " + FILLER}]},
            {"role": "assistant", "content": f"answer {i}"}]


def body(messages: list[dict]) -> dict:
    return {"model": "claude-x", "max_tokens": 64, "system": "be brief", "messages": messages}


def guard(rec, budget: int = 100_000) -> PruneGuard:
    return PruneGuard("recency", budget=budget, tracer_provider=rec.provider, token_counter=ApproxTokenCounter(),
                      detail="full")  # these tests read the message spans


def test_concurrent_keyed_conversations_are_one_session_each(rec):
    pg = guard(rec, budget=600)
    sent: dict[str, list[dict]] = {}
    errors: list[BaseException] = []

    def run(conv: str) -> None:
        try:
            history: list[dict] = []
            for i in range(12):
                history += exchange(conv, i)
                out = pg.gate(body(history + [{"role": "user", "content": f"{conv} next"}]), conversation=conv)
                assert validate(out, "anthropic") == []
                sent.setdefault(conv, []).append(out)
                pg.record_response({"content": [{"type": "text", "text": "ok"}]}, conversation=conv)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(f"conv{k}",)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    pg.close()
    assert pg.errors == 0 and pg.requests == 48
    roots = rec.named("prunegate.session")
    assert sorted(r.attributes["prunegate.session.key"] for r in roots) == [f"conv{k}" for k in range(4)]
    assert all(r.attributes["prunegate.requests"] == 12 for r in roots)
    assert set(pg.conversations.values()) == {r.attributes["prunegate.session.id"] for r in roots}
    for conv, outs in sent.items():  # no conversation ever saw another's messages
        others = {c for c in sent if c != conv}
        assert not any(o in str(out["messages"]) for out in outs for o in others)
    chats = rec.named("chat claude-x")
    assert len(chats) == 48 and all(c.end_time is not None for c in chats)


def test_a_keyed_history_the_framework_rewrote_stays_one_session(rec):
    pg = guard(rec)
    history = exchange("a", 0) + exchange("a", 1) + [{"role": "user", "content": "go on"}]
    pg.gate(body(history), conversation="thread-1")
    summary = [{"role": "user", "content": "Summary so far: two orders looked up."},
               {"role": "assistant", "content": "Noted."}, *exchange("a", 2)]
    out = pg.gate(body(summary + [{"role": "user", "content": "and now?"}]), conversation="thread-1")
    assert out["messages"][0]["content"] == "Summary so far: two orders looked up.", "the rewrite reached the model"
    assert len(out["messages"]) == len(summary) + 1
    pg.close()
    root = rec.one("prunegate.session")
    assert root.attributes["prunegate.session.rewrites"] == 1 and root.attributes["prunegate.requests"] == 2
    removed = [s for s in rec.named("prunegate.message") if s.attributes["prunegate.event"] == "remove"]
    assert removed and {s.attributes["prunegate.message.cause"] for s in removed} == {"history rewritten"}


def test_without_a_key_a_rewritten_history_starts_a_new_session(rec):
    pg = guard(rec)
    pg.gate(body(exchange("a", 0) + [{"role": "user", "content": "go on"}]))
    pg.gate(body([{"role": "user", "content": "something else entirely"}]))
    pg.close()
    assert len(rec.named("prunegate.session")) == 2
