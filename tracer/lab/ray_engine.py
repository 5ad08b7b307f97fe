"""Replays as Ray tasks: ``run_replays(..., engine="ray")`` and ``prunegate compare --engine ray``.

Why Ray: a team with a Ray cluster replays millions of sessions on it instead of on one machine's
process pool. The split is the local engine's, so the numbers are the same:

- a task is a chunk of sessions under **every** arm, replayed by the local engine's own loop
  (:func:`tracer.lab.compare._replay_cells`); it receives only those conversations (not the whole
  list), so each conversation is shipped once whatever the number of arms, and its event stream is
  built once and shared by the arms;
- each Ray worker process opens its own tracer pipeline into ``store_path`` (its own segments, as
  a local worker does) and flushes it before the task returns, so a finished task's traces are in
  the store whatever happens to the worker next;
- results come back as the task's :class:`SessionResult` objects (counts, the lost references and
  per-call token triples the cost needs; no traces, no messages), serialized by Ray.

``store_path`` must be visible to every node under the same path (a shared filesystem) when the
cluster has more than one machine; see docs/scale.md.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from tracer.errors import EngineError
from tracer.lab.replay import ReplaySpec, SessionResult
from tracer.traffic.importers import Conversation

_PROVIDERS: dict[str, Any] = {}  # per Ray worker process: store path -> tracer provider


def _provider(store_path: str | None) -> Any:
    if store_path is None:
        return None
    if store_path not in _PROVIDERS:
        from tracer.traffic.recorded import store_tracer_provider

        _PROVIDERS[store_path] = store_tracer_provider(store_path)
    return _PROVIDERS[store_path]


def replay_chunk(convs: list[Conversation], specs: list[ReplaySpec], store_path: str | None,
                 capture: bool) -> list[list[SessionResult]]:
    """Replay ``convs`` under every spec, session by session (the local engine's
    :func:`~tracer.lab.compare._replay_arms`); per session, one result per spec."""
    from tracer.lab.compare import _replay_arms

    provider = _provider(store_path)
    out = [_replay_arms(conv, specs, provider, capture) for conv in convs]
    if provider is not None:
        provider.force_flush()  # the task's traces are in the store before its result is
    return out


def run_on_ray(conversations: Sequence[Conversation], specs: Sequence[ReplaySpec], *,
               store_path: str | os.PathLike[str] | None, capture_content: bool, progress: Any,
               chunk: int, address: str | None) -> list[list[SessionResult]]:
    """:func:`tracer.lab.compare.run_replays` on Ray; results[arm][session], in input order.

    Connects to ``address`` (``"auto"``, ``"ray://head:10001"``), else starts a local Ray, unless
    this process has already called ``ray.init`` (then that cluster is used and left running)."""
    try:
        import ray
    except ModuleNotFoundError:
        raise EngineError("--engine ray needs Ray: pip install 'prunegate[ray]'") from None
    convs, specs = list(conversations), list(specs)
    if not convs or not specs:
        return [[] for _ in specs]
    started = not ray.is_initialized()
    if started:
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        except Exception as exc:  # noqa: BLE001 - Ray raises ValueError, ConnectionError, RuntimeError...
            where = f"the Ray cluster at {address}" if address else "a local Ray"
            raise EngineError(f"cannot start or reach {where}: {type(exc).__name__}: "
                              f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''}") from None
    try:
        task = ray.remote(replay_chunk)
        store = str(store_path) if store_path is not None else None
        starts = list(range(0, len(convs), chunk))
        pending = {task.remote(convs[s:s + chunk], specs, store, capture_content): s for s in starts}
        results: list[list[SessionResult | None]] = [[None] * len(convs) for _ in specs]
        total, done = len(convs) * len(specs), 0
        if progress:
            progress(0, total)
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                start = pending.pop(ref)
                per_session = ray.get(ref)
                for i, per_arm in enumerate(per_session):
                    for arm, row in enumerate(per_arm):
                        results[arm][start + i] = row
                    done += len(per_arm)
                if progress:
                    progress(done, total)
        return results  # type: ignore[return-value]  # every slot filled once every task has returned
    finally:
        if started:
            ray.shutdown()
