"""A replay recorded at decisions, re-run at full on demand (tracer.lab.rerun): the re-run's spans,
read back from the store, are those of a direct full replay of the same session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.traffic import SAMPLE, TAU
from tracer.contract import names as sn
from tracer.lab import ReplaySpec, replay_session
from tracer.lab.rerun import rerun_at_full
from tracer.store import Store
from tracer.traffic import close_provider, import_paths, load_conversations, store_tracer_provider

# what differs between two recordings of the same steps: ids, and the re-run's own mark
_IDS = {sn.SESSION_ID, sn.GEN_AI_CONVERSATION_ID, "session.id", sn.REPLAY_RERUN_OF}


def shape(store: Store, session_id: str) -> list[tuple[Any, ...]]:
    """Every span of a session as (seq, name, parent's position, attributes without ids, events, the
    positions its links point at), in order; span ids in attributes become the positions they name."""
    with store.reader() as r:
        rows = r.query("SELECT s.span_id, s.parent_span_id, s.seq, s.name, s.attributes, s.events, s.links "
                       "FROM spans s WHERE s.session_id = ? ORDER BY s.start_time_ns, s.seq, s.name", [session_id])
    at = {row["span_id"]: i for i, row in enumerate(rows)}

    def pos(value: Any) -> Any:
        return [at.get(v, v) for v in value] if isinstance(value, list) else at.get(value, value)

    out = []
    for row in rows:
        attrs = {k: pos(v) if k.endswith(("span_id", "span_ids")) else v
                 for k, v in json.loads(row["attributes"]).items() if k not in _IDS}
        links = [at.get(link["span_id"]) for link in json.loads(row["links"] or "[]")]
        events = [(e["name"], {k: v for k, v in e["attributes"].items() if k not in _IDS})
                  for e in json.loads(row["events"] or "[]")]
        out.append((row["seq"], row["name"], at.get(row["parent_span_id"]), json.dumps(attrs, sort_keys=True),
                    json.dumps(events), links))
    return out


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "s")
    assert import_paths([SAMPLE / TAU.relative_to(TAU.parents[1])], s).sessions > 0
    return s


def test_a_decisions_replay_re_run_at_full_equals_a_direct_full_replay(store: Store) -> None:
    conv = next(c for c in load_conversations(store) if c.tool_calls >= 2)
    spec = ReplaySpec("recency", gated=True, seed=7)  # budget: 60% of the session, so it prunes
    provider = store_tracer_provider(store)
    try:
        original = replay_session(conv, ReplaySpec("recency", gated=True, seed=7, detail="decisions"),
                                  tracer_provider=provider, capture_content=True)
        direct = replay_session(conv, spec, tracer_provider=provider, capture_content=True)
    finally:
        close_provider(provider)
    assert original.prunes > 0 and original.replay_id and direct.replay_id

    rerun = rerun_at_full(store, original.replay_id)
    assert rerun not in (original.replay_id, direct.replay_id)
    got, want = shape(store, rerun), shape(store, direct.replay_id)
    assert got == want
    assert len(got) > len(shape(store, original.replay_id))  # the decisions replay had fewer spans
    with store.reader() as r:
        [root] = r.query("SELECT attributes FROM spans WHERE name = ? AND session_id = ?", [sn.SESSION, rerun])
    a = json.loads(root["attributes"])
    assert a[sn.REPLAY_RERUN_OF] == original.replay_id and a[sn.DETAIL] == "full"
    assert rerun_at_full(store, original.replay_id) == rerun  # asked again: the same re-run, not another
    assert rerun_at_full(store, direct.replay_id) == direct.replay_id  # recorded at full already


def test_what_cannot_be_re_run_says_why(store: Store) -> None:
    with pytest.raises(LookupError, match="no session of that id"):
        rerun_at_full(store, "replay-nope")
    imported = load_conversations(store)[0].session_id
    assert imported is not None
    with pytest.raises(LookupError, match="not a replay"):
        rerun_at_full(store, imported)
