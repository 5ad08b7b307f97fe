"""A replay recorded below full detail, re-run at ``full`` on demand (docs/spans.md "Detail levels").

``compare`` records at ``decisions`` by default: the within-budget checks are no spans and message
events ride on check spans. When someone opens one of its steps and wants every span, the replay is
run again from the same source session with the same arm (policy, parameters, budget, hard ceiling,
arrival seed, streaming, mode), all read from the recorded root, at ``full``; replays are
deterministic, so the re-run takes the same steps. The re-run's root says what it re-runs
(``prunegate.replay.rerun_of``); asking again returns that re-run instead of running another.
"""

from __future__ import annotations

import json
import os
from typing import Any

from tracer.contract import names as sn
from tracer.store import Store
from tracer.store.lookups import rerun_session, root_attributes

__all__ = ["rerun_at_full", "rerun_of"]


def rerun_of(store: Store, replay_id: str) -> str | None:
    """The id of a stored re-run at full of ``replay_id``, if there is one (the oldest)."""
    with store.reader() as r:
        return rerun_session(r, replay_id)


def rerun_at_full(store: Store | str | os.PathLike[str], replay_id: str) -> str:
    """Re-run the stored replay ``replay_id`` at ``full`` detail into ``store``; returns the id of
    the session that has every span of it: ``replay_id`` itself when it was recorded at full, an
    earlier re-run when there is one, else the new re-run.

    LookupError when the store holds no such replay or no longer holds its source session (one
    line saying which); content is captured when the original replay captured it.
    """
    from tracer.lab.replay import ReplaySpec, replay_session
    from tracer.traffic import close_provider, store_tracer_provider
    from tracer.traffic.recorded import load_conversations

    store = store if isinstance(store, Store) else Store(store)
    with store.reader() as r:
        root = root_attributes(r, replay_id)
    if root is None:
        raise LookupError(f"{replay_id}: no session of that id in the store {store.path}")
    a: dict[str, Any] = json.loads(root)
    if a.get(sn.SESSION_SOURCE) != "replay":
        raise LookupError(f"{replay_id}: not a replay (source {a.get(sn.SESSION_SOURCE)!r}): only replays re-run")
    if a.get(sn.DETAIL, "full") == "full":
        return replay_id
    done = rerun_of(store, replay_id)
    if done is not None:
        return done
    source_id = a.get(sn.SESSION_SOURCE_ID)
    convs = load_conversations(store, [source_id]) if source_id else []
    if not convs:
        raise LookupError(f"{replay_id}: its source session {source_id!r} is not in the store {store.path}")
    params = json.loads(a[sn.POLICY_PARAMS]) if a.get(sn.POLICY_PARAMS) else {}
    spec = ReplaySpec(
        str(a[sn.POLICY]), params=tuple(params.items()), gated=bool(a.get(sn.GATED)), budget=a.get(sn.BUDGET),
        hard_ceiling=a.get(sn.HARD_CEILING), stream_results=int(a.get(sn.REPLAY_STREAM_RESULTS) or 0),
        seed=a.get(sn.REPLAY_SEED), mode=str(a.get(sn.REPLAY_MODE) or "grow"), label=a.get(sn.REPLAY_LABEL),
        detail="full", rerun_of=replay_id,
    )
    provider = store_tracer_provider(store)
    try:
        result = replay_session(convs[0], spec, tracer_provider=provider,
                                capture_content=bool(a.get(sn.CONTENT_CAPTURED)))
    finally:
        close_provider(provider)
    if result.replay_id is None:  # replay_session always names its session; kept for the type checker
        raise LookupError(f"{replay_id}: the re-run recorded no session")
    return result.replay_id
