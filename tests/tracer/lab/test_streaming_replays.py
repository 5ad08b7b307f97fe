"""Replays and comparisons stream sessions: generators in, the same results out, every replay in the store."""

from __future__ import annotations

from tests.paths import SESSIONS
from tracer.lab import arms, parse_policies, run_replays
from tracer.store import Store
from tracer.traffic import (
    Conversation,
    import_paths,
    iter_conversations,
    load_conversations,
    read_paths,
    select_sessions,
)


def _conversations() -> list[Conversation]:
    return [c for c in read_paths([SESSIONS]) if isinstance(c, Conversation)]


def _plain(results):
    return [[(r.source_id, r.policy, r.gated, r.events, r.model_calls, r.invalid_requests, r.prunes, r.deferrals,
              r.tokens_sent, r.peak_tokens, r.retained, r.references) for r in rs] for rs in results]


def test_a_generator_of_sessions_gives_the_list_results_with_two_workers(tmp_path):
    convs = _conversations()
    specs = arms(parse_policies("recency,salience"), "both", budget=400)
    serial = run_replays(convs, specs)
    consumed = []

    def one_shot():
        for c in convs:
            consumed.append(c.session_id)
            yield c

    parallel = run_replays(one_shot(), specs, workers=2, store_path=tmp_path / "s", chunk=1)
    assert consumed == [c.session_id for c in convs]
    assert _plain(parallel) == _plain(serial)
    with Store(tmp_path / "s").reader() as r:
        [row] = r.query("SELECT count(*) AS n FROM spans WHERE name = 'prunegate.session'")
        replay_ids = {x["session_id"] for x in r.query(
            "SELECT session_id FROM spans WHERE name = 'prunegate.session'")}
    assert row["n"] == len(convs) * len(specs)
    assert replay_ids == {res.replay_id for rs in parallel for res in rs}


def test_stored_sessions_are_read_a_batch_at_a_time_in_the_same_order(tmp_path):
    store = Store(tmp_path / "s")
    import_paths([SESSIONS], store)
    picked = select_sessions(store)
    whole = load_conversations(store)
    batched = list(iter_conversations(store, picked, batch=2))
    assert len(whole) >= 4
    assert [(c.session_id, len(c.messages), [m.id for m in c.messages]) for c in batched] == \
        [(c.session_id, len(c.messages), [m.id for m in c.messages]) for c in whole]
